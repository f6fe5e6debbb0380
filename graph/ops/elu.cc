// Elu: element-wise x >= 0 ? x : alpha * (e^x - 1) (alpha defaults to 1).
#include <cmath>

#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(node.GetFloat("alpha", 1.f).status());
  return InferFloatUnary(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(const float alpha, node.GetFloat("alpha", 1.f));
  return EvalUnary(node, *in[0], out[0],
                   [alpha](float x) { return x >= 0.f ? x : alpha * std::expm1(x); });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(elu) {
  registry.Register({.name = "Elu", .infer = ops::Infer, .eval = ops::Eval, .is_elementwise = true});
}
