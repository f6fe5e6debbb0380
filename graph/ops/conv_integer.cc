// ConvInteger: the int32 convolution of int8/uint8 x and w after subtracting their
// zero points (x's a scalar, w's a scalar or one per output channel), with Conv's
// attributes.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/quantized.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireQuantized(node, 0, "x"));
  KILN_RETURN_IF_ERROR(RequireQuantized(node, 1, "w"));
  KILN_ASSIGN_OR_RETURN(IntConvPlan p, PlanIntConv(node, 0, 1));
  node.output(0)->SetType(DType::kInt32, p.out);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(IntConvPlan p, PlanIntConv(node, 0, 1));
  const int64_t x_zp = in.size() > 2 && in[2] ? in[2]->ScalarInt64() : 0;
  const std::vector<int64_t> w_zp = in.size() > 3 && in[3] ? in[3]->ToInt64() : std::vector<int64_t>();
  out[0] = Tensor::FromInt64(DType::kInt32, p.out,
                             IntConv(p, in[0]->shape(), in[1]->shape(), in[0]->ToInt64(), in[1]->ToInt64(), x_zp, w_zp));
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(conv_integer) {
  registry.Register({.name = "ConvInteger", .min_inputs = 2, .max_inputs = 4, .infer = ops::Infer, .eval = ops::Eval});
}
