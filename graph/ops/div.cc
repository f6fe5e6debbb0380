// Div: element-wise a / b with numpy broadcasting; integer division truncates
// toward zero (C semantics), and an integer division by zero yields 0.
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
      node, *in[0], *in[1], out[0], [](float a, float b) { return a / b; },
      [](int64_t a, int64_t b) -> int64_t {
        if (b == 0) return 0;
        // -a without overflow for INT64_MIN.
        if (b == -1) return static_cast<int64_t>(uint64_t{0} - static_cast<uint64_t>(a));
        return a / b;
      });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(div) {
  registry.Register({.name = "Div", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer,
                     .eval = ops::Eval, .is_elementwise = true});
}
