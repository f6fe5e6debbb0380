// Abs: element-wise |x| (numeric types).
#include <cmath>

#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireNumeric(node, 0));
  return InferSameAsInput(node);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  return EvalUnary(
      node, *in[0], out[0], [](float x) { return std::fabs(x); },
      [](int64_t x) {
        return x < 0 ? static_cast<int64_t>(uint64_t{0} - static_cast<uint64_t>(x)) : x;
      });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(abs) {
  registry.Register({.name = "Abs", .infer = ops::Infer, .eval = ops::Eval, .is_elementwise = true});
}
