// ArgMax: int64 indices of the maximum along `axis` (keepdims, select_last_index).
#include "graph/op_registry.h"
#include "graph/ops/arg_reduce.h"

namespace kiln::ops {
namespace {

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  return EvalArgReduce(node, *in[0], out[0], /*is_max=*/true);
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(arg_max) {
  registry.Register({.name = "ArgMax", .infer = ops::InferArgReduce, .eval = ops::Eval});
}
