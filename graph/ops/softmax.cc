// Softmax: exp(x - max) / sum along `axis` (opset-13 semantics, default -1).
#include "graph/op_registry.h"
#include "graph/ops/softmax_eval.h"

namespace kiln::ops {
namespace {

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  return EvalSoftmaxNode(node, *in[0], /*log=*/false, out[0]);
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(softmax) {
  registry.Register({.name = "Softmax", .infer = ops::InferSoftmaxNode, .eval = ops::Eval});
}
