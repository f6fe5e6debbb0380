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

// Moves `view`'s first element `count` steps of `stride` on; false on overflow.
bool Advance(DimView& view, int64_t count, const DimExpr& stride) {
  absl::StatusOr<DimExpr> off = DimExpr::Add(view.offset, Times(DimExpr::Constant(count), stride));
  if (off.ok()) view.offset = *std::move(off);
  return off.ok();
}

// A Reshape (Flatten, Squeeze, Unsqueeze) of `view` to `out` dims. The dims of both
// sides, unit dims aside, are grouped into runs of equal element count (guided by the
// largest sizes, `in_shape` and `out_shape`, and checked as expressions); a run of the
// input must be contiguous for every size, and its elements are split densely into the
// output run's dims.
std::optional<DimView> ReshapeDimView(const DimView& view, const Shape& in_shape, const std::vector<DimExpr>& out,
                                      const Shape& out_shape) {
  std::vector<int> in_dims, out_dims;  // the non-unit dims
  for (size_t d = 0; d < view.dims.size(); ++d) {
    if (!IsOne(view.dims[d])) in_dims.push_back(static_cast<int>(d));
  }
  for (size_t d = 0; d < out.size(); ++d) {
    if (!IsOne(out[d])) out_dims.push_back(static_cast<int>(d));
  }
  DimView next{out, std::vector<DimExpr>(out.size(), DimExpr()), view.offset};
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
    std::vector<DimExpr> in_run, out_run;
    for (size_t k = i; k < i_end; ++k) in_run.push_back(view.dims[in_dims[k]]);
    for (size_t k = o; k < o_end; ++k) out_run.push_back(out[out_dims[k]]);
    if (DimsProduct(in_run) != DimsProduct(out_run)) return std::nullopt;
    for (size_t k = i; k + 1 < i_end; ++k) {
      const int a = in_dims[k], b = in_dims[k + 1];
      if (view.strides[a] != Times(view.strides[b], view.dims[b])) return std::nullopt;
    }
    DimExpr stride = view.strides[in_dims[i_end - 1]];
    for (size_t k = o_end; k-- > o;) {
      next.strides[out_dims[k]] = stride;
      stride = Times(stride, out[out_dims[k]]);
    }
    i = i_end;
    o = o_end;
  }
  return next;
}

// Expand of `view` to `out` (right-aligned): a unit dim that grows, and a new leading
// dim, read with stride 0.
std::optional<DimView> ExpandDimView(const DimView& view, const std::vector<DimExpr>& out) {
  if (out.size() < view.dims.size()) return std::nullopt;
  const size_t lead = out.size() - view.dims.size();
  DimView next{out, std::vector<DimExpr>(out.size(), DimExpr()), view.offset};
  for (size_t d = lead; d < out.size(); ++d) {
    const DimExpr& in = view.dims[d - lead];
    if (in == out[d]) {
      next.strides[d] = view.strides[d - lead];
    } else if (!IsOne(in)) {
      return std::nullopt;
    }
  }
  return next;
}

// Gather of one constant index along a fixed dim (Swin's and torchvision's packed QKV
// selects): the dim goes (kept as 1 for a [1] index).
std::optional<DimView> GatherDimView(const DimView& view, const Node& node) {
  const Value* indices = node.input(1);
  if (indices == nullptr || !indices->is_constant() || indices->numel() != 1 || indices->rank() > 1) {
    return std::nullopt;
  }
  const int rank = static_cast<int>(view.dims.size());
  int64_t axis = node.GetInt("axis", 0).value_or(rank);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank || !view.dims[axis].IsConstant()) return std::nullopt;
  int64_t index = indices->constant().ScalarInt64();
  const int64_t n = *view.dims[axis].constant();
  if (index < 0) index += n;
  if (index < 0 || index >= n) return std::nullopt;
  DimView next = view;
  if (!Advance(next, index, view.strides[axis])) return std::nullopt;
  if (indices->rank() == 1) {
    next.dims[axis] = DimExpr::Constant(1);
    next.strides[axis] = DimExpr();
  } else {
    next.dims.erase(next.dims.begin() + axis);
    next.strides.erase(next.strides.begin() + axis);
  }
  return next;
}

// Slice with constant arguments: along a fixed dim, any start, step and count; along a
// dim that varies, only the whole dim (the output's dim is the input's).
std::optional<DimView> SliceDimView(const DimView& view, const Node& node, const std::vector<DimExpr>& out) {
  absl::StatusOr<std::vector<kiln::ops::AxisSlice>> plan = kiln::ops::ConstantSlicePlan(node);
  if (!plan.ok() || plan->size() != view.dims.size() || out.size() != view.dims.size()) return std::nullopt;
  DimView next = view;
  for (size_t d = 0; d < view.dims.size(); ++d) {
    const kiln::ops::AxisSlice& s = (*plan)[d];
    if (out[d] == view.dims[d] && s.start == 0 && s.step == 1) continue;
    if (!view.dims[d].IsConstant() || s.step <= 0 || !Advance(next, s.start, view.strides[d])) return std::nullopt;
    next.dims[d] = DimExpr::Constant(s.count);
    next.strides[d] = Times(DimExpr::Constant(s.step), view.strides[d]);
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
  DimView view{ValueDims(start), {}};
  view.strides = DenseDimStrides(view.dims);
  const Value* at = &start;
  for (const Node* n : views) {
    if (n->input(0) != at || n->num_outputs() != 1) return std::nullopt;
    const Value& out = *n->output(0);
    const std::string& op = n->op_type();
    std::optional<DimView> next;
    if (op == "Transpose") {
      next = PermuteDimView(view, PermOf(*n));
    } else if (op == "Expand") {
      next = ExpandDimView(view, ValueDims(out));
    } else if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
      next = ReshapeDimView(view, at->shape(), ValueDims(out), out.shape());
    } else if (op == "Gather") {
      next = GatherDimView(view, *n);
    } else if (op == "Slice") {
      next = SliceDimView(view, *n, ValueDims(out));
    }
    if (!next || next->dims != ValueDims(out)) return std::nullopt;
    view = *std::move(next);
    at = &out;
  }
  return view;
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
