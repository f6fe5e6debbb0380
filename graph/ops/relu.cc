// Relu: element-wise max(x, 0).
#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  return EvalUnary(
      node, *in[0], out[0], [](float x) { return x > 0.f ? x : 0.f; },
      [](int64_t x) { return x > 0 ? x : int64_t{0}; });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(relu) {
  registry.Register({.name = "Relu", .infer = ops::InferSameAsInput, .eval = ops::Eval,
                     .is_elementwise = true});
}
