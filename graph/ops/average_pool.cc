// AveragePool: mean over sliding windows of 1-D/2-D/3-D inputs (pads, auto_pad,
// dilations, ceil_mode, count_include_pad). With the kiln-internal attribute
// channels_last=1 (2-D only), X is [N, H, W, C] and Y [N, OH, OW, C].
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/channels_last.h"
#include "graph/ops/infer_common.h"
#include "graph/ops/pooling.h"
#include "graph/ops/window.h"

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
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  if (x->rank() < 3 || x->rank() > 5) {
    return node.Error(
        absl::StrCat("input X must be [N, C, spatial...] with 1 to 3 spatial dims, got ", x->TypeString()));
  }
  KILN_RETURN_IF_ERROR(node.GetInt("count_include_pad", 0).status());
  KILN_ASSIGN_OR_RETURN(const bool channels_last, ChannelsLast(node));
  KILN_ASSIGN_OR_RETURN(WindowGeometry win, Window(node, Spatial(x->shape(), channels_last)));
  Shape out = {x->shape()[0]};
  if (!channels_last) out.push_back(x->shape()[1]);
  out.insert(out.end(), win.output.begin(), win.output.end());
  if (channels_last) out.push_back(x->shape()[3]);
  node.output(0)->SetType(x->dtype(), out);
  return absl::OkStatus();
}

absl::Status EvalNchw(const Node& node, const Tensor& in, Tensor& out) {
  KILN_ASSIGN_OR_RETURN(WindowGeometry win, Window(node, Spatial(in.shape(), /*channels_last=*/false)));
  KILN_ASSIGN_OR_RETURN(int64_t count_include_pad, node.GetInt("count_include_pad", 0));
  EvalWindowPool(
      in, out, win, 0.f, [](float sum, float v) { return sum + v; },
      [&](float sum, const TapRange& d, const TapRange& h, const TapRange& w) {
        // Padding counts toward the divisor only with count_include_pad; taps past
        // the end padding (ceil_mode) never do.
        const int64_t count = count_include_pad
                                  ? (d.hi_pad - d.lo_pad) * (h.hi_pad - h.lo_pad) * (w.hi_pad - w.lo_pad)
                                  : (d.hi - d.lo) * (h.hi - h.lo) * (w.hi - w.lo);
        return count > 0 ? sum / static_cast<float>(count) : 0.f;
      });
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

KILN_OP_FILE(average_pool) {
  registry.Register({.name = "AveragePool", .infer = ops::Infer, .eval = ops::Eval});
}
