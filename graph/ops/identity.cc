// Identity: the output is the input.
#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::ops {
namespace {

absl::Status Eval(const Node&, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  out[0] = *in[0];
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(identity) {
  registry.Register({.name = "Identity", .infer = ops::InferSameAsInput, .eval = ops::Eval, .is_view = true});
}
