// DequantizeLinear: y = (x - x_zero_point) * x_scale in f32, x int8, uint8 or int32;
// scale and zero point per tensor or per index along `axis` (default 1).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/infer_common.h"
#include "graph/ops/quantized.h"

namespace kiln::ops {
namespace {

absl::Status Infer(Node& node) {
  const DType t = node.input(0)->dtype();
  if (t != DType::kInt8 && t != DType::kUInt8 && t != DType::kInt32) {
    return node.Error(absl::StrCat("x must be int8, uint8 or int32, got ", DTypeName(t)));
  }
  KILN_RETURN_IF_ERROR(RequireFloat(node, 1));
  KILN_RETURN_IF_ERROR(QuantizationAxis(node, 1).status());
  if (node.has_input(2) && (node.input(2)->dtype() != t || node.input(2)->numel() != node.input(1)->numel())) {
    return node.Error(absl::StrCat("x_zero_point ", node.input(2)->TypeString(), " must have x's dtype and match ",
                                   "x_scale ", node.input(1)->TypeString()));
  }
  node.output(0)->SetType(node.input(1)->dtype(), node.input(0)->shape());
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(PerAxis a, QuantizationAxis(node, 1));
  const std::vector<int64_t> x = in[0]->ToInt64();
  const std::vector<float> s = in[1]->ToFloat();
  const std::vector<int64_t> zp = in.size() > 2 && in[2] != nullptr ? in[2]->ToInt64() : std::vector<int64_t>(s.size(), 0);
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t c = a.per_axis ? (static_cast<int64_t>(i) / a.inner) % a.dim : 0;
    y[i] = static_cast<float>(x[i] - zp[c]) * s[c];
  }
  out[0] = Tensor::FromFloat(out[0].dtype(), out[0].shape(), y);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(dequantize_linear) {
  registry.Register(
      {.name = "DequantizeLinear", .min_inputs = 2, .max_inputs = 3, .infer = ops::Infer, .eval = ops::Eval});
}
