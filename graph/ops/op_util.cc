// Shared op helpers: broadcasting, axes, common inference and element-wise evaluation.
#include "graph/ops/op_util.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kiln::ops {

absl::StatusOr<Shape> BroadcastShapes(const Node& node, const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return node.Error(absl::StrCat("shapes ", ShapeToString(a), " and ", ShapeToString(b),
                                     " cannot be broadcast together"));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

absl::StatusOr<int64_t> NormalizeAxis(const Node& node, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1)) {
    if (!(rank == 0 && (axis == 0 || axis == -1))) {
      return node.Error(absl::StrCat("axis ", axis, " is out of range for rank ", rank));
    }
  }
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

std::vector<int64_t> BroadcastOffsets(const Shape& in_shape, const Shape& out_shape) {
  const size_t rank = out_shape.size();
  const int64_t n = NumElements(out_shape);
  std::vector<int64_t> offsets(n);
  if (in_shape == out_shape) {
    for (int64_t i = 0; i < n; ++i) offsets[i] = i;
    return offsets;
  }
  // Strides of the input aligned to the output's rank; 0 where broadcast.
  std::vector<int64_t> in_strides(rank, 0);
  const std::vector<int64_t> s = Strides(in_shape);
  const size_t lead = rank - in_shape.size();
  for (size_t i = 0; i < in_shape.size(); ++i) in_strides[lead + i] = in_shape[i] == 1 ? 0 : s[i];
  std::vector<int64_t> index(rank, 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    offsets[i] = offset;
    for (int d = static_cast<int>(rank) - 1; d >= 0; --d) {
      if (++index[d] < out_shape[d]) {
        offset += in_strides[d];
        break;
      }
      offset -= in_strides[d] * (out_shape[d] - 1);
      index[d] = 0;
    }
  }
  return offsets;
}

absl::StatusOr<std::vector<int64_t>> ConstantInts(const Node& node, int input, const char* what) {
  if (!node.has_input(input)) return node.Error(absl::StrCat("missing input '", what, "'"));
  const Tensor* t = node.input(input)->constant_or_null();
  if (t == nullptr) {
    return node.Error(absl::StrCat("input '", what, "' ('", node.input(input)->name(),
                                   "') must be a compile-time constant: kiln needs static shapes"));
  }
  if (IsFloating(t->dtype())) {
    return node.Error(absl::StrCat("input '", what, "' must be an integer tensor, got ", t->TypeString()));
  }
  return t->ToInt64();
}

absl::Status InferSameAsInput(Node& node) {
  node.output(0)->SetType(node.input(0)->dtype(), node.input(0)->shape());
  return absl::OkStatus();
}

absl::Status InferBroadcast(Node& node, std::optional<DType> out_dtype) {
  Shape shape = node.input(0)->shape();
  const DType dtype = node.input(0)->dtype();
  for (int i = 1; i < node.num_inputs(); ++i) {
    if (!node.has_input(i)) continue;
    if (node.input(i)->dtype() != dtype) {
      return node.Error(absl::StrCat("inputs must share a dtype, got ", DTypeName(dtype), " and ",
                                     DTypeName(node.input(i)->dtype())));
    }
    KILN_ASSIGN_OR_RETURN(shape, BroadcastShapes(node, shape, node.input(i)->shape()));
  }
  node.output(0)->SetType(out_dtype.value_or(dtype), shape);
  return absl::OkStatus();
}

absl::Status RequireFloat(const Node& node, int i) {
  if (!IsFloating(node.input(i)->dtype())) {
    return node.Error(absl::StrCat("input ", i, " must be f32, f16 or bf16, got ",
                                   DTypeName(node.input(i)->dtype())));
  }
  return absl::OkStatus();
}

namespace {
constexpr int64_t kGrain = 1 << 14;
}  // namespace

absl::Status EvalUnary(const Node& node, const Tensor& in, Tensor& out,
                       const std::function<float(float)>& ff,
                       const std::function<int64_t(int64_t)>& fi) {
  const int64_t n = in.numel();
  if (IsFloating(in.dtype())) {
    std::vector<float> x = in.ToFloat();
    ParallelFor(n, kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) x[i] = ff(x[i]);
    });
    out = Tensor::FromFloat(out.dtype(), out.shape(), x);
    return absl::OkStatus();
  }
  if (!fi) return node.Error(absl::StrCat("not defined for dtype ", DTypeName(in.dtype())));
  std::vector<int64_t> x = in.ToInt64();
  for (int64_t i = 0; i < n; ++i) x[i] = fi(x[i]);
  out = Tensor::FromInt64(out.dtype(), out.shape(), x);
  return absl::OkStatus();
}

absl::Status EvalBinary(const Node& node, const Tensor& a, const Tensor& b, Tensor& out,
                        const std::function<float(float, float)>& ff,
                        const std::function<int64_t(int64_t, int64_t)>& fi) {
  const int64_t n = out.numel();
  const std::vector<int64_t> oa = BroadcastOffsets(a.shape(), out.shape());
  const std::vector<int64_t> ob = BroadcastOffsets(b.shape(), out.shape());
  if (IsFloating(a.dtype())) {
    const std::vector<float> x = a.ToFloat(), y = b.ToFloat();
    std::vector<float> r(n);
    ParallelFor(n, kGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) r[i] = ff(x[oa[i]], y[ob[i]]);
    });
    out = Tensor::FromFloat(out.dtype(), out.shape(), r);
    return absl::OkStatus();
  }
  if (!fi) return node.Error(absl::StrCat("not defined for dtype ", DTypeName(a.dtype())));
  const std::vector<int64_t> x = a.ToInt64(), y = b.ToInt64();
  std::vector<int64_t> r(n);
  for (int64_t i = 0; i < n; ++i) r[i] = fi(x[oa[i]], y[ob[i]]);
  out = Tensor::FromInt64(out.dtype(), out.shape(), r);
  return absl::OkStatus();
}

}  // namespace kiln::ops
