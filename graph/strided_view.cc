// StridedView: view-op chains as strides over the tensor they start from.
#include "graph/strided_view.h"

#include <string>

#include "graph/ops/slice.h"

namespace kiln {

StridedView StridedView::Dense(const Shape& shape) {
  StridedView v;
  v.shape_ = shape;
  v.dims_.resize(shape.size());
  int64_t stride = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    v.dims_[d] = {ViewFactor{shape[d], stride}};
    v.Normalize(d);
    stride *= shape[d];
  }
  return v;
}

void StridedView::Normalize(int d) {
  std::vector<ViewFactor> out;
  for (const ViewFactor& f : dims_[d]) {
    if (f.size == 1) continue;
    const int64_t stride = f.size == 0 ? 0 : f.stride;
    if (!out.empty() && out.back().stride == f.size * stride) {
      out.back() = {out.back().size * f.size, stride};
    } else {
      out.push_back({f.size, stride});
    }
  }
  dims_[d] = std::move(out);
}

bool StridedView::Transpose(const std::vector<int64_t>& perm) {
  const int r = rank();
  if (static_cast<int>(perm.size()) != r) return false;
  std::vector<bool> seen(r, false);
  Shape shape(r);
  std::vector<std::vector<ViewFactor>> dims(r);
  for (int i = 0; i < r; ++i) {
    const int64_t p = perm[i] < 0 ? perm[i] + r : perm[i];
    if (p < 0 || p >= r || seen[p]) return false;
    seen[p] = true;
    shape[i] = shape_[p];
    dims[i] = dims_[p];
  }
  shape_ = std::move(shape);
  dims_ = std::move(dims);
  return true;
}

bool StridedView::Reshape(const Shape& shape) {
  for (int64_t n : shape) {
    if (n <= 0) return false;
  }
  if (NumElements(shape) != NumElements(shape_)) return false;
  std::vector<ViewFactor> flat;
  for (const std::vector<ViewFactor>& d : dims_) flat.insert(flat.end(), d.begin(), d.end());
  std::vector<std::vector<ViewFactor>> dims(shape.size());
  size_t next = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t have = 1;
    while (have < shape[i]) {
      if (next >= flat.size()) return false;
      const ViewFactor f = flat[next];
      if (have * f.size <= shape[i]) {
        dims[i].push_back(f);
        have *= f.size;
        ++next;
        continue;
      }
      // Split f: its outer part completes this dim, the inner part starts the next.
      if (shape[i] % have != 0 || f.size % (shape[i] / have) != 0) return false;
      const int64_t outer = shape[i] / have, inner = f.size / outer;
      dims[i].push_back({outer, f.stride * inner});
      flat[next] = {inner, f.stride};
      have *= outer;
    }
    if (have != shape[i]) return false;
  }
  shape_ = shape;
  dims_ = std::move(dims);
  for (int d = 0; d < rank(); ++d) Normalize(d);
  return true;
}

bool StridedView::Expand(const Shape& shape) {
  const int r = rank(), out = static_cast<int>(shape.size());
  if (out < r) return false;
  std::vector<std::vector<ViewFactor>> dims(out);
  for (int j = 0; j < out; ++j) {
    if (shape[j] <= 0) return false;
    const int i = j - (out - r);
    if (i >= 0 && shape_[i] == shape[j]) {
      dims[j] = dims_[i];
    } else if (i < 0 || shape_[i] == 1) {
      dims[j] = {ViewFactor{shape[j], 0}};
    } else {
      return false;
    }
  }
  shape_ = shape;
  dims_ = std::move(dims);
  for (int d = 0; d < rank(); ++d) Normalize(d);
  return true;
}

bool StridedView::Select(int axis, int64_t index, bool keep_dim) {
  if (axis < 0 || axis >= rank() || index < 0 || index >= shape_[axis]) return false;
  int64_t rest = index;
  for (auto f = dims_[axis].rbegin(); f != dims_[axis].rend(); ++f) {
    offset_ += (rest % f->size) * f->stride;
    rest /= f->size;
  }
  if (keep_dim) {
    shape_[axis] = 1;
    dims_[axis].clear();
  } else {
    shape_.erase(shape_.begin() + axis);
    dims_.erase(dims_.begin() + axis);
  }
  return true;
}

bool StridedView::Slice(int axis, int64_t start, int64_t step, int64_t count) {
  if (axis < 0 || axis >= rank() || step <= 0 || count < 0 || start < 0) return false;
  if (count > 0 && start + (count - 1) * step >= shape_[axis]) return false;
  if (start == 0 && step == 1 && count == shape_[axis]) return true;
  const std::optional<int64_t> stride = Stride(axis);
  if (!stride) return false;
  offset_ += start * *stride;
  shape_[axis] = count;
  dims_[axis] = {ViewFactor{count, *stride * step}};
  Normalize(axis);
  return true;
}

bool StridedView::ApplyGather(const Node& node) {
  const Value* indices = node.input(1);
  const int64_t index = indices->constant().ScalarInt64();
  absl::StatusOr<int64_t> axis = node.GetInt("axis", 0);
  if (!axis.ok()) return false;
  const int64_t a = *axis < 0 ? *axis + rank() : *axis;
  if (a < 0 || a >= rank()) return false;
  StridedView next = *this;
  if (!next.Select(static_cast<int>(a), index < 0 ? index + shape_[a] : index, indices->rank() == 1) ||
      next.shape_ != node.output(0)->shape()) {
    return false;
  }
  *this = std::move(next);
  return true;
}

bool StridedView::ApplySlice(const Node& node) {
  absl::StatusOr<std::vector<ops::AxisSlice>> plan = ops::ConstantSlicePlan(node);
  if (!plan.ok() || static_cast<int>(plan->size()) != rank()) return false;
  StridedView next = *this;
  for (int d = 0; d < rank(); ++d) {
    const ops::AxisSlice& s = (*plan)[d];
    if (!next.Slice(d, s.start, s.step, s.count)) return false;
  }
  if (next.shape_ != node.output(0)->shape()) return false;
  *this = std::move(next);
  return true;
}

bool StridedView::Apply(const Node& node) {
  if (!IsViewNode(node) || node.input(0)->shape() != shape_) return false;
  const std::string& op = node.op_type();
  const Shape& out = node.output(0)->shape();
  if (op == "Gather") return ApplyGather(node);
  if (op == "Slice") return ApplySlice(node);
  if (op == "Transpose") {
    std::vector<int64_t> reversed;
    for (int i = rank() - 1; i >= 0; --i) reversed.push_back(i);
    absl::StatusOr<std::vector<int64_t>> perm = node.GetInts("perm", reversed);
    StridedView next = *this;
    if (!perm.ok() || !next.Transpose(*perm) || next.shape_ != out) return false;
    *this = std::move(next);
    return true;
  }
  if (op == "Expand") return Expand(out);
  return Reshape(out);
}

std::optional<int64_t> StridedView::Stride(int d) const {
  if (dims_[d].empty()) return 0;
  if (dims_[d].size() == 1) return dims_[d][0].stride;
  return std::nullopt;
}

std::optional<std::vector<ViewFactor>> StridedView::BatchFactors(int trailing, const Shape& batch) const {
  const int own = rank() - trailing, n = static_cast<int>(batch.size());
  if (own < 0 || own > n) return std::nullopt;
  std::vector<ViewFactor> out;
  for (int j = 0; j < n; ++j) {
    const int i = j - (n - own);
    if (i >= 0 && shape_[i] == batch[j]) {
      out.insert(out.end(), dims_[i].begin(), dims_[i].end());
    } else if (i < 0 || shape_[i] == 1) {
      if (batch[j] != 1) out.push_back({batch[j], 0});
    } else {
      return std::nullopt;
    }
  }
  return out;
}

bool IsViewNode(const Node& node) {
  static const char* const kOps[] = {"Transpose", "Reshape", "Unsqueeze", "Squeeze", "Flatten",
                                     "Expand",    "Slice",   "Gather"};
  bool known = false;
  for (const char* op : kOps) known |= node.op_type() == op;
  if (!known || node.num_outputs() != 1 || !node.has_input(0) || !node.input(0)->has_type() ||
      !node.output(0)->has_type()) {
    return false;
  }
  if (node.op_type() == "Gather") {
    const Value* indices = node.has_input(1) ? node.input(1) : nullptr;
    return indices != nullptr && indices->is_constant() && indices->numel() == 1 && indices->rank() <= 1 &&
           (indices->dtype() == DType::kInt64 || indices->dtype() == DType::kInt32);
  }
  if (node.op_type() == "Slice") return ops::ConstantSlicePlan(node).ok();
  return true;
}

}  // namespace kiln
