// QuantizeLinear: y = saturate(round_half_even(x / y_scale) + y_zero_point), to the
// zero point's dtype (int8 or uint8; uint8 without one); scale and zero point per
// tensor or per index along `axis` (default 1).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/infer_common.h"
#include "graph/ops/quantized.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  KILN_RETURN_IF_ERROR(RequireFloat(node, 1));
  KILN_RETURN_IF_ERROR(QuantizationAxis(node, 1).status());
  DType out = DType::kUInt8;
  if (node.has_input(2)) {
    KILN_RETURN_IF_ERROR(RequireQuantized(node, 2, "y_zero_point"));
    out = node.input(2)->dtype();
    if (node.input(2)->numel() != node.input(1)->numel()) {
      return node.Error(absl::StrCat("y_zero_point ", node.input(2)->TypeString(), " must match y_scale ",
                                     node.input(1)->TypeString()));
    }
  }
  node.output(0)->SetType(out, node.input(0)->shape());
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(PerAxis a, QuantizationAxis(node, 1));
  const std::vector<float> x = in[0]->ToFloat(), s = in[1]->ToFloat();
  const std::vector<int64_t> zp = in.size() > 2 && in[2] != nullptr ? in[2]->ToInt64() : std::vector<int64_t>{0};
  std::vector<int64_t> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t c = a.per_axis ? (static_cast<int64_t>(i) / a.inner) % a.dim : 0;
    y[i] = Requantize(static_cast<double>(x[i] / s[c]), zp[c], out[0].dtype());
  }
  out[0] = Tensor::FromInt64(out[0].dtype(), out[0].shape(), y);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(quantize_linear) {
  registry.Register(
      {.name = "QuantizeLinear", .min_inputs = 2, .max_inputs = 3, .infer = ops::Infer, .eval = ops::Eval});
}
