// Sliding-window geometry of Conv and the pooling ops.
#include "graph/ops/window.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kiln::ops {

absl::StatusOr<WindowGeometry> ComputeWindow(const Node& node, const Shape& in, std::vector<int64_t> kernel,
                                             bool use_dilations, bool ceil_mode) {
  const size_t n = in.size();
  WindowGeometry g;
  if (kernel.size() != n) {
    return node.Error(absl::StrCat("kernel_shape ", ShapeToString(kernel), " has ", kernel.size(),
                                   " entries but the input has ", n, " spatial dims ", ShapeToString(in)));
  }
  g.kernel = std::move(kernel);
  KILN_ASSIGN_OR_RETURN(g.strides, node.GetInts("strides", std::vector<int64_t>(n, 1)));
  if (use_dilations) {
    KILN_ASSIGN_OR_RETURN(g.dilations, node.GetInts("dilations", std::vector<int64_t>(n, 1)));
  } else {
    g.dilations.assign(n, 1);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, node.GetInts("pads", std::vector<int64_t>(2 * n, 0)));
  KILN_ASSIGN_OR_RETURN(std::string auto_pad, node.GetString("auto_pad", "NOTSET"));
  if (g.strides.size() != n) {
    return node.Error(absl::StrCat("strides ", ShapeToString(g.strides), " must have ", n,
                                   " entries (one per spatial dim)"));
  }
  if (g.dilations.size() != n) {
    return node.Error(absl::StrCat("dilations ", ShapeToString(g.dilations), " must have ", n,
                                   " entries (one per spatial dim)"));
  }
  if (pads.size() != 2 * n) {
    return node.Error(absl::StrCat("pads ", ShapeToString(pads), " must have ", 2 * n,
                                   " entries (begin and end per spatial dim)"));
  }
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    return node.Error(
        absl::StrCat("auto_pad '", auto_pad, "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID"));
  }
  g.pads_begin.resize(n);
  g.pads_end.resize(n);
  g.output.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t k = g.kernel[i], s = g.strides[i], d = g.dilations[i];
    if (k < 1) return node.Error(absl::StrCat("kernel_shape ", ShapeToString(g.kernel), " must be positive"));
    if (s < 1) return node.Error(absl::StrCat("strides ", ShapeToString(g.strides), " must be positive"));
    if (d < 1) return node.Error(absl::StrCat("dilations ", ShapeToString(g.dilations), " must be positive"));
    if (pads[i] < 0 || pads[i + n] < 0) {
      return node.Error(absl::StrCat("pads ", ShapeToString(pads), " must not be negative"));
    }
    const int64_t window = (k - 1) * d + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (in[i] + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + window - in[i]);
      g.pads_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.pads_end[i] = total - g.pads_begin[i];
      g.output[i] = out;
      continue;
    }
    if (auto_pad == "NOTSET") {
      g.pads_begin[i] = pads[i];
      g.pads_end[i] = pads[i + n];
    }
    const int64_t padded = in[i] + g.pads_begin[i] + g.pads_end[i];
    if (padded < window) {
      return node.Error(absl::StrCat("the window along spatial dim ", i, " (kernel ", k, ", dilation ", d,
                                     ", so ", window, " wide) is larger than the padded input (", in[i],
                                     " + pads ", g.pads_begin[i], "+", g.pads_end[i], ")"));
    }
    int64_t out = ceil_mode ? (padded - window + s - 1) / s + 1 : (padded - window) / s + 1;
    if (ceil_mode && (out - 1) * s >= in[i] + g.pads_begin[i]) --out;
    g.output[i] = out;
  }
  return g;
}

Window3 LiftWindow(const Shape& in_spatial, const WindowGeometry& w) {
  Window3 g;
  const size_t lead = 3 - in_spatial.size();
  for (size_t d = 0; d < 3; ++d) {
    const bool real = d >= lead;
    const size_t i = d - lead;
    g.in[d] = real ? in_spatial[i] : 1;
    g.out[d] = real ? w.output[i] : 1;
    g.kernel[d] = real ? w.kernel[i] : 1;
    g.stride[d] = real ? w.strides[i] : 1;
    g.dilation[d] = real ? w.dilations[i] : 1;
    g.pad_begin[d] = real ? w.pads_begin[i] : 0;
    g.pad_end[d] = real ? w.pads_end[i] : 0;
  }
  return g;
}

std::vector<TapRange> TapRanges(const Window3& g, int d) {
  // Taps t in [0, kernel) with lower <= start + t * dilation < upper.
  auto taps = [&](int64_t start, int64_t lower, int64_t upper, int64_t* lo, int64_t* hi) {
    const int64_t dil = g.dilation[d];
    auto ceil_div = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); };
    *lo = std::clamp<int64_t>(ceil_div(lower - start, dil), 0, g.kernel[d]);
    *hi = std::clamp<int64_t>(ceil_div(upper - start, dil), *lo, g.kernel[d]);
  };
  std::vector<TapRange> ranges(g.out[d]);
  for (int64_t o = 0; o < g.out[d]; ++o) {
    TapRange& r = ranges[o];
    r.start = o * g.stride[d] - g.pad_begin[d];
    taps(r.start, 0, g.in[d], &r.lo, &r.hi);
    taps(r.start, -g.pad_begin[d], g.in[d] + g.pad_end[d], &r.lo_pad, &r.hi_pad);
  }
  return ranges;
}

}  // namespace kiln::ops
