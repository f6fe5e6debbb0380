// IsInf: element-wise bool, true where x is +inf (detect_positive, default 1) or
// -inf (detect_negative, default 1).
#include <cmath>

#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(node.GetInt("detect_negative", 1).status());
  KILN_RETURN_IF_ERROR(node.GetInt("detect_positive", 1).status());
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  node.output(0)->SetType(DType::kBool, node.input(0)->shape());
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(const int64_t neg, node.GetInt("detect_negative", 1));
  KILN_ASSIGN_OR_RETURN(const int64_t pos, node.GetInt("detect_positive", 1));
  const bool detect_neg = neg != 0, detect_pos = pos != 0;
  return EvalUnary(node, *in[0], out[0], [detect_neg, detect_pos](float x) {
    return std::isinf(x) && (x > 0.f ? detect_pos : detect_neg) ? 1.f : 0.f;
  });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(is_inf) {
  registry.Register({.name = "IsInf", .infer = ops::Infer, .eval = ops::Eval, .is_elementwise = true});
}
