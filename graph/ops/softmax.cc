// Softmax: exp(x - max) / sum along `axis` (opset-13 semantics, default -1).
#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", -1));
  KILN_RETURN_IF_ERROR(NormalizeAxis(node, axis, node.input(0)->rank()).status());
  return InferSameAsInput(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", -1));
  KILN_ASSIGN_OR_RETURN(axis, NormalizeAxis(node, axis, in[0]->rank()));
  SoftmaxAlongAxis(*in[0], axis, /*log=*/false, out[0]);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(softmax) { registry.Register({.name = "Softmax", .infer = ops::Infer, .eval = ops::Eval}); }
