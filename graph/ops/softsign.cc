// Softsign: element-wise x / (1 + |x|).
#include <cmath>

#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  return EvalUnary(node, *in[0], out[0], [](float x) { return x / (1.f + std::fabs(x)); });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(softsign) {
  registry.Register({.name = "Softsign", .infer = ops::InferFloatUnary, .eval = ops::Eval,
                     .is_elementwise = true});
}
