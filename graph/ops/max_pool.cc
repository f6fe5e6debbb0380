// MaxPool: max over sliding windows of 1-D/2-D/3-D inputs (pads, auto_pad, dilations,
// ceil_mode); the optional Indices output is not supported. With the kiln-internal
// attribute channels_last=1 (2-D only), X is [N, H, W, C] and Y [N, OH, OW, C].
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::ops {
namespace {

// Spatial dims of X: [N, C, spatial...], or [N, H, W, C] with channels_last.
Shape Spatial(const Shape& x, bool channels_last) {
  return channels_last ? Shape(x.begin() + 1, x.end() - 1) : Shape(x.begin() + 2, x.end());
}

absl::StatusOr<WindowGeometry> Window(const Node& node, const Shape& spatial) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, node.GetInts("kernel_shape"));
  KILN_ASSIGN_OR_RETURN(int64_t ceil_mode, node.GetInt("ceil_mode", 0));
  return ComputeWindow(node, spatial, kernel, /*use_dilations=*/true, ceil_mode != 0);
}

absl::Status Infer(Node& node) {
  const Value* x = node.input(0);
  const DType dtype = x->dtype();
  if (!IsFloating(dtype) && dtype != DType::kInt8 && dtype != DType::kUInt8) {
    return node.Error(absl::StrCat("dtype ", DTypeName(dtype), " is not supported (f32, f16, bf16, i8, u8)"));
  }
  if (node.num_outputs() > 1) {
    return node.Unsupported(
        "the optional Indices output (output 1) is not supported; use MaxPool with one output");
  }
  if (x->rank() < 3 || x->rank() > 5) {
    return node.Error(
        absl::StrCat("input X must be [N, C, spatial...] with 1 to 3 spatial dims, got ", x->TypeString()));
  }
  KILN_RETURN_IF_ERROR(node.GetInt("storage_order", 0).status());
  KILN_ASSIGN_OR_RETURN(const bool channels_last, ChannelsLast(node));
  KILN_ASSIGN_OR_RETURN(WindowGeometry win, Window(node, Spatial(x->shape(), channels_last)));
  Shape out = {x->shape()[0]};
  if (!channels_last) out.push_back(x->shape()[1]);
  out.insert(out.end(), win.output.begin(), win.output.end());
  if (channels_last) out.push_back(x->shape()[3]);
  node.output(0)->SetType(dtype, out);
  return absl::OkStatus();
}

absl::Status EvalNchw(const Node& node, const Tensor& in, Tensor& out) {
  KILN_ASSIGN_OR_RETURN(WindowGeometry win, Window(node, Spatial(in.shape(), /*channels_last=*/false)));
  EvalWindowPool(
      in, out, win, -std::numeric_limits<float>::infinity(),
      [](float m, float v) { return (v > m || v != v) ? v : m; },  // NaN propagates
      [](float m, const TapRange&, const TapRange&, const TapRange&) { return m; });
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(const bool channels_last, ChannelsLast(node));
  if (!channels_last) return EvalNchw(node, *in[0], out[0]);
  return EvalThroughNchw(in, 1, out[0], [&](absl::Span<const Tensor* const> nchw, Tensor& y) {
    return EvalNchw(node, *nchw[0], y);
  });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(max_pool) {
  registry.Register(
      {.name = "MaxPool", .min_outputs = 1, .max_outputs = 2, .infer = ops::Infer, .eval = ops::Eval});
}
