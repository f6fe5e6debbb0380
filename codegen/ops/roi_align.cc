// RoiAlign on the GPU: one thread per output bin runs the reference's sampling loop
// (graph/ops/roi_align.h) in fp32.
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/kernel_util.h"
#include "graph/ops/roi_align.h"

namespace kiln::codegen::ops {

absl::StatusOr<std::vector<KernelLaunch>> GenerateRoiAlign(const Node& node) {
  absl::StatusOr<kiln::ops::RoiAlignOptions> o = kiln::ops::GetRoiAlignOptions(node);
  if (!o.ok()) return o.status();
  const Shape& xs = node.input(0)->shape();
  const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3];
  const DType xt = node.input(0)->dtype(), rt = node.input(1)->dtype();
  auto roi = [&](int k) { return LoadAs(rt, Domain::kFloat, "rois", absl::StrCat("r * 4 + ", k)); };
  auto px = [&](const std::string& at) { return LoadAs(xt, Domain::kFloat, "x", absl::StrCat("plane + ", at)); };
  const std::string scale = FloatLit(o->spatial_scale), offset = FloatLit(o->half_pixel ? 0.5f : 0.f);
  const std::string grid = o->sampling_ratio > 0 ? absl::StrCat("(kiln_index)", o->sampling_ratio) : "";
  // kiln::ops::RoiAlignGrid: ceil(extent / bins) capped; 0 for NaN.
  auto adaptive = [](const std::string& extent, int64_t bins) {
    const std::string g = absl::StrCat("ceilf(", extent, " / (float)", bins, ")"), cap = absl::StrCat(kiln::ops::kMaxRoiAlignGrid);
    return absl::StrCat("(", g, " > 0.f ? (", g, " < ", cap, ".f ? (kiln_index)", g, " : (kiln_index)", cap, ") : (kiln_index)0)");
  };
  std::string body = absl::StrCat(
      "const kiln_index pw = w_ % ", o->out_w, ", ph = (w_ / ", o->out_w, ") % ", o->out_h, ", ch = (w_ / ",
      o->out_w * o->out_h, ") % ", c, ", r = w_ / ", o->out_w * o->out_h * c,
      ";\nkiln_index bi = (kiln_index)batch[r];\nbi = bi < 0 ? 0 : (bi >= ", n, " ? ", n - 1,
      " : bi);\nconst kiln_index plane = (bi * ", c, " + ch) * ", h * w, ";\nconst float x0 = ", roi(0), " * ", scale,
      " - ", offset, ", y0 = ", roi(1), " * ", scale, " - ", offset, ";\nfloat rw = ", roi(2), " * ", scale, " - ", offset,
      " - x0, rh = ", roi(3), " * ", scale, " - ", offset, " - y0;\n",
      o->half_pixel ? "" : "rw = fmaxf(rw, 1.f);\nrh = fmaxf(rh, 1.f);\n", "const float bh = rh / (float)", o->out_h,
      ", bw = rw / (float)", o->out_w, ";\nconst kiln_index gh = ", grid.empty() ? adaptive("rh", o->out_h) : grid, ", gw = ",
      grid.empty() ? adaptive("rw", o->out_w) : grid, ";\nconst float count = (float)(gh * gw > 1 ? gh * gw : 1);\nfloat acc = 0.f;\nbool first = true;\n",
      "for (kiln_index iy = 0; iy < gh; ++iy) {\nfor (kiln_index ix = 0; ix < gw; ++ix) {\n",
      "float yy = y0 + ph * bh + (iy + 0.5f) * bh / (float)gh;\nfloat xx = x0 + pw * bw + (ix + 0.5f) * bw / (float)gw;\n",
      "float v = 0.f;\nif (yy >= -1.f && yy <= ", FloatLit(h), " && xx >= -1.f && xx <= ", FloatLit(w), ") {\n",
      "yy = fmaxf(yy, 0.f);\nxx = fmaxf(xx, 0.f);\nkiln_index yl = (kiln_index)yy, xl = (kiln_index)xx, yh = yl + 1, xh = xl + 1;\n",
      "if (yl >= ", h - 1, ") { yh = yl = ", h - 1, "; yy = (float)yl; }\nif (xl >= ", w - 1, ") { xh = xl = ", w - 1,
      "; xx = (float)xl; }\nconst float ly = yy - yl, lx = xx - xl, hy = 1.f - ly, hx = 1.f - lx;\n",
      "const float v1 = hy * hx * ", px(absl::StrCat("yl * ", w, " + xl")), ", v2 = hy * lx * ",
      px(absl::StrCat("yl * ", w, " + xh")), ";\nconst float v3 = ly * hx * ", px(absl::StrCat("yh * ", w, " + xl")),
      ", v4 = ly * lx * ", px(absl::StrCat("yh * ", w, " + xh")), ";\nv = ",
      o->max ? "fmaxf(fmaxf(fmaxf(v1, v2), v3), v4)" : "v1 + v2 + v3 + v4", ";\n}\nacc = ",
      o->max ? "first ? v : fmaxf(acc, v)" : "acc + v", ";\nfirst = false;\n}\n}\n(void)first;\n",
      StoreFrom(node.output(0)->dtype(), Domain::kFloat, "out", "w_", o->max ? "acc" : "acc / count"), "\n");
  const int64_t total = node.output(0)->numel();
  KernelLaunch l;
  l.args = {0, InputArg(node, 0), InputArg(node, 1), InputArg(node, 2)};
  l.source = absl::StrCat("// RoiAlign ", node.output(0)->TypeString(), "\nextern \"C\" __global__ void KILN_KERNEL(",
                          Param(node.output(0)->dtype(), false, "out"), ", ", Param(xt, true, "x"), ", ",
                          Param(rt, true, "rois"), ", ", Param(node.input(2)->dtype(), true, "batch"), ") {\n",
                          GridStrideLoop(total, "w_"), body, "}\n}\n");
  SetGrid1D(l, total);
  return std::vector<KernelLaunch>{std::move(l)};
}

}  // namespace kiln::codegen::ops
