// QLinearConv: y = saturate(round_half_even((conv(x - x_zp, w - w_zp) + B) * x_scale *
// w_scale / y_scale) + y_zp), with Conv's attributes; w_scale and w_zp per tensor or
// per output channel, B an optional int32 bias.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/quantized.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireQuantized(node, 0, "x"));
  KILN_RETURN_IF_ERROR(RequireQuantized(node, 3, "w"));
  KILN_RETURN_IF_ERROR(RequireQuantized(node, 7, "y_zero_point"));
  KILN_ASSIGN_OR_RETURN(IntConvPlan p, PlanIntConv(node, 0, 3));
  const int64_t m = node.input(3)->shape()[0];
  if (node.input(4)->numel() != 1 && node.input(4)->numel() != m) {
    return node.Error(absl::StrCat("w_scale must be one value or ", m, " (one per output channel)"));
  }
  if (node.has_input(8) && (node.input(8)->dtype() != DType::kInt32 || node.input(8)->shape() != Shape{m})) {
    return node.Error(absl::StrCat("B must be i32[", m, "], got ", node.input(8)->TypeString()));
  }
  node.output(0)->SetType(node.input(7)->dtype(), p.out);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(IntConvPlan p, PlanIntConv(node, 0, 3));
  const std::vector<int64_t> acc = IntConv(p, in[0]->shape(), in[3]->shape(), in[0]->ToInt64(), in[3]->ToInt64(),
                                           in[2]->ScalarInt64(), in[5]->ToInt64());
  const std::vector<float> ws = in[4]->ToFloat();
  const std::vector<int64_t> bias = in.size() > 8 && in[8] ? in[8]->ToInt64() : std::vector<int64_t>();
  const double xs = in[1]->ScalarFloat(), ys = in[6]->ScalarFloat();
  const int64_t zp = in[7]->ScalarInt64(), m = p.out[1];
  int64_t plane = 1;
  for (size_t d = 2; d < p.out.size(); ++d) plane *= p.out[d];
  std::vector<int64_t> y(acc.size());
  for (size_t i = 0; i < y.size(); ++i) {
    const int64_t oc = (static_cast<int64_t>(i) / plane) % m;
    const double v = static_cast<double>(acc[i] + (bias.empty() ? 0 : bias[oc])) * xs *
                     ws[ws.size() == 1 ? 0 : oc] / ys;
    y[i] = Requantize(v, zp, out[0].dtype());
  }
  out[0] = Tensor::FromInt64(out[0].dtype(), p.out, y);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(qlinear_conv) {
  registry.Register({.name = "QLinearConv", .min_inputs = 8, .max_inputs = 9, .infer = ops::Infer, .eval = ops::Eval});
}
