// Conv: 1-D/2-D/3-D grouped convolution (strides, dilations, pads/auto_pad, optional bias)
// as one GEMM per image and group over an implicit im2col; depthwise convs run directly.
// With the kiln-internal attribute channels_last=1 (2-D only), X is [N, H, W, C], W is
// [OC, KH, KW, C/group] and Y is [N, OH, OW, OC]; the reference permutes to NCHW and back.
#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/channels_last.h"
#include "graph/ops/cpu_gemm.h"
#include "graph/ops/float_access.h"
#include "graph/ops/infer_common.h"
#include "graph/ops/window.h"

namespace kiln::ops {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// Output positions o in [0, out) whose input position o*stride + offset lies in [0, in).
void ValidRange(int64_t offset, int64_t stride, int64_t in, int64_t out, int64_t* lo, int64_t* hi) {
  *lo = std::clamp<int64_t>(CeilDiv(-offset, stride), 0, out);
  *hi = std::clamp<int64_t>(CeilDiv(in - offset, stride), *lo, out);
}

// Rows of the virtual im2col matrix of one image and group: row p = (c, kd, kh, kw),
// column j = (od, oh, ow); element = x[c, od*s - pad + kd*dil, ...] or 0 in padding.
struct Im2Col {
  const float* x;  // first channel of the group
  Window3 g;

  void operator()(int64_t p, int64_t j0, int64_t n, float* dst) const {
    const int64_t kw = p % g.kernel[2];
    const int64_t kh = (p / g.kernel[2]) % g.kernel[1];
    const int64_t kd = (p / (g.kernel[2] * g.kernel[1])) % g.kernel[0];
    const int64_t c = p / (g.kernel[2] * g.kernel[1] * g.kernel[0]);
    const float* plane = x + c * g.in[0] * g.in[1] * g.in[2];
    const int64_t off_w = kw * g.dilation[2] - g.pad_begin[2];
    int64_t ow_lo, ow_hi;
    ValidRange(off_w, g.stride[2], g.in[2], g.out[2], &ow_lo, &ow_hi);
    int64_t ow = j0 % g.out[2];
    int64_t oh = (j0 / g.out[2]) % g.out[1];
    int64_t od = j0 / (g.out[2] * g.out[1]);
    while (n > 0) {
      const int64_t len = std::min(n, g.out[2] - ow);
      const int64_t id = od * g.stride[0] + kd * g.dilation[0] - g.pad_begin[0];
      const int64_t ih = oh * g.stride[1] + kh * g.dilation[1] - g.pad_begin[1];
      if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
        std::fill(dst, dst + len, 0.f);
      } else {
        // Input column of output column o is o * stride + off_w, inside [0, in) for o in [lo, hi).
        const float* row = plane + (id * g.in[1] + ih) * g.in[2];
        const int64_t lo = std::clamp(ow_lo, ow, ow + len), hi = std::clamp(ow_hi, lo, ow + len);
        std::fill(dst, dst + (lo - ow), 0.f);
        if (g.stride[2] == 1) {
          std::copy(row + lo + off_w, row + hi + off_w, dst + (lo - ow));
        } else {
          for (int64_t o = lo; o < hi; ++o) dst[o - ow] = row[o * g.stride[2] + off_w];
        }
        std::fill(dst + (hi - ow), dst + len, 0.f);
      }
      dst += len;
      n -= len;
      ow = 0;
      if (++oh == g.out[1]) {
        oh = 0;
        ++od;
      }
    }
  }
};

// Where the dims of X and W sit: NCHW / OIHW, or NHWC / OHWI with channels_last.
struct ConvDims {
  bool channels_last = false;
  int64_t channels = 0;           // C of X
  int64_t weight_channels = 0;    // C/group of W
  Shape spatial;                  // spatial dims of X
  std::vector<int64_t> kernel;    // spatial dims of W
};

ConvDims Dims(const Shape& x, const Shape& w, bool channels_last) {
  ConvDims d;
  d.channels_last = channels_last;
  if (channels_last) {
    d.channels = x[3];
    d.weight_channels = w[3];
    d.spatial = Shape(x.begin() + 1, x.end() - 1);
    d.kernel.assign(w.begin() + 1, w.end() - 1);
  } else {
    d.channels = x[1];
    d.weight_channels = w[1];
    d.spatial = Shape(x.begin() + 2, x.end());
    d.kernel.assign(w.begin() + 2, w.end());
  }
  return d;
}

absl::StatusOr<WindowGeometry> Window(const Node& node, const ConvDims& d) {
  if (node.has_attr("kernel_shape")) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> attr, node.GetInts("kernel_shape"));
    if (attr != d.kernel) {
      return node.Error(absl::StrCat("kernel_shape ", ShapeToString(attr), " does not match the weights ",
                                     ShapeToString(node.input(1)->shape()),
                                     d.channels_last ? " ([OC, KH, KW, C/group] with channels_last=1)" : ""));
    }
  }
  return ComputeWindow(node, d.spatial, d.kernel, /*use_dilations=*/true, /*ceil_mode=*/false);
}

absl::Status Infer(Node& node) {
  const Value* x = node.input(0);
  const Value* w = node.input(1);
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  for (int i = 1; i < node.num_inputs(); ++i) {
    if (node.has_input(i) && node.input(i)->dtype() != x->dtype()) {
      return node.Error(absl::StrCat("inputs must share a dtype, got ", DTypeName(x->dtype()), " and ",
                                     DTypeName(node.input(i)->dtype())));
    }
  }
  if (x->rank() < 3 || x->rank() > 5) {
    return node.Error(
        absl::StrCat("input X must be [N, C, spatial...] with 1 to 3 spatial dims, got ", x->TypeString()));
  }
  KILN_ASSIGN_OR_RETURN(const bool channels_last, ChannelsLast(node));
  if (w->rank() != x->rank()) {
    return node.Error(
        absl::StrCat("weights W ", w->TypeString(), " must have the rank of X ", x->TypeString()));
  }
  KILN_ASSIGN_OR_RETURN(int64_t group, node.GetInt("group", 1));
  const ConvDims d = Dims(x->shape(), w->shape(), channels_last);
  const int64_t c = d.channels, m = w->shape()[0];
  if (group < 1) return node.Error(absl::StrCat("group must be positive, got ", group));
  if (d.weight_channels * group != c) {
    return node.Error(absl::StrCat("X has ", c, " channels but W ", ShapeToString(w->shape()), " with group ",
                                   group, " expects ", d.weight_channels * group,
                                   channels_last ? " (channels_last=1: X is [N, H, W, C], W [OC, KH, KW, C/group])"
                                                 : ""));
  }
  if (m % group != 0) {
    return node.Error(absl::StrCat("W has ", m, " output channels, not divisible by group ", group));
  }
  if (node.has_input(2) && node.input(2)->shape() != Shape{m}) {
    return node.Error(absl::StrCat("bias B must be [", m, "], got ", node.input(2)->TypeString()));
  }
  KILN_ASSIGN_OR_RETURN(WindowGeometry win, Window(node, d));
  Shape out = {x->shape()[0]};
  if (!channels_last) out.push_back(m);
  out.insert(out.end(), win.output.begin(), win.output.end());
  if (channels_last) out.push_back(m);
  node.output(0)->SetType(x->dtype(), out);
  return absl::OkStatus();
}

// Depthwise-style conv (one input channel per group): direct accumulation per
// output plane, contiguous along the output row.
void DirectConv(const float* x, const float* w, float* y, int64_t batch, int64_t m, int64_t mg,
                const Window3& g) {
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  const int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
  const int64_t taps = g.kernel[0] * g.kernel[1] * g.kernel[2];
  ParallelFor(batch * m, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t n = t / m, oc = t % m;
      const float* plane = x + (n * (m / mg) + oc / mg) * in_plane;
      float* out = y + t * out_plane;
      for (int64_t tap = 0; tap < taps; ++tap) {
        const int64_t kw = tap % g.kernel[2], kh = (tap / g.kernel[2]) % g.kernel[1];
        const int64_t kd = tap / (g.kernel[2] * g.kernel[1]);
        const float wv = w[oc * taps + tap];
        const int64_t off_w = kw * g.dilation[2] - g.pad_begin[2];
        int64_t lo, hi;
        ValidRange(off_w, g.stride[2], g.in[2], g.out[2], &lo, &hi);
        for (int64_t od = 0; od < g.out[0]; ++od) {
          const int64_t id = od * g.stride[0] + kd * g.dilation[0] - g.pad_begin[0];
          if (id < 0 || id >= g.in[0]) continue;
          for (int64_t oh = 0; oh < g.out[1]; ++oh) {
            const int64_t ih = oh * g.stride[1] + kh * g.dilation[1] - g.pad_begin[1];
            if (ih < 0 || ih >= g.in[1]) continue;
            const float* row = plane + (id * g.in[1] + ih) * g.in[2];
            float* orow = out + (od * g.out[1] + oh) * g.out[2];
            if (g.stride[2] == 1) {
              const float* src = row + lo + off_w;
              float* dst = orow + lo;
              for (int64_t o = 0; o < hi - lo; ++o) dst[o] += wv * src[o];
            } else {
              for (int64_t o = lo; o < hi; ++o) orow[o] += wv * row[o * g.stride[2] + off_w];
            }
          }
        }
      }
    }
  });
}

// The NCHW computation: in[0] is X [N, C, spatial...], in[1] is W [M, C/group, kernel...].
absl::Status EvalNchw(const Node& node, absl::Span<const Tensor* const> in, Tensor& result) {
  const Shape& xs = in[0]->shape();
  const Shape& ws = in[1]->shape();
  KILN_ASSIGN_OR_RETURN(WindowGeometry win, Window(node, Dims(xs, ws, /*channels_last=*/false)));
  KILN_ASSIGN_OR_RETURN(int64_t group, node.GetInt("group", 1));
  const Window3 g = LiftWindow(Shape(xs.begin() + 2, xs.end()), win);
  const int64_t batch = xs[0], c = xs[1], m = ws[0];
  const int64_t cg = c / group, mg = m / group;
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  const int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
  const int64_t kg = cg * g.kernel[0] * g.kernel[1] * g.kernel[2];

  const FloatView x(*in[0]), w(*in[1]);
  FloatSink sink(result);
  float* y = sink.data();
  const bool has_bias = in.size() > 2 && in[2] != nullptr;

  // Every output plane starts as its bias (or zero); both paths accumulate onto it.
  {
    const std::optional<FloatView> bias = has_bias ? std::optional<FloatView>(*in[2]) : std::nullopt;
    ParallelFor(batch * m, std::max<int64_t>(1, 16384 / std::max<int64_t>(out_plane, 1)),
                [&](int64_t b, int64_t e) {
                  for (int64_t t = b; t < e; ++t) {
                    std::fill(y + t * out_plane, y + (t + 1) * out_plane, bias ? bias->data()[t % m] : 0.f);
                  }
                });
  }
  if (cg == 1 && mg <= 4) {
    DirectConv(x.data(), w.data(), y, batch, m, mg, g);
  } else {
    bool pointwise = true;
    for (int d = 0; d < 3; ++d) pointwise &= g.kernel[d] == 1 && g.stride[d] == 1 && g.pad_begin[d] == 0;
    std::vector<cpu::GemmProblem> problems;
    problems.reserve(batch * group);
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t gi = 0; gi < group; ++gi) {
        const float* xg = x.data() + (n * c + gi * cg) * in_plane;
        cpu::GemmProblem p;
        p.m = mg;
        p.n = out_plane;
        p.k = kg;
        p.a = {w.data() + gi * mg * kg, kg, 1};
        if (pointwise) {
          p.b = {xg, in_plane, 1};
        } else {
          p.b_rows = Im2Col{xg, g};
        }
        p.c = y + (n * m + gi * mg) * out_plane;
        p.ldc = out_plane;
        p.beta = 1.f;
        problems.push_back(std::move(p));
      }
    }
    cpu::Gemm(problems);
  }
  sink.Commit();
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(const bool channels_last, ChannelsLast(node));
  if (!channels_last) return EvalNchw(node, in, out[0]);
  // X NHWC -> NCHW and W [OC, KH, KW, C/g] -> [OC, C/g, KH, KW] (the same
  // permutation), compute, and back.
  return EvalThroughNchw(in, 2, out[0], [&](absl::Span<const Tensor* const> nchw, Tensor& y) {
    return EvalNchw(node, nchw, y);
  });
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(conv) {
  registry.Register(
      {.name = "Conv", .min_inputs = 2, .max_inputs = 3, .infer = ops::Infer, .eval = ops::Eval});
}
