// CastLike: converts the input to the dtype of the second input (Cast semantics).
#include "graph/op_registry.h"
#include "graph/ops/cast.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  node.output(0)->SetType(node.input(1)->dtype(), node.input(0)->shape());
  return absl::OkStatus();
}

absl::Status Eval(const Node&, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  out[0] = CastTensor(*in[0], out[0].dtype());
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(cast_like) {
  registry.Register(
      {.name = "CastLike", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer, .eval = ops::Eval});
}
