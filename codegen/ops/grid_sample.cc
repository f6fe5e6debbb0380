// GridSample on the GPU: one thread per output element runs the reference's
// algorithm (graph/ops/grid_sample.h) in fp32, mode, padding and align_corners baked
// in as constants.
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/kernel_util.h"
#include "graph/ops/grid_sample.h"

namespace kiln::codegen::ops {
namespace {

// Device helpers: reflection of a location, one tap read with the padding, the cubic
// weights. kPad: 0 zeros, 1 border, 2 reflection.
constexpr const char* kHelpers = R"(
static __device__ float kiln_gs_reflect(float x, float lo, float hi) {
  const float range = hi - lo;
  if (range <= 0.f) return lo;
  if (x < lo) {
    const float d = lo - x;
    const int n = (int)(d / range);
    const float r = d - (float)n * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const float d = x - hi;
    const int n = (int)(d / range);
    const float r = d - (float)n * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}
static __device__ void kiln_gs_cubic(float t, float* c) {
  const float a = -0.75f;
  const float x1 = t + 1.f, x2 = t, x3 = 1.f - t, x4 = 2.f - t;
  c[0] = ((a * x1 - 5.f * a) * x1 + 8.f * a) * x1 - 4.f * a;
  c[1] = ((a + 2.f) * x2 - (a + 3.f)) * x2 * x2 + 1.f;
  c[2] = ((a + 2.f) * x3 - (a + 3.f)) * x3 * x3 + 1.f;
  c[3] = ((a * x4 - 5.f * a) * x4 + 8.f * a) * x4 - 4.f * a;
}
)";

}  // namespace

absl::StatusOr<std::vector<KernelLaunch>> GenerateGridSample(const Node& node) {
  absl::StatusOr<kiln::ops::GridSampleOptions> o = kiln::ops::GetGridSampleOptions(node);
  if (!o.ok()) return o.status();
  const Shape& xs = node.input(0)->shape();
  const Shape& gs = node.input(1)->shape();
  const int64_t h = xs[2], w = xs[3], pixels = gs[1] * gs[2];
  const DType dt = node.input(0)->dtype(), gt = node.input(1)->dtype();
  const int pad = o->padding == kiln::ops::GridPadding::kZeros ? 0 : (o->padding == kiln::ops::GridPadding::kBorder ? 1 : 2);
  const std::string lo_x = FloatLit(o->align_corners ? 0.f : -0.5f);
  const std::string hi_x = FloatLit(o->align_corners ? w - 1.f : w - 0.5f), hi_y = FloatLit(o->align_corners ? h - 1.f : h - 0.5f);
  // The tap reader: `plane` is the first element of the (n, c) plane.
  std::string at = absl::StrCat("auto at = [&](kiln_index yy, kiln_index xx) -> float {\n");
  if (pad == 0) {
    absl::StrAppend(&at, "if (xx < 0 || xx >= ", w, " || yy < 0 || yy >= ", h, ") return 0.f;\n");
  } else {
    if (pad == 2) {
      absl::StrAppend(&at, "xx = (kiln_index)kiln_gs_reflect((float)xx, ", lo_x, ", ", hi_x,
                      ");\nyy = (kiln_index)kiln_gs_reflect((float)yy, ", lo_x, ", ", hi_y, ");\n");
    }
    absl::StrAppend(&at, "xx = xx < 0 ? 0 : (xx > ", w - 1, " ? ", w - 1, " : xx);\nyy = yy < 0 ? 0 : (yy > ", h - 1,
                    " ? ", h - 1, " : yy);\n");
  }
  absl::StrAppend(&at, "return ", LoadAs(dt, Domain::kFloat, "x", absl::StrCat("plane + yy * ", w, " + xx")), ";\n};\n");
  const bool align = o->align_corners;
  std::string body = absl::StrCat(
      "const kiln_index p = w % ", pixels, ", nc = w / ", pixels, ", n = nc / ", xs[1], ";\nconst kiln_index plane = nc * ",
      h * w, ";\nconst float gx = ", LoadAs(gt, Domain::kFloat, "grid", absl::StrCat("(n * ", pixels, " + p) * 2")),
      ", gy = ", LoadAs(gt, Domain::kFloat, "grid", absl::StrCat("(n * ", pixels, " + p) * 2 + 1")), ";\n", at,
      "float fx = ", align ? absl::StrCat("(gx + 1.f) / 2.f * ", FloatLit(w - 1.f)) : absl::StrCat("((gx + 1.f) * ", FloatLit(w), " - 1.f) / 2.f"),
      ";\nfloat fy = ", align ? absl::StrCat("(gy + 1.f) / 2.f * ", FloatLit(h - 1.f)) : absl::StrCat("((gy + 1.f) * ", FloatLit(h), " - 1.f) / 2.f"),
      ";\n");
  const auto mode = o->mode;
  if (mode == kiln::ops::GridMode::kNearest) absl::StrAppend(&body, "fx = rintf(fx);\nfy = rintf(fy);\n");
  if (mode != kiln::ops::GridMode::kCubic && pad == 1) {
    absl::StrAppend(&body, "fx = fminf(fmaxf(fx, 0.f), ", FloatLit(w - 1.f), ");\nfy = fminf(fmaxf(fy, 0.f), ",
                    FloatLit(h - 1.f), ");\n");
  }
  if (mode != kiln::ops::GridMode::kCubic && pad == 2) {
    absl::StrAppend(&body, "fx = kiln_gs_reflect(fx, ", lo_x, ", ", hi_x, ");\nfy = kiln_gs_reflect(fy, ", lo_x, ", ",
                    hi_y, ");\n");
  }
  std::string value;
  if (mode == kiln::ops::GridMode::kNearest) {
    value = "at((kiln_index)fy, (kiln_index)fx)";
  } else {
    absl::StrAppend(&body, "const float x0 = floorf(fx), y0 = floorf(fy);\nconst kiln_index x1 = (kiln_index)x0, y1 = (kiln_index)y0;\n");
    if (mode == kiln::ops::GridMode::kLinear) {
      absl::StrAppend(&body, "const float dx = fx - x0, dy = fy - y0;\n");
      value = "(1.f - dy) * ((1.f - dx) * at(y1, x1) + dx * at(y1, x1 + 1)) + dy * ((1.f - dx) * at(y1 + 1, x1) + dx * at(y1 + 1, x1 + 1))";
    } else {
      absl::StrAppend(&body, "float cx[4], cy[4];\nkiln_gs_cubic(fx - x0, cx);\nkiln_gs_cubic(fy - y0, cy);\nfloat acc = 0.f;\n",
                      "for (int i = 0; i < 4; ++i) {\nfloat row = 0.f;\nfor (int j = 0; j < 4; ++j) row += cx[j] * at(y1 - 1 + i, x1 - 1 + j);\n",
                      "acc += cy[i] * row;\n}\n");
      value = "acc";
    }
  }
  absl::StrAppend(&body, StoreFrom(node.output(0)->dtype(), Domain::kFloat, "out", "w", value), "\n");
  const int64_t n = node.output(0)->numel();
  KernelLaunch l;
  l.args = {0, InputArg(node, 0), InputArg(node, 1)};
  l.source = absl::StrCat(kHelpers, "// GridSample ", node.output(0)->TypeString(), "\nextern \"C\" __global__ void KILN_KERNEL(",
                          Param(node.output(0)->dtype(), false, "out"), ", ", Param(dt, true, "x"), ", ",
                          Param(gt, true, "grid"), ") {\n", GridStrideLoop(n, "w"), body, "}\n}\n");
  SetGrid1D(l, n);
  return std::vector<KernelLaunch>{std::move(l)};
}

}  // namespace kiln::codegen::ops
