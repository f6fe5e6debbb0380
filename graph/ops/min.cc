// Min: element-wise minimum of all inputs, broadcast together (NaN propagates).
#include <cmath>

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
  return EvalVariadic(
      node, in, out[0], [](float a, float b) { return std::isnan(a) || a < b ? a : b; },
      [](int64_t a, int64_t b) { return a < b ? a : b; });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(min) {
  registry.Register({.name = "Min", .min_inputs = 1, .max_inputs = OpDef::kVariadic,
                     .infer = ops::Infer, .eval = ops::Eval, .is_elementwise = true});
}
