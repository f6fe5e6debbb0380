// Erf: element-wise Gauss error function (numeric types; integers truncate).
#include <cmath>

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
      node, *in[0], out[0], [](float x) { return std::erf(x); },
      [](int64_t x) { return static_cast<int64_t>(std::erf(static_cast<double>(x))); });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(erf) {
  registry.Register({.name = "Erf", .infer = ops::Infer, .eval = ops::Eval, .is_elementwise = true});
}
