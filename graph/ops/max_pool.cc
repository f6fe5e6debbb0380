// MaxPool: max over sliding windows of 1-D/2-D/3-D inputs (pads, auto_pad, dilations,
// ceil_mode) and the optional Indices output: int64 offsets of each maximum into X,
// row-major (storage_order 0) or, for 1-D and 2-D windows, with H and W swapped
// (storage_order 1); the first maximum wins, or the first NaN. With the
// kiln-internal attribute channels_last=1 (2-D only, no Indices), X is [N, H, W, C]
// and Y [N, OH, OW, C].
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/channels_last.h"
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
  const DType dtype = x->dtype();
  if (!IsFloating(dtype) && dtype != DType::kInt8 && dtype != DType::kUInt8) {
    return node.Error(absl::StrCat("dtype ", DTypeName(dtype), " is not supported (f32, f16, bf16, i8, u8)"));
  }
  if (x->rank() < 3 || x->rank() > 5) {
    return node.Error(
        absl::StrCat("input X must be [N, C, spatial...] with 1 to 3 spatial dims, got ", x->TypeString()));
  }
  KILN_ASSIGN_OR_RETURN(const int64_t storage_order, node.GetInt("storage_order", 0));
  KILN_ASSIGN_OR_RETURN(const bool channels_last, ChannelsLast(node));
  if (storage_order != 0 && storage_order != 1) {
    return node.Error(absl::StrCat("storage_order must be 0 or 1, got ", storage_order));
  }
  if (node.num_outputs() > 1 && channels_last) return node.Error("channels_last MaxPool has no Indices output");
  if (node.num_outputs() > 1 && storage_order == 1 && x->rank() == 5) {
    return node.Unsupported("the Indices output with storage_order=1 of a 3-D window is not supported");
  }
  KILN_ASSIGN_OR_RETURN(WindowGeometry win, Window(node, Spatial(x->shape(), channels_last)));
  Shape out = {x->shape()[0]};
  if (!channels_last) out.push_back(x->shape()[1]);
  out.insert(out.end(), win.output.begin(), win.output.end());
  if (channels_last) out.push_back(x->shape()[3]);
  node.output(0)->SetType(dtype, out);
  if (node.num_outputs() > 1) node.output(1)->SetType(DType::kInt64, out);
  return absl::OkStatus();
}

// Y and Indices together, one plane after another (NCHW only).
absl::Status EvalWithIndices(const Node& node, const Tensor& in, Tensor& out, Tensor& indices) {
  const Shape& xs = in.shape();
  KILN_ASSIGN_OR_RETURN(WindowGeometry win, Window(node, Spatial(xs, /*channels_last=*/false)));
  KILN_ASSIGN_OR_RETURN(const int64_t storage_order, node.GetInt("storage_order", 0));
  const Window3 g = LiftWindow(Shape(xs.begin() + 2, xs.end()), win);
  const std::vector<TapRange> rd = TapRanges(g, 0), rh = TapRanges(g, 1), rw = TapRanges(g, 2);
  const int64_t planes = xs[0] * xs[1], in_plane = g.in[0] * g.in[1] * g.in[2];
  const std::vector<float> x = in.ToFloat();
  std::vector<float> y;
  std::vector<int64_t> idx;
  y.reserve(out.numel());
  idx.reserve(out.numel());
  for (int64_t t = 0; t < planes; ++t) {
    for (int64_t od = 0; od < g.out[0]; ++od) {
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          const TapRange &d = rd[od], &h = rh[oh], &w = rw[ow];
          float m = -std::numeric_limits<float>::infinity();
          int64_t at = -1;
          for (int64_t td = d.lo; td < d.hi; ++td) {
            const int64_t id = d.start + td * g.dilation[0];
            for (int64_t th = h.lo; th < h.hi; ++th) {
              const int64_t ih = h.start + th * g.dilation[1];
              for (int64_t tw = w.lo; tw < w.hi; ++tw) {
                const int64_t iw = w.start + tw * g.dilation[2];
                const float v = x[t * in_plane + (id * g.in[1] + ih) * g.in[2] + iw];
                if (at < 0 || v > m || (v != v && m == m)) {
                  m = v;
                  at = storage_order == 0 ? (id * g.in[1] + ih) * g.in[2] + iw : iw * g.in[1] + ih;
                }
              }
            }
          }
          y.push_back(m);
          idx.push_back(at < 0 ? -1 : t * in_plane + at);
        }
      }
    }
  }
  out = Tensor::FromFloat(out.dtype(), out.shape(), y);
  indices = Tensor::FromInt64(DType::kInt64, indices.shape(), idx);
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
  if (out.size() > 1) return EvalWithIndices(node, *in[0], out[0], out[1]);
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
