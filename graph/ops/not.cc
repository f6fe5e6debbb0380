// Not: element-wise logical negation of a bool tensor.
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireBool(node, 0));
  return InferSameAsInput(node);
}

absl::Status Eval(const Node&, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  const int64_t n = in[0]->numel();
  const uint8_t* x = in[0]->data<uint8_t>();
  uint8_t* y = out[0].mutable_data<uint8_t>();
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] ? 0 : 1;
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(not) {
  registry.Register({.name = "Not", .infer = ops::Infer, .eval = ops::Eval, .is_elementwise = true});
}
