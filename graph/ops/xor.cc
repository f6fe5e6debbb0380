// Xor: element-wise logical exclusive or of bool tensors with numpy broadcasting.
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireBool(node, 0));
  KILN_RETURN_IF_ERROR(RequireBool(node, 1));
  return InferBroadcast(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  return EvalBinary(node, *in[0], *in[1], out[0], nullptr,
                    [](int64_t a, int64_t b) { return a ^ b; });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(xor) {
  registry.Register({.name = "Xor", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer,
                     .eval = ops::Eval, .is_elementwise = true});
}
