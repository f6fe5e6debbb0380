// Gelu: element-wise 0.5 * x * (1 + erf(x / sqrt(2))), or its tanh approximation
// when approximate = "tanh".
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::StatusOr<bool> UseTanh(const Node& node) {
  const absl::StatusOr<std::string> approximate = node.GetString("approximate", "none");
  if (!approximate.ok()) return approximate.status();
  if (*approximate != "none" && *approximate != "tanh") {
    return node.Error(absl::StrCat("attribute 'approximate' must be \"none\" or \"tanh\", got \"",
                                   *approximate, "\""));
  }
  return *approximate == "tanh";
}

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(UseTanh(node).status());
  return InferFloatUnary(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(const bool use_tanh, UseTanh(node));
  if (use_tanh) {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    return EvalUnary(node, *in[0], out[0], [](float x) {
      return 0.5f * x * (1.f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
    });
  }
  constexpr float kInvSqrt2 = 0.7071067811865476f;
  return EvalUnary(node, *in[0], out[0],
                   [](float x) { return 0.5f * x * (1.f + std::erf(x * kInvSqrt2)); });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(gelu) {
  registry.Register({.name = "Gelu", .infer = ops::Infer, .eval = ops::Eval, .is_elementwise = true});
}
