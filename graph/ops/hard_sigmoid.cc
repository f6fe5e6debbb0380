// HardSigmoid: element-wise max(0, min(1, alpha * x + beta)) (alpha 0.2, beta 0.5).
#include <algorithm>

#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(node.GetFloat("alpha", 0.2f).status());
  KILN_RETURN_IF_ERROR(node.GetFloat("beta", 0.5f).status());
  return InferFloatUnary(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(const float alpha, node.GetFloat("alpha", 0.2f));
  KILN_ASSIGN_OR_RETURN(const float beta, node.GetFloat("beta", 0.5f));
  return EvalUnary(node, *in[0], out[0], [alpha, beta](float x) {
    return std::max(0.f, std::min(1.f, alpha * x + beta));
  });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(hard_sigmoid) {
  registry.Register({.name = "HardSigmoid", .infer = ops::Infer, .eval = ops::Eval,
                     .is_elementwise = true});
}
