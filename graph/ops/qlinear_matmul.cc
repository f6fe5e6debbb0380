// QLinearMatMul: y = saturate(round_half_even(((a - a_zp) @ (b - b_zp)) * a_scale *
// b_scale / y_scale) + y_zp) for int8/uint8 a, b, y (per-tensor scales; zero points
// per tensor, or per row of a / per column of b).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/infer_common.h"
#include "graph/ops/quantized.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireQuantized(node, 0, "a"));
  KILN_RETURN_IF_ERROR(RequireQuantized(node, 3, "b"));
  KILN_RETURN_IF_ERROR(RequireQuantized(node, 7, "y_zero_point"));
  for (int i : {1, 4, 6}) {
    KILN_RETURN_IF_ERROR(RequireFloat(node, i));
    if (node.input(i)->numel() != 1) return node.Error("scales must be single values (per-tensor)");
  }
  KILN_ASSIGN_OR_RETURN(IntMatMulPlan p, PlanIntMatMul(node, 0, 3, 2, 5));
  node.output(0)->SetType(node.input(7)->dtype(), p.out);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(IntMatMulPlan p, PlanIntMatMul(node, 0, 3, 2, 5));
  const std::vector<int64_t> acc =
      IntMatMul(p, in[0]->ToInt64(), in[3]->ToInt64(), in[2]->ToInt64(), in[5]->ToInt64());
  const double scale = static_cast<double>(in[1]->ScalarFloat()) * in[4]->ScalarFloat() / in[6]->ScalarFloat();
  const int64_t zp = in[7]->ScalarInt64();
  std::vector<int64_t> y(acc.size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = Requantize(static_cast<double>(acc[i]) * scale, zp, out[0].dtype());
  out[0] = Tensor::FromInt64(out[0].dtype(), p.out, y);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(qlinear_matmul) {
  registry.Register({.name = "QLinearMatMul", .min_inputs = 8, .max_inputs = 8, .infer = ops::Infer, .eval = ops::Eval});
}
