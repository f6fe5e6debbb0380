// Sign: element-wise -1, 0 or 1 by the sign of x (NaN stays NaN; numeric types).
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireNumeric(node, 0));
  return InferSameAsInput(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  return EvalUnary(
      node, *in[0], out[0],
      [](float x) { return x > 0.f ? 1.f : x < 0.f ? -1.f : x == 0.f ? 0.f : x; },
      [](int64_t x) { return x > 0 ? int64_t{1} : x < 0 ? int64_t{-1} : int64_t{0}; });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(sign) {
  registry.Register({.name = "Sign", .infer = ops::Infer, .eval = ops::Eval, .is_elementwise = true});
}
