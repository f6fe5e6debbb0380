// MaxPool: max over sliding windows of 1-D/2-D/3-D inputs (pads, auto_pad, dilations,
// ceil_mode); the optional Indices output is not supported.
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::ops {
namespace {

absl::StatusOr<WindowGeometry> Window(const Node& node) {
  const Shape& x = node.input(0)->shape();
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, node.GetInts("kernel_shape"));
  KILN_ASSIGN_OR_RETURN(int64_t ceil_mode, node.GetInt("ceil_mode", 0));
  return ComputeWindow(node, Shape(x.begin() + 2, x.end()), kernel, /*use_dilations=*/true, ceil_mode != 0);
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
  KILN_ASSIGN_OR_RETURN(WindowGeometry win, Window(node));
  Shape out = {x->shape()[0], x->shape()[1]};
  out.insert(out.end(), win.output.begin(), win.output.end());
  node.output(0)->SetType(dtype, out);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(WindowGeometry win, Window(node));
  const Shape& xs = in[0]->shape();
  const Window3 g = LiftWindow(Shape(xs.begin() + 2, xs.end()), win);
  const std::vector<TapRange> rd = TapRanges(g, 0), rh = TapRanges(g, 1), rw = TapRanges(g, 2);
  const int64_t planes = xs[0] * xs[1];
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  const int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
  const FloatView x(*in[0]);
  FloatSink sink(out[0]);
  float* y = sink.data();
  const int64_t work = out_plane * g.kernel[0] * g.kernel[1] * g.kernel[2];
  ParallelFor(planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(work, 1)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const float* plane = x.data() + t * in_plane;
      float* dst = y + t * out_plane;
      for (int64_t od = 0; od < g.out[0]; ++od) {
        const TapRange& d = rd[od];
        for (int64_t oh = 0; oh < g.out[1]; ++oh) {
          const TapRange& h = rh[oh];
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            const TapRange& w = rw[ow];
            float m = -std::numeric_limits<float>::infinity();
            for (int64_t td = d.lo; td < d.hi; ++td) {
              const int64_t id = d.start + td * g.dilation[0];
              for (int64_t th = h.lo; th < h.hi; ++th) {
                const float* row = plane + (id * g.in[1] + h.start + th * g.dilation[1]) * g.in[2];
                for (int64_t tw = w.lo; tw < w.hi; ++tw) {
                  const float v = row[w.start + tw * g.dilation[2]];
                  if (v > m || v != v) m = v;
                }
              }
            }
            *dst++ = m;
          }
        }
      }
    }
  });
  sink.Commit();
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(max_pool) {
  registry.Register(
      {.name = "MaxPool", .min_outputs = 1, .max_outputs = 2, .infer = ops::Infer, .eval = ops::Eval});
}
