// Size: the input's number of elements as an i64 scalar.
#include "graph/op_registry.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  node.output(0)->SetType(DType::kInt64, {});
  return absl::OkStatus();
}

// Reads only node.input(0)'s type: constant folding passes a null input tensor
// when the input is not a constant.
absl::Status Eval(const Node& node, absl::Span<const Tensor* const>, absl::Span<Tensor> out) {
  const int64_t n = node.input(0)->numel();
  out[0] = Tensor::FromInt64(DType::kInt64, {}, {n});
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(size) { registry.Register({.name = "Size", .infer = ops::Infer, .eval = ops::Eval}); }
