// ConvTranspose: 1-D/2-D/3-D grouped transposed convolution (strides, dilations, pads,
// auto_pad, output_padding, output_shape, optional bias) as a scatter loop over
// input positions, parallel over images and output channels.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/conv_transpose.h"
#include "graph/ops/float_access.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

using Geometry = ConvTransposeGeometry;

absl::StatusOr<std::vector<int64_t>> PerDim(const Node& node, const char* name, size_t n, int64_t dflt,
                                            int64_t min_value) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, node.GetInts(name, std::vector<int64_t>(n, dflt)));
  if (v.size() != n) {
    return node.Error(absl::StrCat(name, " has ", v.size(), " values, expected ", n, " (one per spatial dim)"));
  }
  for (int64_t x : v) {
    if (x < min_value) return node.Error(absl::StrCat(name, " must be >= ", min_value, ", got ", ShapeToString(v)));
  }
  return v;
}

}  // namespace

absl::StatusOr<ConvTransposeGeometry> ComputeConvTransposeGeometry(const Node& node) {
  const Shape& x = node.input(0)->shape();
  const Shape& w = node.input(1)->shape();
  const size_t n = x.size() - 2;
  Geometry g;
  g.kernel.assign(w.begin() + 2, w.end());
  if (node.has_attr("kernel_shape")) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> attr, node.GetInts("kernel_shape"));
    if (attr != g.kernel) {
      return node.Error(absl::StrCat("kernel_shape ", ShapeToString(attr), " does not match the weights ",
                                     ShapeToString(w)));
    }
  }
  KILN_ASSIGN_OR_RETURN(g.strides, PerDim(node, "strides", n, 1, 1));
  KILN_ASSIGN_OR_RETURN(g.dilations, PerDim(node, "dilations", n, 1, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out_pad, PerDim(node, "output_padding", n, 0, 0));
  KILN_ASSIGN_OR_RETURN(std::string auto_pad, node.GetString("auto_pad", "NOTSET"));
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    return node.Error(absl::StrCat("unknown auto_pad '", auto_pad, "'"));
  }
  std::vector<int64_t> full(n);  // size without any padding
  for (size_t i = 0; i < n; ++i) {
    full[i] = g.strides[i] * (x[i + 2] - 1) + out_pad[i] + (g.kernel[i] - 1) * g.dilations[i] + 1;
  }
  std::optional<std::vector<int64_t>> target;
  if (node.has_attr("output_shape")) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> os, node.GetInts("output_shape"));
    if (os.size() == n + 2) os.erase(os.begin(), os.begin() + 2);
    if (os.size() != n) {
      return node.Error(absl::StrCat("output_shape ", ShapeToString(os), " must give ", n, " spatial dims"));
    }
    for (int64_t d : os) {
      if (d < 1) return node.Error(absl::StrCat("output_shape must be positive, got ", ShapeToString(os)));
    }
    target = os;
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    target = std::vector<int64_t>(n);
    for (size_t i = 0; i < n; ++i) (*target)[i] = x[i + 2] * g.strides[i];
  }
  g.pads_begin.assign(n, 0);
  g.output = full;
  if (target) {
    for (size_t i = 0; i < n; ++i) {
      // total may be negative (output_shape larger than the full result); halves round
      // toward -inf, so the extra zeros go to the end.
      const int64_t total = full[i] - (*target)[i];
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      g.pads_begin[i] = auto_pad == "SAME_UPPER" ? half : total - half;
      g.output[i] = (*target)[i];
    }
  } else if (auto_pad == "NOTSET") {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, PerDim(node, "pads", 2 * n, 0, 0));
    for (size_t i = 0; i < n; ++i) {
      g.pads_begin[i] = pads[i];
      g.output[i] = full[i] - pads[i] - pads[i + n];
      if (g.output[i] < 1) {
        return node.Error(absl::StrCat("pads ", ShapeToString(pads), " leave no output along spatial dim ", i,
                                       " (input ", ShapeToString(x), ")"));
      }
    }
  }
  return g;
}

namespace {

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
  if (w->rank() != x->rank()) {
    return node.Error(absl::StrCat("weights W ", w->TypeString(), " must have the rank of X ", x->TypeString()));
  }
  KILN_ASSIGN_OR_RETURN(int64_t group, node.GetInt("group", 1));
  if (group < 1) return node.Error(absl::StrCat("group must be positive, got ", group));
  const int64_t c = x->shape()[1];
  if (w->shape()[0] != c) {
    return node.Error(absl::StrCat("X has ", c, " channels but W ", ShapeToString(w->shape()),
                                   " expects ", w->shape()[0]));
  }
  if (c % group != 0) return node.Error(absl::StrCat("X has ", c, " channels, not divisible by group ", group));
  const int64_t m = w->shape()[1] * group;
  if (node.has_input(2) && node.input(2)->shape() != Shape{m}) {
    return node.Error(absl::StrCat("bias B must be [", m, "], got ", node.input(2)->TypeString()));
  }
  KILN_ASSIGN_OR_RETURN(Geometry g, ComputeConvTransposeGeometry(node));
  Shape out = {x->shape()[0], m};
  out.insert(out.end(), g.output.begin(), g.output.end());
  node.output(0)->SetType(x->dtype(), out);
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(Geometry geo, ComputeConvTransposeGeometry(node));
  KILN_ASSIGN_OR_RETURN(int64_t group, node.GetInt("group", 1));
  const Shape& xs = in[0]->shape();
  const Shape& ws = in[1]->shape();
  // Lift to 3 spatial dims with leading unit dims.
  const int lift = 3 - static_cast<int>(xs.size() - 2);
  int64_t id[3], od[3], k[3], s[3], d[3], p[3];
  for (int i = 0; i < 3; ++i) {
    const int j = i - lift;
    id[i] = j < 0 ? 1 : xs[j + 2];
    od[i] = j < 0 ? 1 : geo.output[j];
    k[i] = j < 0 ? 1 : geo.kernel[j];
    s[i] = j < 0 ? 1 : geo.strides[j];
    d[i] = j < 0 ? 1 : geo.dilations[j];
    p[i] = j < 0 ? 0 : geo.pads_begin[j];
  }
  const int64_t batch = xs[0], c = xs[1], mg = ws[1], m = mg * group, cg = c / group;
  const int64_t in_plane = id[0] * id[1] * id[2], out_plane = od[0] * od[1] * od[2];
  const int64_t taps = k[0] * k[1] * k[2];
  const FloatView x(*in[0]), w(*in[1]);
  const bool has_bias = in.size() > 2 && in[2] != nullptr;
  const std::optional<FloatView> bias = has_bias ? std::optional<FloatView>(*in[2]) : std::nullopt;
  FloatSink sink(out[0]);
  float* y = sink.data();
  ParallelFor(batch * m, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t n = t / m, oc = t % m, gi = oc / mg, ocl = oc % mg;
      float* yp = y + t * out_plane;
      std::fill(yp, yp + out_plane, bias ? bias->data()[oc] : 0.f);
      for (int64_t ci = 0; ci < cg; ++ci) {
        const int64_t ic = gi * cg + ci;
        const float* xp = x.data() + (n * c + ic) * in_plane;
        const float* wp = w.data() + (ic * mg + ocl) * taps;
        for (int64_t tap = 0; tap < taps; ++tap) {
          const int64_t k2 = tap % k[2], k1 = (tap / k[2]) % k[1], k0 = tap / (k[2] * k[1]);
          const float wv = wp[tap];
          for (int64_t i0 = 0; i0 < id[0]; ++i0) {
            const int64_t o0 = i0 * s[0] + k0 * d[0] - p[0];
            if (o0 < 0 || o0 >= od[0]) continue;
            for (int64_t i1 = 0; i1 < id[1]; ++i1) {
              const int64_t o1 = i1 * s[1] + k1 * d[1] - p[1];
              if (o1 < 0 || o1 >= od[1]) continue;
              const float* xrow = xp + (i0 * id[1] + i1) * id[2];
              float* yrow = yp + (o0 * od[1] + o1) * od[2];
              const int64_t off = k2 * d[2] - p[2];
              for (int64_t i2 = 0; i2 < id[2]; ++i2) {
                const int64_t o2 = i2 * s[2] + off;
                if (o2 >= 0 && o2 < od[2]) yrow[o2] += wv * xrow[i2];
              }
            }
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

KILN_OP_FILE(conv_transpose) {
  registry.Register({.name = "ConvTranspose", .min_inputs = 2, .max_inputs = 3, .infer = ops::Infer,
                     .eval = ops::Eval});
}
