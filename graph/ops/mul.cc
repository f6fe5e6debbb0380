// Mul: element-wise a * b with numpy broadcasting.
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireNumeric(node, 0));
  return InferBroadcast(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  return EvalBinary(
      node, *in[0], *in[1], out[0], [](float a, float b) { return a * b; },
      [](int64_t a, int64_t b) {
        return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
      });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(mul) {
  registry.Register({.name = "Mul", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer,
                     .eval = ops::Eval, .is_elementwise = true});
}
