// PRelu: element-wise x < 0 ? slope * x : x; slope broadcasts to x's shape
// (unidirectionally).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireNumeric(node, 0));
  const Shape& x = node.input(0)->shape();
  const Shape& slope = node.input(1)->shape();
  KILN_RETURN_IF_ERROR(InferBroadcast(node));
  if (node.output(0)->shape() != x) {
    return node.Error(absl::StrCat("slope of shape ", ShapeToString(slope),
                                   " does not broadcast to the input's shape ", ShapeToString(x)));
  }
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  return EvalBinary(
      node, *in[0], *in[1], out[0], [](float x, float s) { return x < 0.f ? s * x : x; },
      [](int64_t x, int64_t s) {
        return x < 0 ? static_cast<int64_t>(static_cast<uint64_t>(s) * static_cast<uint64_t>(x)) : x;
      });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(p_relu) {
  registry.Register({.name = "PRelu", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer,
                     .eval = ops::Eval, .is_elementwise = true});
}
