// ArgMin: int64 indices of the minimum along `axis` (keepdims, select_last_index).
#include "graph/op_registry.h"
#include "graph/ops/arg_reduce.h"

namespace kiln::ops {
namespace {

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  return EvalArgReduce(node, *in[0], out[0], /*is_max=*/false);
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(arg_min) {
  registry.Register({.name = "ArgMin", .infer = ops::InferArgReduce, .eval = ops::Eval});
}
