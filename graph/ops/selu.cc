// Selu: element-wise gamma * (x > 0 ? x : alpha * (e^x - 1)), ONNX default constants.
#include <cmath>

#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

constexpr float kAlpha = 1.67326319217681884765625f;
constexpr float kGamma = 1.05070102214813232421875f;

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(node.GetFloat("alpha", kAlpha).status());
  KILN_RETURN_IF_ERROR(node.GetFloat("gamma", kGamma).status());
  return InferFloatUnary(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(const float alpha, node.GetFloat("alpha", kAlpha));
  KILN_ASSIGN_OR_RETURN(const float gamma, node.GetFloat("gamma", kGamma));
  return EvalUnary(node, *in[0], out[0], [alpha, gamma](float x) {
    return gamma * (x > 0.f ? x : alpha * std::expm1(x));
  });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(selu) {
  registry.Register({.name = "Selu", .infer = ops::Infer, .eval = ops::Eval, .is_elementwise = true});
}
