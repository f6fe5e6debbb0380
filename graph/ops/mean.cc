// Mean: element-wise mean of all inputs, broadcast together.
#include <cmath>

#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  return InferBroadcast(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  int count = 0;
  for (const Tensor* t : in) count += t != nullptr;
  const float n = static_cast<float>(count);
  return EvalVariadic(
      node, in, out[0], [](float a, float b) { return a + b; },
      nullptr,
      [n](float s) { return s / n; });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(mean) {
  registry.Register({.name = "Mean", .min_inputs = 1, .max_inputs = OpDef::kVariadic,
                     .infer = ops::Infer, .eval = ops::Eval, .is_elementwise = true});
}
