#include "codegen/ops/size_variants.h"

#include <algorithm>
#include <cmath>

namespace kiln::codegen::ops {
namespace {

// Whether one of `exprs` changes when symbol `k` alone goes from its largest value to
// its smallest.
bool DependsOn(const std::vector<DimSymbol>& symbols, const std::vector<DimExpr>& exprs, size_t k) {
  std::vector<int64_t> at_max, moved;
  for (const DimSymbol& s : symbols) at_max.push_back(s.max);
  moved = at_max;
  moved[k] = symbols[k].min;
  for (const DimExpr& e : exprs) {
    if (e.Evaluate(at_max).value_or(0) != e.Evaluate(moved).value_or(0)) return true;
  }
  return false;
}

// The first cut past `x`: the next power of two.
int64_t NextCut(int64_t x) {
  int64_t p = 1;
  while (p * 2 <= x) p *= 2;
  return p * 2;
}

// [lo, hi] cut at NextCut's points.
std::vector<std::array<int64_t, 2>> Cuts(int64_t lo, int64_t hi) {
  std::vector<std::array<int64_t, 2>> out;
  for (int64_t start = lo; start <= hi;) {
    const int64_t next = NextCut(start);
    out.push_back({start, std::min(hi, next - 1)});
    start = next;
  }
  return out;
}

}  // namespace

std::vector<SizeBox> PowerOfTwoBoxes(const std::vector<DimSymbol>& symbols, const std::vector<DimExpr>& exprs) {
  std::vector<SizeBox> boxes(1);
  for (size_t k = 0; k < symbols.size(); ++k) {
    const DimSymbol& s = symbols[k];
    const std::vector<std::array<int64_t, 2>> cuts =
        DependsOn(symbols, exprs, k) ? Cuts(s.min, s.max) : std::vector<std::array<int64_t, 2>>{{s.min, s.max}};
    std::vector<SizeBox> next;
    for (const SizeBox& b : boxes) {
      for (const auto& [lo, hi] : cuts) {
        SizeBox c = b;
        c.ranges.push_back({lo, hi});
        c.middle.push_back(std::llround(std::sqrt(static_cast<double>(std::max<int64_t>(lo, 1)) * hi)));
        next.push_back(std::move(c));
      }
    }
    boxes = std::move(next);
  }
  return boxes;
}

}  // namespace kiln::codegen::ops
