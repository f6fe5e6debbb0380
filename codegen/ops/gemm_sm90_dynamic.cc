// The Hopper GEMM family on dynamic graphs (issue 34): a MatMul group whose rows vary
// with the dim symbols (the token count batch * seq of a transformer's projections)
// runs on kiln's kernel with the rows read at run time (gemm_sm90.cuh GEMM_DYNAMIC_M),
// one tile config per range of rows. Everything else of the problem is fixed: K, N, the
// weights, a stacked product's batch (fuse-siblings, whose pieces lie the largest
// product apart), and every epilogue operand reads the same elements at every size
// (a bias per column, or an operand laid out as C).
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_sm90.h"
#include "codegen/ops/kernel_util.h"
#include "common/status_macros.h"
#include "graph/fused_group.h"

namespace kiln::codegen::ops {
namespace {

struct DynamicGemm {
  GemmFamilyPlan plan;  // at the largest sizes
  DimExpr rows;         // C's rows (the plan's m at the largest sizes)
  std::vector<DimSymbol> symbols;
};

bool Fixed(const std::vector<DimExpr>& dims) {
  return std::all_of(dims.begin(), dims.end(), [](const DimExpr& d) { return d.IsConstant(); });
}

absl::StatusOr<DynamicGemm> Analyze(const Node& node) {
  if (!IsFusedGroup(node)) return NoKernel(node, "a MatMul outside a fused group (run-time sizes)");
  KILN_RETURN_IF_ERROR(Sm90Eligible(node));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Graph> body, FusedGroupBody(node));
  KILN_ASSIGN_OR_RETURN(GemmFamilyPlan p, PlanGemmForFamily(node));
  auto refuse = [&](const std::string& why) { return NoKernel(node, absl::StrCat(why, " (run-time sizes)")); };
  if (p.dual || p.prologue_a || p.prologue_b || p.gated || p.rotary_half > 0) {
    return refuse("a prologue, a second product, a gate or a rotation");
  }
  if (p.trans_a) return refuse("an A stored M-major");
  if (p.tf32) return refuse("tf32 operands");
  if (!Fixed(ValueDims(*node.input(p.b_input)))) return refuse("a B whose size varies");
  // C: [batch (fixed)..., rows..., N (fixed)].
  const std::vector<DimExpr> y = ValueDims(*node.output(0));
  if (y.size() < 2 || !y.back().IsConstant()) return refuse("a last dim that varies");
  size_t first = 0;
  for (int64_t batch = 1; batch < p.batch; ++first) {
    if (first + 2 >= y.size() || !y[first].IsConstant()) return refuse("a batch that varies");
    batch *= *y[first].constant();
    if (batch > p.batch) return refuse("a batch that is not C's leading dims");
  }
  DynamicGemm g{p, DimsProduct(std::vector<DimExpr>(y.begin() + first, y.end() - 1)), body->dim_symbols()};
  KILN_ASSIGN_OR_RETURN(int64_t largest, g.rows.Evaluate(LargestValues(g.symbols)));
  if (largest != p.m) return refuse("rows that are not C's");
  // A stacked product (batch > 1) shares A and lies the largest product apart, as its
  // pieces were planned (fuse-siblings' out_batch_stride).
  if (p.batch > 1) {
    bool stacked = false;
    for (const Node* n : body->nodes()) {
      if (n->op_type() == "MatMul") stacked |= n->GetInt("out_batch_stride", 0).value_or(0) == p.m * p.n;
    }
    if (p.a_batch != 0 || !stacked) return refuse("a batched product whose batch stride varies");
  }
  // Each epilogue operand: a row broadcast over C's rows (a bias), or laid out as C.
  const Shape& os = p.out_shape;
  for (const GemmFamilyPlan::EpilogueLoad& ld : p.epilogue_loads) {
    const Shape& v = ld.view;  // right-aligned against C
    bool column = ld.dense && v.size() <= os.size();
    for (size_t d = 0; column && d + 1 < v.size(); ++d) column = d + os.size() - v.size() < first || v[d] == 1;
    const bool like_c = ld.dense && p.batch == 1 && v == os && ValueDims(*node.input(ld.input)) == y;
    if (!column && !like_c) {
      return refuse(absl::StrCat("an epilogue operand ('", node.input(ld.input)->name(),
                                 "') read at strides that vary with the sizes"));
    }
  }
  return g;
}

// The windows of rows that each take one tile pick, from `first` to `most`: 8 rows
// each up to kSm90SwapAbMaxM (the few-rows swap-AB tiles are as wide as the rows,
// rounded up to 8), then 64 each (the heuristic's other choices change only where some
// tile count does, and every unswapped tile is a multiple of 64 rows high). A window is
// [lo, hi]; the pick is made at hi.
std::vector<std::array<int64_t, 2>> RowWindows(int64_t first, int64_t most) {
  std::vector<std::array<int64_t, 2>> windows;
  for (int64_t lo = first; lo <= most;) {
    const int64_t step = lo <= kSm90SwapAbMaxM ? 8 : 64;
    const int64_t hi = std::min(most, std::max((lo + step - 1) / step * step, step));
    windows.push_back({lo, hi});
    lo = hi + 1;
  }
  return windows;
}

// The least and the most rows that the ranges' sizes reach in each window ({-1, -1}
// where none): the rows evaluated at every combination of the symbols' values, or,
// past kMaxCombinations of them, every window whole.
std::vector<std::array<int64_t, 2>> ReachedRows(const DynamicGemm& g,
                                                const std::vector<std::array<int64_t, 2>>& windows) {
  constexpr int64_t kMaxCombinations = int64_t{1} << 20;
  int64_t combinations = 1;
  for (const DimSymbol& s : g.symbols) {
    combinations = std::min(kMaxCombinations + 1, combinations * (s.max - s.min + 1));
  }
  if (combinations > kMaxCombinations) return windows;
  std::vector<std::array<int64_t, 2>> reached(windows.size(), {-1, -1});
  std::vector<int64_t> values;
  for (const DimSymbol& s : g.symbols) values.push_back(s.min);
  for (int64_t c = 0; c < combinations; ++c) {
    const absl::StatusOr<int64_t> rows = g.rows.Evaluate(values);
    const auto w = std::lower_bound(windows.begin(), windows.end(), rows.ok() ? *rows : -1,
                                    [](const std::array<int64_t, 2>& win, int64_t r) { return win[1] < r; });
    if (!rows.ok() || w == windows.end() || *rows < (*w)[0]) return windows;  // not expected: every window
    std::array<int64_t, 2>& r = reached[w - windows.begin()];
    r = r[0] < 0 ? std::array<int64_t, 2>{*rows, *rows}
                 : std::array<int64_t, 2>{std::min(r[0], *rows), std::max(r[1], *rows)};
    for (size_t i = 0; i < values.size() && ++values[i] > g.symbols[i].max; ++i) values[i] = g.symbols[i].min;
  }
  return reached;
}

}  // namespace

absl::Status DynamicSm90Eligible(const Node& node) { return Analyze(node).status(); }

absl::StatusOr<std::vector<KernelLaunch>> GenerateDynamicMatMulGroupSm90(const Node& node, int sm_count,
                                                                         const Sm90TunedRows* tuned) {
  KILN_ASSIGN_OR_RETURN(const DynamicGemm g, Analyze(node));
  const GemmFamilyPlan& p = g.plan;
  if (sm_count <= 0) sm_count = 132;
  // A tile per range of rows: the heuristic's pick (HeuristicSm90GemmConfigForRows)
  // at the top of each window of rows (RowWindows) that some sizes of the ranges reach
  // (ResNet's batch x pixels takes multiples of the pixels only), runs of one pick
  // joined into a range from their least to their most reached rows; ranges with the
  // same tile share a launch. A tuned config replaces the pick of the window that
  // holds its rows.
  struct Variant {
    Sm90GemmConfig config;
    bool tuned = false;
    std::vector<std::array<int64_t, 2>> ranges;
    int64_t max_m = 0;
  };
  std::vector<Variant> variants;
  // The rows lie between their least and greatest values over the ranges (the
  // greatest is C's rows at the largest sizes, Analyze checked).
  KILN_ASSIGN_OR_RETURN(const auto bounds, g.rows.Bounds(g.symbols));
  if (bounds.second != p.m || bounds.first > p.m) {
    return NoKernel(node, "run-time sizes: rows that are not greatest at the ranges' largest values");
  }
  const std::vector<std::array<int64_t, 2>> windows = RowWindows(std::max<int64_t>(bounds.first, 0), p.m);
  const std::vector<std::array<int64_t, 2>> reached = ReachedRows(g, windows);
  const std::string code = DimCode(g.rows);
  std::string last;
  for (size_t w = 0; w < windows.size(); ++w) {
    if (reached[w][0] < 0) continue;
    Sm90GemmConfig cfg = HeuristicSm90GemmConfigForRows(node, p, windows[w][1], sm_count);
    const bool take_tuned = tuned != nullptr && tuned->rows >= windows[w][0] && tuned->rows <= windows[w][1] &&
                            GenerateSm90RunTimeRows(node, tuned->config, {code, reached[w][1]}, sm_count).ok();
    if (take_tuned) cfg = tuned->config;
    const std::string text = Sm90GemmConfigString(cfg);
    auto it = std::find_if(variants.begin(), variants.end(),
                           [&](const Variant& v) { return Sm90GemmConfigString(v.config) == text; });
    if (it == variants.end()) it = variants.insert(variants.end(), Variant{cfg, false, {}, 0});
    it->tuned |= take_tuned;
    if (text == last) {
      it->ranges.back()[1] = reached[w][1];
    } else {
      it->ranges.push_back(reached[w]);
    }
    it->max_m = std::max(it->max_m, reached[w][1]);
    last = text;
  }
  std::vector<KernelLaunch> launches;
  for (Variant& v : variants) {
    absl::StatusOr<KernelLaunch> l = GenerateSm90RunTimeRows(node, v.config, {code, v.max_m}, sm_count);
    if (!l.ok() && v.config.split_k > 1) {  // a split the most rows' workspace does not fit
      v.config.split_k = 1;
      l = GenerateSm90RunTimeRows(node, v.config, {code, v.max_m}, sm_count);
    }
    if (!l.ok()) return NoKernel(node, absl::StrCat("run-time sizes: ", l.status().message()));
    if (v.tuned) absl::StrAppend(&l->config, " (tuning database, at ", tuned->rows, " rows)");
    if (variants.size() > 1) {
      l->size_select = g.rows;
      l->size_ranges = std::move(v.ranges);
    }
    launches.push_back(*std::move(l));
  }
  return launches;
}

}  // namespace kiln::codegen::ops
