// GridSample (4-D): Y[n, c, h, w] samples X[n, c] at the location Grid[n, h, w]
// (graph/ops/grid_sample.h gives the algorithm).
#include "graph/ops/grid_sample.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/float_access.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {

absl::StatusOr<GridSampleOptions> GetGridSampleOptions(const Node& node) {
  GridSampleOptions o;
  KILN_ASSIGN_OR_RETURN(std::string mode, node.GetString("mode", "bilinear"));
  KILN_ASSIGN_OR_RETURN(std::string padding, node.GetString("padding_mode", "zeros"));
  KILN_ASSIGN_OR_RETURN(int64_t align, node.GetInt("align_corners", 0));
  if (mode == "bilinear" || mode == "linear") {
    o.mode = GridMode::kLinear;
  } else if (mode == "nearest") {
    o.mode = GridMode::kNearest;
  } else if (mode == "bicubic" || mode == "cubic") {
    o.mode = GridMode::kCubic;
  } else {
    return node.Error(absl::StrCat("unknown mode '", mode, "' (bilinear, nearest or bicubic)"));
  }
  if (padding == "zeros") {
    o.padding = GridPadding::kZeros;
  } else if (padding == "border") {
    o.padding = GridPadding::kBorder;
  } else if (padding == "reflection") {
    o.padding = GridPadding::kReflection;
  } else {
    return node.Error(absl::StrCat("unknown padding_mode '", padding, "' (zeros, border or reflection)"));
  }
  o.align_corners = align != 0;
  return o;
}

namespace {

float Reflect(float x, float lo, float hi) {
  const float range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const float d = lo - x;
    const int n = static_cast<int>(d / range);
    const float r = d - static_cast<float>(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const float d = x - hi;
    const int n = static_cast<int>(d / range);
    const float r = d - static_cast<float>(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

struct Plane {
  const float* p;
  int64_t h, w;
  GridPadding padding;
  float lo_x, hi_x, lo_y, hi_y;  // the location bounds reflection uses

  float At(int64_t y, int64_t x) const {
    if (padding == GridPadding::kZeros) {
      return x < 0 || x >= w || y < 0 || y >= h ? 0.f : p[y * w + x];
    }
    if (padding == GridPadding::kReflection) {
      x = static_cast<int64_t>(Reflect(static_cast<float>(x), lo_x, hi_x));
      y = static_cast<int64_t>(Reflect(static_cast<float>(y), lo_y, hi_y));
    }
    x = std::min<int64_t>(std::max<int64_t>(x, 0), w - 1);
    y = std::min<int64_t>(std::max<int64_t>(y, 0), h - 1);
    return p[y * w + x];
  }
};

void Cubic(float t, float c[4]) {
  const float a = -0.75f;
  const float x1 = t + 1, x2 = t, x3 = 1 - t, x4 = 2 - t;
  c[0] = ((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a;
  c[1] = ((a + 2) * x2 - (a + 3)) * x2 * x2 + 1;
  c[2] = ((a + 2) * x3 - (a + 3)) * x3 * x3 + 1;
  c[3] = ((a * x4 - 5 * a) * x4 + 8 * a) * x4 - 4 * a;
}

float Sample(const Plane& pl, const GridSampleOptions& o, float gx, float gy) {
  float x = o.align_corners ? (gx + 1) / 2 * static_cast<float>(pl.w - 1) : ((gx + 1) * static_cast<float>(pl.w) - 1) / 2;
  float y = o.align_corners ? (gy + 1) / 2 * static_cast<float>(pl.h - 1) : ((gy + 1) * static_cast<float>(pl.h) - 1) / 2;
  if (o.mode == GridMode::kNearest) {
    x = std::nearbyint(x);
    y = std::nearbyint(y);
  }
  if (o.mode != GridMode::kCubic) {
    if (o.padding == GridPadding::kBorder) {
      x = std::min(std::max(x, 0.f), static_cast<float>(pl.w - 1));
      y = std::min(std::max(y, 0.f), static_cast<float>(pl.h - 1));
    } else if (o.padding == GridPadding::kReflection) {
      x = Reflect(x, pl.lo_x, pl.hi_x);
      y = Reflect(y, pl.lo_y, pl.hi_y);
    }
  }
  if (o.mode == GridMode::kNearest) return pl.At(static_cast<int64_t>(y), static_cast<int64_t>(x));
  const float fx = std::floor(x), fy = std::floor(y);
  const int64_t x1 = static_cast<int64_t>(fx), y1 = static_cast<int64_t>(fy);
  if (o.mode == GridMode::kLinear) {
    const float dx = x - fx, dy = y - fy;
    return (1 - dy) * ((1 - dx) * pl.At(y1, x1) + dx * pl.At(y1, x1 + 1)) +
           dy * ((1 - dx) * pl.At(y1 + 1, x1) + dx * pl.At(y1 + 1, x1 + 1));
  }
  float cx[4], cy[4];
  Cubic(x - fx, cx);
  Cubic(y - fy, cy);
  float acc = 0;
  for (int i = 0; i < 4; ++i) {
    float row = 0;
    for (int j = 0; j < 4; ++j) row += cx[j] * pl.At(y1 - 1 + i, x1 - 1 + j);
    acc += cy[i] * row;
  }
  return acc;
}

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(GetGridSampleOptions(node).status());
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  KILN_RETURN_IF_ERROR(RequireFloat(node, 1));
  const Shape& x = node.input(0)->shape();
  const Shape& g = node.input(1)->shape();
  if (x.size() != 4 || g.size() != 4 || g[0] != x[0] || g[3] != 2) {
    return node.Error(absl::StrCat("X must be [N, C, H, W] and Grid [N, H_out, W_out, 2] (4-D sampling), got ",
                                   ShapeToString(x), " and ", ShapeToString(g)));
  }
  node.output(0)->SetType(node.input(0)->dtype(), {x[0], x[1], g[1], g[2]});
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(GridSampleOptions o, GetGridSampleOptions(node));
  const Shape& xs = in[0]->shape();
  const Shape& gs = in[1]->shape();
  const FloatView x(*in[0]), grid(*in[1]);
  FloatSink sink(out[0]);
  const float lo_x = o.align_corners ? 0.f : -0.5f, lo_y = lo_x;
  const float hi_x = o.align_corners ? xs[3] - 1.f : xs[3] - 0.5f, hi_y = o.align_corners ? xs[2] - 1.f : xs[2] - 0.5f;
  const int64_t pixels = gs[1] * gs[2];
  for (int64_t n = 0; n < xs[0]; ++n) {
    for (int64_t c = 0; c < xs[1]; ++c) {
      const Plane pl{x.data() + (n * xs[1] + c) * xs[2] * xs[3], xs[2], xs[3], o.padding, lo_x, hi_x, lo_y, hi_y};
      for (int64_t p = 0; p < pixels; ++p) {
        const float* g = grid.data() + (n * pixels + p) * 2;
        sink.data()[(n * xs[1] + c) * pixels + p] = Sample(pl, o, g[0], g[1]);
      }
    }
  }
  sink.Commit();
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(grid_sample) {
  registry.Register({.name = "GridSample", .min_inputs = 2, .max_inputs = 2, .infer = ops::Infer, .eval = ops::Eval});
}
