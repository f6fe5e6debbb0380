// Resize: nearest / N-linear / cubic interpolation (opset 19 form) with constant roi,
// scales or sizes inputs, every coordinate_transformation_mode, nearest_mode, axes and
// keep_aspect_ratio_policy. antialias is not supported.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/axes.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/infer_common.h"
#include "graph/ops/resize.h"

namespace kiln::ops {
namespace {

// The float values of an optional constant input; nullopt when absent or empty.
absl::StatusOr<std::optional<std::vector<float>>> ConstantFloats(const Node& node, int input, const char* what) {
  if (!node.has_input(input)) return std::optional<std::vector<float>>();
  const Tensor* t = node.input(input)->constant_or_null();
  if (t == nullptr) {
    if (node.input(input)->has_type() && node.input(input)->numel() == 0) {
      return std::optional<std::vector<float>>();
    }
    return absl::FailedPreconditionError(absl::StrCat(node.Describe(), ": input '", what, "' ('",
                                                      node.input(input)->name(),
                                                      "') must be a compile-time constant: kiln needs static shapes"));
  }
  if (t->numel() == 0) return std::optional<std::vector<float>>();
  return std::optional<std::vector<float>>(t->ToFloat());
}

struct Plan {
  Shape out;
  std::vector<double> scale;     // per axis: output / input
  std::vector<double> resized;   // per axis: input * scale (unrounded output length)
  std::vector<float> roi_start;  // per axis (tf_crop_and_resize)
  std::vector<float> roi_end;
  std::string mode, coord, nearest;
  float cubic_a = -0.75f;
  bool exclude_outside = false;
  float extrapolation = 0.f;
};

absl::StatusOr<Plan> MakePlan(const Node& node) {
  const Shape& in = node.input(0)->shape();
  const int64_t rank = static_cast<int64_t>(in.size());
  Plan p;
  KILN_ASSIGN_OR_RETURN(int64_t antialias, node.GetInt("antialias", 0));
  KILN_ASSIGN_OR_RETURN(p.mode, node.GetString("mode", "nearest"));
  KILN_ASSIGN_OR_RETURN(p.coord, node.GetString("coordinate_transformation_mode", "half_pixel"));
  KILN_ASSIGN_OR_RETURN(p.nearest, node.GetString("nearest_mode", "round_prefer_floor"));
  KILN_ASSIGN_OR_RETURN(p.cubic_a, node.GetFloat("cubic_coeff_a", -0.75f));
  KILN_ASSIGN_OR_RETURN(int64_t exclude, node.GetInt("exclude_outside", 0));
  p.exclude_outside = exclude != 0;
  KILN_ASSIGN_OR_RETURN(p.extrapolation, node.GetFloat("extrapolation_value", 0.f));
  KILN_ASSIGN_OR_RETURN(std::string policy, node.GetString("keep_aspect_ratio_policy", "stretch"));
  if (p.mode != "nearest" && p.mode != "linear" && p.mode != "cubic") {
    return node.Error(absl::StrCat("unknown mode '", p.mode, "' (expected nearest, linear or cubic)"));
  }
  if (p.coord != "half_pixel" && p.coord != "half_pixel_symmetric" && p.coord != "pytorch_half_pixel" &&
      p.coord != "align_corners" && p.coord != "asymmetric" && p.coord != "tf_crop_and_resize") {
    return node.Error(absl::StrCat("unknown coordinate_transformation_mode '", p.coord, "'"));
  }
  if (p.nearest != "round_prefer_floor" && p.nearest != "round_prefer_ceil" && p.nearest != "floor" &&
      p.nearest != "ceil") {
    return node.Error(absl::StrCat("unknown nearest_mode '", p.nearest, "'"));
  }
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller") {
    return node.Error(absl::StrCat("unknown keep_aspect_ratio_policy '", policy, "'"));
  }
  if (antialias != 0 && p.mode != "nearest") return node.Unsupported("antialias=1 is not supported");

  // Axes the scales/sizes/roi refer to.
  std::vector<int64_t> axes;
  if (node.has_attr("axes")) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> raw, node.GetInts("axes"));
    std::vector<bool> seen(rank, false);
    for (int64_t a : raw) {
      KILN_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, a, rank));
      if (seen[axis]) return node.Error(absl::StrCat("axis ", a, " appears more than once in axes"));
      seen[axis] = true;
      axes.push_back(axis);
    }
  } else {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  const size_t na = axes.size();

  KILN_ASSIGN_OR_RETURN(std::optional<std::vector<float>> scales, ConstantFloats(node, 2, "scales"));
  std::optional<std::vector<int64_t>> sizes;
  if (node.has_input(3) && !(node.input(3)->has_type() && node.input(3)->numel() == 0)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> s, ConstantInts(node, 3, "sizes"));
    if (!s.empty()) sizes = s;
  }
  if (scales.has_value() == sizes.has_value()) {
    return node.Error("exactly one of the inputs 'scales' and 'sizes' must be given");
  }
  p.out = in;
  p.scale.assign(rank, 1.0);
  p.resized.assign(in.begin(), in.end());
  if (scales) {
    if (scales->size() != na) {
      return node.Error(absl::StrCat("scales has ", scales->size(), " values, expected ", na));
    }
    for (size_t i = 0; i < na; ++i) {
      const float s = (*scales)[i];
      if (!(s > 0.f)) return node.Error(absl::StrCat("scales must be positive, got ", s));
      p.scale[axes[i]] = s;
      p.resized[axes[i]] = static_cast<double>(in[axes[i]]) * s;
      p.out[axes[i]] = static_cast<int64_t>(std::floor(p.resized[axes[i]]));
    }
  } else {
    if (sizes->size() != na) {
      return node.Error(absl::StrCat("sizes has ", sizes->size(), " values, expected ", na));
    }
    for (size_t i = 0; i < na; ++i) {
      if ((*sizes)[i] < 0) return node.Error(absl::StrCat("sizes must be >= 0, got ", ShapeToString(*sizes)));
      if (in[axes[i]] == 0) return node.Error("cannot resize an axis of size 0");
    }
    if (policy == "stretch") {
      for (size_t i = 0; i < na; ++i) {
        p.out[axes[i]] = (*sizes)[i];
        p.resized[axes[i]] = static_cast<double>((*sizes)[i]);
        p.scale[axes[i]] = static_cast<double>((*sizes)[i]) / static_cast<double>(in[axes[i]]);
      }
    } else {
      double s = policy == "not_larger" ? INFINITY : 0.0;
      for (size_t i = 0; i < na; ++i) {
        const double r = static_cast<double>((*sizes)[i]) / static_cast<double>(in[axes[i]]);
        s = policy == "not_larger" ? std::min(s, r) : std::max(s, r);
      }
      for (size_t i = 0; i < na; ++i) {
        p.scale[axes[i]] = s;
        p.resized[axes[i]] = s * static_cast<double>(in[axes[i]]);
        p.out[axes[i]] = static_cast<int64_t>(std::round(p.resized[axes[i]]));
      }
    }
  }
  p.roi_start.assign(rank, 0.f);
  p.roi_end.assign(rank, 1.f);
  if (p.coord == "tf_crop_and_resize") {
    KILN_ASSIGN_OR_RETURN(std::optional<std::vector<float>> roi, ConstantFloats(node, 1, "roi"));
    if (!roi || roi->size() != 2 * na) {
      return node.Error(absl::StrCat("tf_crop_and_resize needs roi with ", 2 * na, " values, got ",
                                     roi ? roi->size() : 0));
    }
    for (size_t i = 0; i < na; ++i) {
      p.roi_start[axes[i]] = (*roi)[i];
      p.roi_end[axes[i]] = (*roi)[i + na];
    }
  }
  return p;
}

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(RequireNumeric(node, 0));
  KILN_ASSIGN_OR_RETURN(Plan p, MakePlan(node));
  node.output(0)->SetType(node.input(0)->dtype(), p.out);
  return absl::OkStatus();
}

using Taps = ResizeTaps;

double SourceCoord(const Plan& p, int64_t axis, int64_t x, int64_t in_len, int64_t out_len) {
  const double s = p.scale[axis];
  const double xr = static_cast<double>(x);
  if (p.coord == "half_pixel") return (xr + 0.5) / s - 0.5;
  if (p.coord == "half_pixel_symmetric") {
    const double adjustment = static_cast<double>(out_len) / (s * static_cast<double>(in_len));
    const double center = static_cast<double>(in_len) / 2.0;
    const double offset = center * (1.0 - adjustment);
    return offset + (xr + 0.5) / s - 0.5;
  }
  // As in the ONNX reference, the unrounded resized length in * scale is used here.
  const double resized = p.resized[axis];
  if (p.coord == "pytorch_half_pixel") return resized > 1 ? (xr + 0.5) / s - 0.5 : 0.0;
  if (p.coord == "align_corners") {
    return resized == 1 ? 0.0 : xr * static_cast<double>(in_len - 1) / (resized - 1);
  }
  if (p.coord == "asymmetric") return xr / s;
  // tf_crop_and_resize
  const double a = p.roi_start[axis], b = p.roi_end[axis];
  if (out_len > 1) return a * (in_len - 1) + xr * (b - a) * (in_len - 1) / static_cast<double>(out_len - 1);
  return 0.5 * (a + b) * (in_len - 1);
}

Taps AxisTaps(const Plan& p, int64_t axis, int64_t x, int64_t in_len, int64_t out_len) {
  Taps t;
  const double c = SourceCoord(p, axis, x, in_len, out_len);
  if (p.coord == "tf_crop_and_resize" && (c < 0 || c > static_cast<double>(in_len - 1))) return t;
  auto clamp = [in_len](int64_t i) { return std::min<int64_t>(std::max<int64_t>(i, 0), in_len - 1); };
  if (p.mode == "nearest") {
    int64_t i;
    if (p.nearest == "floor") {
      i = static_cast<int64_t>(std::floor(c));
    } else if (p.nearest == "ceil") {
      i = static_cast<int64_t>(std::ceil(c));
    } else {
      const double f = std::floor(c);
      if (c - f == 0.5) {
        i = static_cast<int64_t>(p.nearest == "round_prefer_ceil" ? f + 1 : f);
      } else {
        i = static_cast<int64_t>(std::round(c));
      }
    }
    t.idx.push_back(clamp(i));
    t.w.push_back(1.0);
  } else if (p.mode == "linear") {
    const double cc = std::min(std::max(c, 0.0), static_cast<double>(in_len - 1));
    const int64_t i0 = static_cast<int64_t>(std::floor(cc));
    const int64_t i1 = std::min<int64_t>(i0 + 1, in_len - 1);
    const double r = cc - static_cast<double>(i0);
    t.idx = {i0, i1};
    t.w = {1.0 - r, r};
  } else {  // cubic
    const double f = std::floor(c);
    const double r = c - f;
    const double a = p.cubic_a;
    const double coeffs[4] = {
        ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
        ((a + 2) * r - (a + 3)) * r * r + 1,
        ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1,
        ((a * (2 - r) - 5 * a) * (2 - r) + 8 * a) * (2 - r) - 4 * a,
    };
    double total = 0;
    for (int k = 0; k < 4; ++k) {
      const int64_t i = static_cast<int64_t>(f) - 1 + k;
      if (p.exclude_outside && (i < 0 || i >= in_len)) continue;
      t.idx.push_back(clamp(i));
      t.w.push_back(coeffs[k]);
      total += coeffs[k];
    }
    if (p.exclude_outside && total != 0) {
      for (double& w : t.w) w /= total;
    }
  }
  return t;
}

}  // namespace

absl::StatusOr<ResizePlan> PlanResize(const Node& node) {
  KILN_ASSIGN_OR_RETURN(Plan p, MakePlan(node));
  const Shape& is = node.input(0)->shape();
  const int rank = static_cast<int>(is.size());
  ResizePlan r;
  r.out = p.out;
  r.extrapolation = p.extrapolation;
  r.taps.resize(rank);
  for (int d = 0; d < rank; ++d) {
    r.taps[d].resize(p.out[d]);
    for (int64_t o = 0; o < p.out[d]; ++o) {
      if (p.out[d] == is[d] && p.scale[d] == 1.0 && p.coord != "tf_crop_and_resize") {
        r.taps[d][o].idx = {o};
        r.taps[d][o].w = {1.0};
      } else {
        r.taps[d][o] = AxisTaps(p, d, o, is[d], p.out[d]);
      }
    }
  }
  return r;
}

namespace {

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(ResizePlan plan, PlanResize(node));
  const Tensor& x = *in[0];
  const Shape& is = x.shape();
  const int rank = x.rank();
  const ResizePlan& p = plan;
  const std::vector<std::vector<Taps>>& taps = plan.taps;
  const std::vector<int64_t> in_strides = Strides(is);
  std::vector<double> xv;
  if (IsFloating(x.dtype())) {
    const std::vector<float> f = x.ToFloat();
    xv.assign(f.begin(), f.end());
  } else {
    const std::vector<int64_t> v = x.ToInt64();
    xv.assign(v.begin(), v.end());
  }
  const int64_t n = NumElements(p.out);
  std::vector<double> y(n);
  ParallelFor(n, 1024, [&](int64_t b, int64_t e) {
    std::vector<int64_t> coord(rank), k(rank);
    std::vector<const Taps*> tp(rank);
    for (int64_t t = b; t < e; ++t) {
      int64_t rem = t;
      bool extrapolate = false;
      for (int d = rank - 1; d >= 0; --d) {
        coord[d] = rem % p.out[d];
        rem /= p.out[d];
        tp[d] = &taps[d][coord[d]];
        if (tp[d]->idx.empty()) extrapolate = true;
      }
      if (extrapolate) {
        y[t] = p.extrapolation;
        continue;
      }
      // Odometer over the tap combinations.
      std::fill(k.begin(), k.end(), 0);
      double acc = 0;
      while (true) {
        double w = 1;
        int64_t off = 0;
        for (int d = 0; d < rank; ++d) {
          w *= tp[d]->w[k[d]];
          off += tp[d]->idx[k[d]] * in_strides[d];
        }
        acc += w * xv[off];
        int d = rank - 1;
        while (d >= 0 && ++k[d] == static_cast<int64_t>(tp[d]->idx.size())) k[d--] = 0;
        if (d < 0) break;
      }
      y[t] = acc;
    }
  });
  if (IsFloating(out[0].dtype())) {
    std::vector<float> yf(y.begin(), y.end());
    out[0] = Tensor::FromFloat(out[0].dtype(), out[0].shape(), yf);
  } else {
    std::vector<int64_t> yi(n);
    for (int64_t i = 0; i < n; ++i) yi[i] = static_cast<int64_t>(std::llround(y[i]));
    out[0] = Tensor::FromInt64(out[0].dtype(), out[0].shape(), yi);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(resize) {
  registry.Register({.name = "Resize", .min_inputs = 1, .max_inputs = 4, .infer = ops::Infer,
                     .eval = ops::Eval});
}
