// Shrink: element-wise x < -lambd ? x + bias : (x > lambd ? x - bias : 0) (numeric types).
#include <cmath>

#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(node.GetFloat("lambd", 0.5f).status());
  KILN_RETURN_IF_ERROR(node.GetFloat("bias", 0.f).status());
  KILN_RETURN_IF_ERROR(RequireNumeric(node, 0));
  return InferSameAsInput(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(const float lambd, node.GetFloat("lambd", 0.5f));
  KILN_ASSIGN_OR_RETURN(const float bias, node.GetFloat("bias", 0.f));
  return EvalUnary(
      node, *in[0], out[0],
      [lambd, bias](float x) { return x < -lambd ? x + bias : (x > lambd ? x - bias : 0.f); },
      [lambd, bias](int64_t x) {
        const double v = static_cast<double>(x);
        const double r = v < -lambd ? v + bias : (v > lambd ? v - bias : 0.0);
        return static_cast<int64_t>(r);
      });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(shrink) {
  registry.Register({.name = "Shrink", .infer = ops::Infer, .eval = ops::Eval, .is_elementwise = true});
}
