// Pow: element-wise base ^ exponent with numpy broadcasting; the exponent may have
// another numeric dtype than the base, and the output has the base's dtype.
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/elementwise_eval.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireNumeric(node, 0));
  KILN_RETURN_IF_ERROR(RequireNumeric(node, 1));
  KILN_ASSIGN_OR_RETURN(Shape shape,
                        BroadcastShapes(node, node.input(0)->shape(), node.input(1)->shape()));
  node.output(0)->SetType(node.input(0)->dtype(), shape);
  return absl::OkStatus();
}

// Integer power with int64 wrap-around (as numpy); negative exponents give the
// truncated value of 1 / base^-e.
int64_t IntPow(int64_t base, int64_t e) {
  if (e < 0) {
    if (base == 1) return 1;
    if (base == -1) return (e & 1) ? -1 : 1;
    return 0;
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  while (e > 0) {
    if (e & 1) result *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<int64_t>(result);
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  const Tensor& a = *in[0];
  const Tensor& b = *in[1];
  if (IsFloating(a.dtype()) || !IsFloating(b.dtype())) {
    // Float base (any exponent, read as float) or integer base with integer exponent.
    return EvalBinary(
        node, a, b, out[0], [](float x, float y) { return std::pow(x, y); }, IntPow);
  }
  // Integer base, floating exponent: compute in double, truncate to the base type.
  const int64_t n = out[0].numel();
  const std::vector<int64_t> oa = BroadcastOffsets(a.shape(), out[0].shape());
  const std::vector<int64_t> ob = BroadcastOffsets(b.shape(), out[0].shape());
  const std::vector<int64_t> x = a.ToInt64();
  const std::vector<float> y = b.ToFloat();
  std::vector<int64_t> r(n);
  for (int64_t i = 0; i < n; ++i) {
    r[i] = TruncToInt64(std::pow(static_cast<double>(x[oa[i]]), static_cast<double>(y[ob[i]])));
  }
  out[0] = Tensor::FromInt64(out[0].dtype(), out[0].shape(), r);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(pow) {
  registry.Register({.name = "Pow", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer,
                     .eval = ops::Eval, .is_elementwise = true});
}
