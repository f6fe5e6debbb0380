// Round: element-wise round to the nearest integer, halves to even.
#include <cmath>

#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

float RoundHalfToEven(float x) {
  const float r = std::round(x);  // halves away from zero
  if (std::fabs(x - std::trunc(x)) == 0.5f) return 2.f * std::round(x * 0.5f);
  return r;
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  return EvalUnary(node, *in[0], out[0], RoundHalfToEven);
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(round) {
  registry.Register({.name = "Round", .infer = ops::InferFloatUnary, .eval = ops::Eval,
                     .is_elementwise = true});
}
