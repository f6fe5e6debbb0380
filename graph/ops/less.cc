// Less: element-wise a < b with numpy broadcasting; the output is bool.
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireNumeric(node, 0));
  return InferBroadcast(node, DType::kBool);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  return EvalBinary(
      node, *in[0], *in[1], out[0], [](float a, float b) { return a < b ? 1.f : 0.f; },
      [](int64_t a, int64_t b) { return int64_t{a < b}; });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(less) {
  registry.Register({.name = "Less", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer,
                     .eval = ops::Eval, .is_elementwise = true});
}
