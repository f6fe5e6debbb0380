// MatMulInteger: the int32 product of int8/uint8 matrices after subtracting their zero
// points (scalars, or per row of A / per column of B), numpy batch broadcasting.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/quantized.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireQuantized(node, 0, "A"));
  KILN_RETURN_IF_ERROR(RequireQuantized(node, 1, "B"));
  KILN_ASSIGN_OR_RETURN(IntMatMulPlan p, PlanIntMatMul(node, 0, 1, 2, 3));
  node.output(0)->SetType(DType::kInt32, p.out);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(IntMatMulPlan p, PlanIntMatMul(node, 0, 1, 2, 3));
  auto values = [&](int i) { return i < static_cast<int>(in.size()) && in[i] ? in[i]->ToInt64() : std::vector<int64_t>(); };
  out[0] = Tensor::FromInt64(DType::kInt32, p.out, IntMatMul(p, values(0), values(1), values(2), values(3)));
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(matmul_integer) {
  registry.Register({.name = "MatMulInteger", .min_inputs = 2, .max_inputs = 4, .infer = ops::Infer, .eval = ops::Eval});
}
