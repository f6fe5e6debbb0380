// Conv as a direct kernel: one thread per output element sums over its group's input
// channels and every kernel tap that lands inside the input, fp32 sums. The fallback
// for the convolutions neither cuDNN's path (1-D and 2-D only) nor kiln's
// implicit-GEMM and depthwise kernels take: 3-D convolutions, empty tensors, tensors
// past 2^31 elements. NCHW layout (channels_last convs are 2-D, which cuDNN takes).
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/kernel_util.h"
#include "graph/ops/window.h"

namespace kiln::codegen::ops {

absl::StatusOr<std::vector<KernelLaunch>> GenerateDirectConv(const Node& node) {
  absl::StatusOr<int64_t> channels_last = node.GetInt("channels_last", 0);
  if (!channels_last.ok()) return channels_last.status();
  if (*channels_last != 0) return NoKernel(node, "channels_last direct convolution");
  absl::StatusOr<int64_t> group = node.GetInt("group", 1);
  if (!group.ok()) return group.status();
  const Shape& xs = node.input(0)->shape();
  const Shape& ws = node.input(1)->shape();
  const int sd = static_cast<int>(xs.size()) - 2;
  absl::StatusOr<kiln::ops::WindowGeometry> win = kiln::ops::ComputeWindow(
      node, Shape(xs.begin() + 2, xs.end()), std::vector<int64_t>(ws.begin() + 2, ws.end()), /*use_dilations=*/true,
      /*ceil_mode=*/false);
  if (!win.ok()) return win.status();
  const int64_t c = xs[1], m = ws[0], cg = ws[1], mg = m / *group;
  int64_t in_plane = 1, taps = 1;
  for (int i = 0; i < sd; ++i) {
    in_plane *= xs[i + 2];
    taps *= ws[i + 2];
  }
  const DType dt = node.input(0)->dtype();
  const bool bias = node.has_input(2);
  std::string body = "kiln_index r_ = w;\n";
  for (int i = sd - 1; i >= 0; --i) {
    absl::StrAppend(&body, "const kiln_index o", i, " = r_ % ", win->output[i], ";\nr_ /= ", win->output[i], ";\n");
  }
  absl::StrAppend(&body, "const kiln_index oc = r_ % ", m, ", n = r_ / ", m, ";\nfloat acc = ",
                  bias ? LoadAs(node.input(2)->dtype(), Domain::kFloat, "b", "oc") : std::string("0.f"),
                  ";\nfor (kiln_index ci = 0; ci < ", cg, "; ++ci) {\nconst kiln_index xb = (n * ", c, " + (oc / ", mg,
                  ") * ", cg, " + ci) * ", in_plane, ", wb = (oc * ", cg, " + ci) * ", taps,
                  ";\nfor (kiln_index tap = 0; tap < ", taps, "; ++tap) {\nkiln_index t_ = tap, xi = 0;\nbool inside = true;\n");
  int64_t in_stride = 1;
  for (int i = sd - 1; i >= 0; --i) {
    absl::StrAppend(&body, "{\nconst kiln_index k = t_ % ", ws[i + 2], ";\nt_ /= ", ws[i + 2],
                    ";\nconst kiln_index ii = o", i, " * ", win->strides[i], " - ", win->pads_begin[i], " + k * ",
                    win->dilations[i], ";\ninside = inside && ii >= 0 && ii < ", xs[i + 2], ";\nxi += ii * ", in_stride,
                    ";\n}\n");
    in_stride *= xs[i + 2];
  }
  absl::StrAppend(&body, "if (inside) acc += ", LoadAs(node.input(1)->dtype(), Domain::kFloat, "wt", "wb + tap"), " * ",
                  LoadAs(dt, Domain::kFloat, "x", "xb + xi"), ";\n}\n}\n",
                  StoreFrom(node.output(0)->dtype(), Domain::kFloat, "out0", "w", "acc"), "\n");
  const int64_t n = node.output(0)->numel();
  KernelLaunch l;
  l.args = {0, InputArg(node, 0), InputArg(node, 1)};
  std::string params = absl::StrCat(Param(node.output(0)->dtype(), false, "out0"), ", ", Param(dt, true, "x"), ", ",
                                    Param(node.input(1)->dtype(), true, "wt"));
  if (bias) {
    absl::StrAppend(&params, ", ", Param(node.input(2)->dtype(), true, "b"));
    l.args.push_back(InputArg(node, 2));
  }
  l.source = absl::StrCat("// Conv (direct) ", node.input(0)->TypeString(), " -> ", node.output(0)->TypeString(),
                          "\nextern \"C\" __global__ void KILN_KERNEL(", params, ") {\n", GridStrideLoop(n, "w"), body,
                          "}\n}\n");
  SetGrid1D(l, n);
  return std::vector<KernelLaunch>{std::move(l)};
}

}  // namespace kiln::codegen::ops
