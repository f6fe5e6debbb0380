// HardSwish: element-wise x * max(0, min(1, x / 6 + 0.5)).
#include <algorithm>

#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  return EvalUnary(node, *in[0], out[0], [](float x) {
    return x * std::max(0.f, std::min(1.f, x * (1.f / 6.f) + 0.5f));
  });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(hard_swish) {
  registry.Register({.name = "HardSwish", .infer = ops::InferFloatUnary, .eval = ops::Eval,
                     .is_elementwise = true});
}
