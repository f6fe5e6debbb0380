// ReduceL1: sum of absolute values over `axes` (optional constant input 1; keepdims,
// noop_with_empty_axes).
#include "graph/op_registry.h"
#include "graph/ops/reduce_eval.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) { return InferReduce(node, /*allow_integer=*/true, /*allow_bool=*/false); }

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  return EvalReduce(node, ReduceKind::kL1, *in[0], out[0]);
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(reduce_l1) {
  registry.Register(
      {.name = "ReduceL1", .min_inputs = 1, .max_inputs = 2, .infer = ops::Infer, .eval = ops::Eval});
}
