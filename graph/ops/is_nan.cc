// IsNaN: element-wise bool, true where x is NaN.
#include <cmath>

#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  node.output(0)->SetType(DType::kBool, node.input(0)->shape());
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  return EvalUnary(node, *in[0], out[0], [](float x) { return std::isnan(x) ? 1.f : 0.f; });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(is_nan) {
  registry.Register({.name = "IsNaN", .infer = ops::Infer, .eval = ops::Eval, .is_elementwise = true});
}
