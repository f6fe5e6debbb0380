// ReduceLogSumExp: log(sum(exp(x))) over `axes` (optional constant input 1; keepdims,
// noop_with_empty_axes), computed stably as max + log(sum(exp(x - max))).
#include <cmath>

#include "common/parallel.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/reduce_eval.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) { return InferReduce(node, /*allow_integer=*/true, /*allow_bool=*/false); }

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  const Tensor& x = *in[0];
  KILN_ASSIGN_OR_RETURN(std::vector<bool> mask, ReducedAxes(node, x.rank()));
  // The output laid out with reduced dims kept as 1, for broadcasting back.
  Shape kept = x.shape();
  for (int d = 0; d < x.rank(); ++d) {
    if (mask[d]) kept[d] = 1;
  }
  const Tensor xf = IsFloating(x.dtype()) && x.dtype() == DType::kFloat32
                        ? x
                        : Tensor::FromFloat(DType::kFloat32, x.shape(), x.ToFloat());
  Tensor mx(DType::kFloat32, kept);
  KILN_RETURN_IF_ERROR(EvalReduce(node, ReduceKind::kMax, xf, mx));
  float* m = mx.mutable_data<float>();
  for (int64_t i = 0; i < mx.numel(); ++i) {
    if (!std::isfinite(m[i])) m[i] = 0.f;  // all -inf (or inf/NaN): no shift
  }
  const std::vector<int64_t> at = BroadcastOffsets(kept, x.shape());
  Tensor shifted(DType::kFloat32, x.shape());
  {
    const float* xs = xf.data<float>();
    float* s = shifted.mutable_data<float>();
    ParallelFor(x.numel(), 1 << 14, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) s[i] = std::exp(xs[i] - m[at[i]]);
    });
  }
  Tensor sum(DType::kFloat32, kept);
  KILN_RETURN_IF_ERROR(EvalReduce(node, ReduceKind::kSum, shifted, sum));
  const float* sv = sum.data<float>();
  std::vector<float> y(mx.numel());
  for (int64_t i = 0; i < mx.numel(); ++i) y[i] = m[i] + std::log(sv[i]);
  if (IsFloating(out[0].dtype())) {
    out[0] = Tensor::FromFloat(out[0].dtype(), out[0].shape(), y);
  } else {
    std::vector<int64_t> yi(y.size());
    for (size_t i = 0; i < y.size(); ++i) yi[i] = static_cast<int64_t>(y[i]);
    out[0] = Tensor::FromInt64(out[0].dtype(), out[0].shape(), yi);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(reduce_log_sum_exp) {
  registry.Register({.name = "ReduceLogSumExp", .min_inputs = 1, .max_inputs = 2, .infer = ops::Infer,
                     .eval = ops::Eval});
}
