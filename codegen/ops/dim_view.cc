#include "codegen/ops/dim_view.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/ops/kernel_util.h"
#include "graph/ops/slice.h"
#include "graph/pattern_match.h"

namespace kiln::codegen::ops {
namespace {

DimExpr Times(const DimExpr& a, const DimExpr& b) { return DimsProduct({a, b}); }

bool IsOne(const DimExpr& e) { return e.constant() == 1; }

// One factor of a dim: `size` elements `stride` apart.
struct Factor {
  DimExpr size, stride;
};

// The view while a chain is walked: each dim a product of factors, outermost first (a
// Reshape that merges dims which are not contiguous keeps them apart, so that one
// splitting them again, as torch's K^T of [B*H, S, D] does, finds them).
struct FactorView {
  std::vector<DimExpr> dims;
  std::vector<std::vector<Factor>> factors;  // per dim; one {1, 0} for a unit dim
  DimExpr offset;
};

// `factors` with each pair of neighbours that is contiguous for every size merged, and
// unit factors dropped.
std::vector<Factor> Merged(const std::vector<Factor>& factors) {
  std::vector<Factor> out;
  for (const Factor& f : factors) {
    if (IsOne(f.size)) continue;
    if (!out.empty() && out.back().stride == Times(f.stride, f.size)) {
      out.back() = {Times(out.back().size, f.size), f.stride};
    } else {
      out.push_back(f);
    }
  }
  return out;
}

// The factors of an output dim of size `dim`, taken from the inner end of `factors`
// (splitting the last one taken where `dim` divides it); nullopt where no run of them
// multiplies to `dim` for every size.
std::optional<std::vector<Factor>> TakeInner(std::vector<Factor>& factors, const DimExpr& dim) {
  std::vector<Factor> taken;
  DimExpr rest = dim;
  while (!IsOne(rest)) {
    if (factors.empty()) return std::nullopt;
    const Factor f = factors.back();
    if (f.size == rest) {
      taken.insert(taken.begin(), f);
      factors.pop_back();
      rest = DimExpr::Constant(1);
    } else if (std::optional<DimExpr> q = DimExpr::DivideExactly(rest, f.size)) {
      taken.insert(taken.begin(), f);
      factors.pop_back();
      rest = *q;
    } else if (std::optional<DimExpr> r = DimExpr::DivideExactly(f.size, rest)) {
      taken.insert(taken.begin(), Factor{rest, f.stride});
      factors.back() = {*r, Times(f.stride, rest)};
      rest = DimExpr::Constant(1);
    } else {
      return std::nullopt;
    }
  }
  return taken;
}

// Moves `view`'s first element `count` steps of `stride` on; false on overflow.
bool Advance(FactorView& view, int64_t count, const DimExpr& stride) {
  absl::StatusOr<DimExpr> off = DimExpr::Add(view.offset, Times(DimExpr::Constant(count), stride));
  if (off.ok()) view.offset = *std::move(off);
  return off.ok();
}

// The one factor of dim `d`, or nullptr where it is a merge of several.
const Factor* Single(const FactorView& view, size_t d) {
  return view.factors[d].size() == 1 ? &view.factors[d][0] : nullptr;
}

// A Reshape (Flatten, Squeeze, Unsqueeze) of `view` to `out` dims. The dims of both
// sides, unit dims aside, are grouped into runs of equal element count (guided by the
// largest sizes, `in_shape` and `out_shape`, and checked as expressions); each output
// dim of a run takes the run's factors from the inner end.
std::optional<FactorView> ReshapeView(const FactorView& view, const Shape& in_shape, const std::vector<DimExpr>& out,
                                      const Shape& out_shape) {
  std::vector<int> in_dims, out_dims;  // the non-unit dims
  for (size_t d = 0; d < view.dims.size(); ++d) {
    if (!IsOne(view.dims[d])) in_dims.push_back(static_cast<int>(d));
  }
  for (size_t d = 0; d < out.size(); ++d) {
    if (!IsOne(out[d])) out_dims.push_back(static_cast<int>(d));
  }
  FactorView next{out, std::vector<std::vector<Factor>>(out.size(), {Factor{DimExpr::Constant(1), DimExpr()}}),
                  view.offset};
  size_t i = 0, o = 0;
  while (i < in_dims.size() || o < out_dims.size()) {
    if (i == in_dims.size() || o == out_dims.size()) return std::nullopt;
    // One run: dims [i, i_end) of the input and [o, o_end) of the output.
    size_t i_end = i + 1, o_end = o + 1;
    int64_t in_n = in_shape[in_dims[i]], out_n = out_shape[out_dims[o]];
    while (in_n != out_n) {
      if (in_n < out_n) {
        if (i_end == in_dims.size()) return std::nullopt;
        in_n *= in_shape[in_dims[i_end++]];
      } else {
        if (o_end == out_dims.size()) return std::nullopt;
        out_n *= out_shape[out_dims[o_end++]];
      }
    }
    std::vector<Factor> run;
    for (size_t k = i; k < i_end; ++k) {
      const std::vector<Factor>& f = view.factors[in_dims[k]];
      run.insert(run.end(), f.begin(), f.end());
    }
    run = Merged(run);
    for (size_t k = o_end; k-- > o;) {
      std::optional<std::vector<Factor>> taken = TakeInner(run, out[out_dims[k]]);
      if (!taken) return std::nullopt;
      next.factors[out_dims[k]] = Merged(*taken);
    }
    if (!run.empty()) return std::nullopt;
    i = i_end;
    o = o_end;
  }
  return next;
}

// Expand of `view` to `out` (right-aligned): a unit dim that grows, and a new leading
// dim, read with stride 0.
std::optional<FactorView> ExpandView(const FactorView& view, const std::vector<DimExpr>& out) {
  if (out.size() < view.dims.size()) return std::nullopt;
  const size_t lead = out.size() - view.dims.size();
  FactorView next{out, {}, view.offset};
  for (size_t d = 0; d < out.size(); ++d) {
    const DimExpr& in = d < lead ? out[d] : view.dims[d - lead];
    if (d >= lead && in == out[d]) {
      next.factors.push_back(view.factors[d - lead]);
    } else if (d < lead || IsOne(in)) {
      next.factors.push_back({Factor{out[d], DimExpr()}});
    } else {
      return std::nullopt;
    }
  }
  return next;
}

// Gather of one constant index along a fixed dim (Swin's and torchvision's packed QKV
// selects): the dim goes (kept as 1 for a [1] index).
std::optional<FactorView> GatherView(const FactorView& view, const Node& node) {
  const Value* indices = node.input(1);
  if (indices == nullptr || !indices->is_constant() || indices->numel() != 1 || indices->rank() > 1) {
    return std::nullopt;
  }
  const int rank = static_cast<int>(view.dims.size());
  int64_t axis = node.GetInt("axis", 0).value_or(rank);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank || !view.dims[axis].IsConstant() || Single(view, axis) == nullptr) return std::nullopt;
  int64_t index = indices->constant().ScalarInt64();
  const int64_t n = *view.dims[axis].constant();
  if (index < 0) index += n;
  if (index < 0 || index >= n) return std::nullopt;
  FactorView next = view;
  if (!Advance(next, index, Single(view, axis)->stride)) return std::nullopt;
  if (indices->rank() == 1) {
    next.dims[axis] = DimExpr::Constant(1);
    next.factors[axis] = {Factor{DimExpr::Constant(1), DimExpr()}};
  } else {
    next.dims.erase(next.dims.begin() + axis);
    next.factors.erase(next.factors.begin() + axis);
  }
  return next;
}

// Slice with constant arguments: along a fixed dim, any start, step and count; along a
// dim that varies, only the whole dim (the output's dim is the input's).
std::optional<FactorView> SliceView(const FactorView& view, const Node& node, const std::vector<DimExpr>& out) {
  absl::StatusOr<std::vector<kiln::ops::AxisSlice>> plan = kiln::ops::ConstantSlicePlan(node);
  if (!plan.ok() || plan->size() != view.dims.size() || out.size() != view.dims.size()) return std::nullopt;
  FactorView next = view;
  for (size_t d = 0; d < view.dims.size(); ++d) {
    const kiln::ops::AxisSlice& s = (*plan)[d];
    if (out[d] == view.dims[d] && s.start == 0 && s.step == 1) continue;
    const Factor* f = Single(view, d);
    if (!view.dims[d].IsConstant() || f == nullptr || s.step <= 0 || !Advance(next, s.start, f->stride)) {
      return std::nullopt;
    }
    next.dims[d] = DimExpr::Constant(s.count);
    next.factors[d] = {Factor{next.dims[d], Times(DimExpr::Constant(s.step), f->stride)}};
  }
  return next;
}

}  // namespace

bool DividesAll(const DimExpr& e, int64_t v) { return DimExpr::DivideExactly(e, DimExpr::Constant(v)).has_value(); }

std::optional<DimView> PermuteDimView(const DimView& view, const std::vector<int64_t>& perm) {
  if (perm.size() != view.dims.size()) return std::nullopt;
  DimView next{{}, {}, view.offset};
  std::vector<bool> seen(perm.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[p]) return std::nullopt;
    seen[p] = true;
    next.dims.push_back(view.dims[p]);
    next.strides.push_back(view.strides[p]);
  }
  return next;
}

std::optional<DimView> DimViewOf(const Value& start, const std::vector<const Node*>& views) {
  FactorView view{ValueDims(start), {}, DimExpr()};
  const std::vector<DimExpr> dense = DenseDimStrides(view.dims);
  for (size_t d = 0; d < view.dims.size(); ++d) view.factors.push_back({Factor{view.dims[d], dense[d]}});
  const Value* at = &start;
  for (const Node* n : views) {
    if (n->input(0) != at || n->num_outputs() != 1) return std::nullopt;
    const Value& out = *n->output(0);
    const std::string& op = n->op_type();
    std::optional<FactorView> next;
    if (op == "Transpose") {
      const std::vector<int64_t> perm = PermOf(*n);
      if (perm.size() != view.dims.size()) return std::nullopt;
      next = FactorView{{}, {}, view.offset};
      std::vector<bool> seen(perm.size(), false);
      for (int64_t p : perm) {
        if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[p]) return std::nullopt;
        seen[p] = true;
        next->dims.push_back(view.dims[p]);
        next->factors.push_back(view.factors[p]);
      }
    } else if (op == "Expand") {
      next = ExpandView(view, ValueDims(out));
    } else if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
      next = ReshapeView(view, at->shape(), ValueDims(out), out.shape());
    } else if (op == "Gather") {
      next = GatherView(view, *n);
    } else if (op == "Slice") {
      next = SliceView(view, *n, ValueDims(out));
    }
    if (!next || next->dims != ValueDims(out)) return std::nullopt;
    view = *std::move(next);
    at = &out;
  }
  // One stride per dim: a merge of dims that no later view split again has none.
  DimView result{view.dims, {}, view.offset};
  for (size_t d = 0; d < view.dims.size(); ++d) {
    const std::vector<Factor> f = view.factors[d].size() == 1 ? view.factors[d] : Merged(view.factors[d]);
    if (f.size() > 1) return std::nullopt;
    result.strides.push_back(f.empty() ? DimExpr() : f[0].stride);
  }
  return result;
}

std::string DynamicBatchRowColOffset(const std::vector<DimExpr>& dims, const std::vector<DimExpr>& strides) {
  const size_t r = dims.size();
  std::vector<std::string> terms;
  DimExpr inner = DimExpr::Constant(1);
  for (size_t d = r - 2; d-- > 0;) {
    if (strides[d] != DimExpr()) {
      // The outermost dim needs no modulo, the innermost no division.
      std::string index = inner.constant() == 1 ? "batch" : absl::StrCat("batch / ", DimCode(inner));
      if (d > 0)
        index = absl::StrCat(inner.constant() == 1 ? index : absl::StrCat("(", index, ")"), " % ", DimCode(dims[d]));
      terms.push_back(absl::StrCat("(kiln_index)(", index, ") * ", DimCode(strides[d])));
    }
    inner = Times(inner, dims[d]);
  }
  if (strides[r - 2] != DimExpr()) terms.push_back(absl::StrCat("(kiln_index)row * ", DimCode(strides[r - 2])));
  if (strides[r - 1] != DimExpr()) terms.push_back(absl::StrCat("(kiln_index)col * ", DimCode(strides[r - 1])));
  if (terms.empty()) return std::string("0");
  std::string out;
  for (size_t i = 0; i < terms.size(); ++i) absl::StrAppend(&out, i ? " + " : "", terms[i]);
  return out;
}

}  // namespace kiln::codegen::ops
