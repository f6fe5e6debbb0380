// Folding of shape arithmetic on symbolic values (graph/symbolic_shapes.h):
// Shape and Size of dynamic values, and the Gather / Slice / Concat / Unsqueeze
// / arithmetic / comparisons the exporters put between a Shape and the Reshape
// or Expand that reads it. Comparisons fold only when their result is the same
// for every size in the ranges.
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/symbolic_shapes.h"

namespace kiln {
namespace {

using Dims = std::vector<DimExpr>;
using Folded = std::optional<std::vector<Dims>>;

bool IsIntegral(DType t) { return t == DType::kInt64 || t == DType::kInt32; }

// Elementwise over two lists under numpy broadcasting of rank <= 1 operands.
template <typename F>
absl::StatusOr<std::optional<Dims>> Zip(const Dims& a, const Dims& b, F f) {
  if (a.size() != b.size() && a.size() != 1 && b.size() != 1) return std::optional<Dims>();
  const size_t n = std::max(a.size(), b.size());
  Dims out;
  for (size_t i = 0; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(std::optional<DimExpr> r, f(a[a.size() == 1 ? 0 : i], b[b.size() == 1 ? 0 : i]));
    if (!r) return std::optional<Dims>();
    out.push_back(*r);
  }
  return std::optional<Dims>(std::move(out));
}

// The sign of a - b when it is the same for every size in the ranges: -1, 0, 1.
absl::StatusOr<std::optional<int>> Compare(const DimExpr& a, const DimExpr& b, absl::Span<const DimSymbol> symbols) {
  KILN_ASSIGN_OR_RETURN(DimExpr d, DimExpr::Sub(a, b));
  KILN_ASSIGN_OR_RETURN(auto bounds, d.Bounds(symbols));
  if (bounds.first == 0 && bounds.second == 0) return std::optional<int>(0);
  if (bounds.first > 0) return std::optional<int>(1);
  if (bounds.second < 0) return std::optional<int>(-1);
  return std::optional<int>();
}

absl::StatusOr<std::optional<Dims>> Binary(const Node& node, const Dims& a, const Dims& b,
                                           absl::Span<const DimSymbol> symbols) {
  const std::string& op = node.op_type();
  return Zip(a, b, [&](const DimExpr& x, const DimExpr& y) -> absl::StatusOr<std::optional<DimExpr>> {
    if (op == "Add") return DimExpr::Add(x, y);
    if (op == "Sub") return DimExpr::Sub(x, y);
    if (op == "Mul") return DimExpr::Mul(x, y);
    if (op == "Div") return DimExpr::DivideExactly(x, y);
    KILN_ASSIGN_OR_RETURN(std::optional<int> c, Compare(x, y, symbols));
    if (!c) return std::optional<DimExpr>();
    if (op == "Min") return *c <= 0 ? x : y;
    if (op == "Max") return *c >= 0 ? x : y;
    bool r = false;
    if (op == "Equal")
      r = *c == 0;
    else if (op == "Less")
      r = *c < 0;
    else if (op == "LessOrEqual")
      r = *c <= 0;
    else if (op == "Greater")
      r = *c > 0;
    else if (op == "GreaterOrEqual")
      r = *c >= 0;
    else
      return std::optional<DimExpr>();
    return DimExpr::Constant(r ? 1 : 0);
  });
}

int64_t Clamp(int64_t v, int64_t lo, int64_t hi) { return std::min(std::max(v, lo), hi); }

Folded One(Dims d) { return std::vector<Dims>{std::move(d)}; }

absl::StatusOr<Folded> FoldShape(const Node& node) {
  const Dims dims = SymbolicShape(*node.input(0));
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (node.op_type() == "Size") {
    DimExpr p = DimExpr::Constant(1);
    for (const DimExpr& d : dims) {
      KILN_ASSIGN_OR_RETURN(p, DimExpr::Mul(p, d));
    }
    return One({p});
  }
  KILN_ASSIGN_OR_RETURN(int64_t start, node.GetInt("start", 0));
  KILN_ASSIGN_OR_RETURN(int64_t end, node.GetInt("end", rank));
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = Clamp(start, 0, rank);
  end = Clamp(end, start, rank);
  return One(Dims(dims.begin() + start, dims.begin() + end));
}

absl::StatusOr<Folded> FoldGather(const Node& node, const Dims& data) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", 0));
  const Value* indices = node.input(1);
  if ((axis != 0 && axis != -1) || indices->has_symbolic_data() || indices->rank() > 1) return Folded();
  Dims out;
  for (int64_t i : indices->constant().ToInt64()) {
    if (i < 0) i += static_cast<int64_t>(data.size());
    if (i < 0 || i >= static_cast<int64_t>(data.size())) return node.Error(absl::StrCat("index ", i, " out of range"));
    out.push_back(data[i]);
  }
  return One(std::move(out));
}

absl::StatusOr<Folded> FoldSlice(const Node& node, const Dims& data) {
  std::vector<int64_t> args[4];
  for (int i = 1; i <= 4; ++i) {
    const Value* v = node.input(i);
    if (v == nullptr) continue;
    if (v->has_symbolic_data()) return Folded();
    args[i - 1] = v->constant().ToInt64();
  }
  const int64_t n = static_cast<int64_t>(data.size());
  if (args[0].size() != 1 || args[1].size() != 1) return Folded();
  const int64_t step = args[3].empty() ? 1 : args[3][0];
  if (step == 0) return node.Error("step 0");
  int64_t start = args[0][0], end = args[1][0];
  if (start < 0) start += n;
  if (end < 0) end += n;
  Dims out;
  if (step > 0) {
    for (int64_t i = Clamp(start, 0, n); i < Clamp(end, 0, n); i += step) out.push_back(data[i]);
  } else {
    for (int64_t i = Clamp(start, -1, n - 1); i > Clamp(end, -1, n - 1); i += step) out.push_back(data[i]);
  }
  return One(std::move(out));
}

absl::StatusOr<Folded> FoldWhere(const Node& node, absl::Span<const DimSymbol>) {
  const Value* cond = node.input(0);
  std::optional<Dims> x = SymbolicValues(node.input(1)), y = SymbolicValues(node.input(2));
  if (cond->has_symbolic_data() || cond->rank() > 1 || !x || !y) return Folded();
  const std::vector<int64_t> c = cond->constant().ToInt64();
  const size_t n = std::max({c.size(), x->size(), y->size()});
  Dims out;
  for (size_t i = 0; i < n; ++i) {
    auto at = [&](const auto& v) -> size_t { return v.size() == 1 ? 0 : i; };
    if (c.size() != n && c.size() != 1) return Folded();
    if ((x->size() != n && x->size() != 1) || (y->size() != n && y->size() != 1)) return Folded();
    out.push_back(c[at(c)] ? (*x)[at(*x)] : (*y)[at(*y)]);
  }
  return One(std::move(out));
}

}  // namespace

absl::StatusOr<std::optional<std::vector<Dims>>> FoldSymbolically(const Node& node,
                                                                  absl::Span<const DimSymbol> symbols) {
  const std::string& op = node.op_type();
  for (const Value* out : node.outputs()) {
    if (out->rank() > 1 || (!IsIntegral(out->dtype()) && out->dtype() != DType::kBool)) return Folded();
  }
  if (op == "Shape" || op == "Size") return FoldShape(node);
  if (node.num_inputs() == 0) return Folded();
  std::optional<Dims> a = SymbolicValues(node.input(0));
  if (op == "Where") return FoldWhere(node, symbols);
  if (!a) return Folded();
  const bool to_int = IsIntegral(node.output(0)->dtype());
  if (to_int && (op == "Identity" || op == "Cast" || op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" ||
                 op == "Flatten")) {
    return One(*a);
  }
  if (op == "Gather") return FoldGather(node, *a);
  if (op == "Slice") return FoldSlice(node, *a);
  if (op == "Concat") {
    Dims out;
    for (const Value* in : node.inputs()) {
      std::optional<Dims> v = SymbolicValues(in);
      if (!v) return Folded();
      out.insert(out.end(), v->begin(), v->end());
    }
    return One(std::move(out));
  }
  if (op == "Neg") {
    Dims out;
    for (const DimExpr& d : *a) {
      KILN_ASSIGN_OR_RETURN(DimExpr x, DimExpr::Sub(DimExpr(), d));
      out.push_back(x);
    }
    return One(std::move(out));
  }
  if (node.num_inputs() == 2) {
    std::optional<Dims> b = SymbolicValues(node.input(1));
    if (!b) return Folded();
    KILN_ASSIGN_OR_RETURN(std::optional<Dims> r, Binary(node, *a, *b, symbols));
    if (!r) return Folded();
    return One(*std::move(r));
  }
  return Folded();
}

}  // namespace kiln
