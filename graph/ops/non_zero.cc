// NonZero: the coordinates of the non-zero elements, [rank, count] int64 in row-major
// order. The count fixes the output shape, so the input must be a constant (the node
// then folds at import).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/constant_input.h"

namespace kiln::ops {
namespace {

std::vector<int64_t> NonZeroFlat(const Tensor& x) {
  std::vector<int64_t> at;
  if (IsFloating(x.dtype())) {
    const std::vector<float> v = x.ToFloat();
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] != 0.f) at.push_back(static_cast<int64_t>(i));
    }
  } else {
    const std::vector<int64_t> v = x.ToInt64();
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] != 0) at.push_back(static_cast<int64_t>(i));
    }
  }
  return at;
}

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ShapeFixingConstant(node, 0, "X"));
  const int64_t rank = std::max<int64_t>(1, node.input(0)->rank());
  node.output(0)->SetType(DType::kInt64, {rank, static_cast<int64_t>(NonZeroFlat(*x).size())});
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  const std::vector<int64_t> at = NonZeroFlat(*in[0]);
  const Shape& s = in[0]->shape();
  const int64_t count = static_cast<int64_t>(at.size());
  std::vector<int64_t> coords(out[0].numel());
  if (s.empty()) {  // a scalar: one row of zeros when non-zero
    for (int64_t j = 0; j < count; ++j) coords[j] = 0;
  }
  for (int64_t j = 0; j < count; ++j) {
    int64_t r = at[j];
    for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
      coords[d * count + j] = r % s[d];
      r /= s[d];
    }
  }
  out[0] = Tensor::FromInt64(DType::kInt64, out[0].shape(), coords);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(non_zero) {
  registry.Register({.name = "NonZero", .infer = ops::Infer, .eval = ops::Eval});
}
