// ConvTranspose on the GPU: one thread per output element gathers from every input
// position and tap that writes it (i = (o + pad - k * dilation) / stride where that
// divides exactly), in the reference's order (input channel, then tap), fp32 sums.
// A direct kernel for correctness on every form (groups, 1-3 spatial dims, dilation,
// output padding); decoder-heavy models would want an implicit-GEMM form.
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/kernel_util.h"
#include "graph/ops/conv_transpose.h"

namespace kiln::codegen::ops {

absl::StatusOr<std::vector<KernelLaunch>> GenerateConvTranspose(const Node& node) {
  absl::StatusOr<kiln::ops::ConvTransposeGeometry> geo = kiln::ops::ComputeConvTransposeGeometry(node);
  if (!geo.ok()) return geo.status();
  absl::StatusOr<int64_t> group = node.GetInt("group", 1);
  if (!group.ok()) return group.status();
  const Shape& xs = node.input(0)->shape();
  const Shape& ws = node.input(1)->shape();
  const int sd = static_cast<int>(xs.size()) - 2;
  const int64_t c = xs[1], mg = ws[1], m = mg * *group, cg = c / *group;
  int64_t in_plane = 1, taps = 1;
  for (int i = 0; i < sd; ++i) {
    in_plane *= xs[i + 2];
    taps *= geo->kernel[i];
  }
  const DType dt = node.input(0)->dtype();
  const bool bias = node.has_input(2);
  std::string body = absl::StrCat("kiln_index r_ = w;\n");
  for (int i = sd - 1; i >= 0; --i) {
    absl::StrAppend(&body, "const kiln_index o", i, " = r_ % ", geo->output[i], ";\nr_ /= ", geo->output[i], ";\n");
  }
  absl::StrAppend(&body, "const kiln_index oc = r_ % ", m, ", n = r_ / ", m, ";\nconst kiln_index gi = oc / ", mg,
                  ", ocl = oc % ", mg, ";\nfloat acc = ",
                  bias ? LoadAs(node.input(2)->dtype(), Domain::kFloat, "b", "oc") : std::string("0.f"),
                  ";\nfor (kiln_index ci = 0; ci < ", cg, "; ++ci) {\nconst kiln_index ic = gi * ", cg,
                  " + ci;\nconst kiln_index xb = (n * ", c, " + ic) * ", in_plane, ", wb = (ic * ", mg, " + ocl) * ",
                  taps, ";\nfor (kiln_index tap = 0; tap < ", taps, "; ++tap) {\nkiln_index t_ = tap, xi = 0;\n");
  // Taps decompose innermost first; the input offset accumulates per dim.
  int64_t in_stride = 1;
  std::string dims;
  for (int i = sd - 1; i >= 0; --i) {
    absl::StrAppend(&dims, "{\nconst kiln_index k = t_ % ", geo->kernel[i], ";\nt_ /= ", geo->kernel[i],
                    ";\nconst kiln_index num = o", i, " + ", geo->pads_begin[i], " - k * ", geo->dilations[i],
                    ";\nif (num < 0 || num % ", geo->strides[i], " != 0) continue;\nconst kiln_index ii = num / ",
                    geo->strides[i], ";\nif (ii >= ", xs[i + 2], ") continue;\nxi += ii * ", in_stride, ";\n}\n");
    in_stride *= xs[i + 2];
  }
  // `continue` inside the per-dim blocks skips the tap: wrap them in a one-pass loop.
  absl::StrAppend(&body, "bool hit = false;\ndo {\n", dims, "hit = true;\n} while (false);\nif (!hit) continue;\n",
                  "acc += ", LoadAs(node.input(1)->dtype(), Domain::kFloat, "wt", "wb + tap"), " * ",
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
  l.source = absl::StrCat("// ConvTranspose ", node.input(0)->TypeString(), " -> ", node.output(0)->TypeString(),
                          "\nextern \"C\" __global__ void KILN_KERNEL(", params, ") {\n", GridStrideLoop(n, "w"), body,
                          "}\n}\n");
  SetGrid1D(l, n);
  return std::vector<KernelLaunch>{std::move(l)};
}

}  // namespace kiln::codegen::ops
