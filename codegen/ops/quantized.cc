// The quantized ops on the GPU (graph/ops/quantized.h for their math): Quantize- and
// DequantizeLinear one thread per element; MatMulInteger, QLinearMatMul,
// ConvInteger and QLinearConv one thread per output element with int64 sums
// (direct kernels for every form; int8 tensor-core GEMMs would be the fast path).
// Requantizing rounds half to even in double, as the reference.
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/kernel_util.h"
#include "graph/ops/quantized.h"

namespace kiln::codegen::ops {
namespace {

using kiln::ops::IntConvPlan;
using kiln::ops::IntMatMulPlan;

struct Kernel {
  std::string params;
  std::vector<int> args;
};

// out, then the present inputs among `inputs`, named in<i>.
Kernel Params(const Node& node, const std::vector<int>& inputs) {
  Kernel k{Param(node.output(0)->dtype(), false, "out"), {0}};
  for (int i : inputs) {
    if (!node.has_input(i)) continue;
    absl::StrAppend(&k.params, ", ", Param(node.input(i)->dtype(), true, absl::StrCat("in", i)));
    k.args.push_back(InputArg(node, i));
  }
  return k;
}

KernelLaunch Launch(const Node& node, const Kernel& k, int64_t n, const std::string& prefix, const std::string& body) {
  KernelLaunch l;
  l.args = k.args;
  l.source = absl::StrCat(prefix, "// ", node.op_type(), " ", node.output(0)->TypeString(),
                          "\nextern \"C\" __global__ void KILN_KERNEL(", k.params, ") {\n", GridStrideLoop(n, "w"), body,
                          "}\n}\n");
  SetGrid1D(l, n);
  return l;
}

// Statements storing `v` (a double) requantized with zero point `zp` into out[w].
std::string RequantizeStore(DType to, const std::string& v, const std::string& zp) {
  return absl::StrCat("{\ndouble v_ = ", v, ";\nif (v_ != v_) v_ = 0.0;\ndouble q_ = rint(v_) + (double)(", zp, ");\nq_ = q_ < ", kiln::ops::QuantMin(to),
                      ".0 ? ", kiln::ops::QuantMin(to), ".0 : (q_ > ", kiln::ops::QuantMax(to), ".0 ? ",
                      kiln::ops::QuantMax(to), ".0 : q_);\nout[w] = (", StorageTypeName(to), ")q_;\n}\n");
}

absl::StatusOr<std::vector<KernelLaunch>> QuantizeOrDequantize(const Node& node, bool quantize) {
  absl::StatusOr<kiln::ops::PerAxis> a = kiln::ops::QuantizationAxis(node, 1);
  if (!a.ok()) return a.status();
  const Kernel k = Params(node, {0, 1, 2});
  const std::string c = a->per_axis ? absl::StrCat("((kiln_index)w / ", a->inner, ") % ", a->dim) : "0";
  const std::string zp = node.has_input(2) ? absl::StrCat("(kiln_i64)in2[c]") : "(kiln_i64)0";
  const std::string s = LoadAs(node.input(1)->dtype(), Domain::kFloat, "in1", "c");
  std::string body = absl::StrCat("const kiln_index c = ", c, ";\n");
  if (quantize) {
    absl::StrAppend(&body, RequantizeStore(node.output(0)->dtype(),
                                           absl::StrCat("(double)(", LoadAs(node.input(0)->dtype(), Domain::kFloat,
                                                                            "in0", "w"),
                                                        " / ", s, ")"),
                                           zp));
  } else {
    absl::StrAppend(&body, StoreFrom(node.output(0)->dtype(), Domain::kFloat, "out", "w",
                                     absl::StrCat("(float)((kiln_i64)in0[w] - ", zp, ") * ", s)),
                    "\n");
  }
  return std::vector<KernelLaunch>{Launch(node, k, node.output(0)->numel(), "", body)};
}

std::string Table(const std::string& name, const std::vector<int64_t>& v) {
  std::string s = absl::StrCat("__device__ const kiln_index ", name, "[] = {");
  for (size_t i = 0; i < v.size(); ++i) absl::StrAppend(&s, i ? "," : "", v[i]);
  return s + "};\n";
}

// MatMulInteger (a, b, zps 0 1 2 3) or QLinearMatMul (a 0, b 3, zps 2 5).
absl::StatusOr<std::vector<KernelLaunch>> IntMatMulKernel(const Node& node, bool qlinear) {
  const int a = 0, b = qlinear ? 3 : 1, za = qlinear ? 2 : 2, zb = qlinear ? 5 : 3;
  absl::StatusOr<IntMatMulPlan> p = kiln::ops::PlanIntMatMul(node, a, b, za, zb);
  if (!p.ok()) return p.status();
  const Kernel k = Params(node, qlinear ? std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7} : std::vector<int>{0, 1, 2, 3});
  auto zp = [&](int i, bool per, const std::string& at) {
    return node.has_input(i) ? absl::StrCat("(kiln_i64)in", i, "[", per ? at : "0", "]") : std::string("(kiln_i64)0");
  };
  std::string body = absl::StrCat(
      "const kiln_index j = w % ", p->n, ", i = (w / ", p->n, ") % ", p->m, ", t = w / ", p->m * p->n,
      ";\nconst kiln_index ab = kABatch[t] * ", p->m * p->k, ", bb = kBBatch[t] * ", p->k * p->n,
      ";\nconst kiln_i64 za = ", zp(za, p->a_zp_per_row, "i"), ", zb = ", zp(zb, p->b_zp_per_col, "j"),
      ";\nkiln_i64 acc = 0;\nfor (kiln_index q = 0; q < ", p->k, "; ++q) acc += ((kiln_i64)in", a, "[ab + i * ", p->k,
      " + q] - za) * ((kiln_i64)in", b, "[bb + q * ", p->n, " + j] - zb);\n");
  if (qlinear) {
    absl::StrAppend(&body, RequantizeStore(node.output(0)->dtype(),
                                           absl::StrCat("(double)acc * ((double)", LoadAs(node.input(1)->dtype(), Domain::kFloat, "in1", "0"),
                                                        " * (double)", LoadAs(node.input(4)->dtype(), Domain::kFloat, "in4", "0"),
                                                        " / (double)", LoadAs(node.input(6)->dtype(), Domain::kFloat, "in6", "0"), ")"),
                                           "(kiln_i64)in7[0]"));
  } else {
    absl::StrAppend(&body, "out[w] = (kiln_i32)acc;\n");
  }
  return std::vector<KernelLaunch>{
      Launch(node, k, node.output(0)->numel(), Table("kABatch", p->a_batch) + Table("kBBatch", p->b_batch), body)};
}

// ConvInteger (x 0, w 1, zps 2 3) or QLinearConv (x 0, w 3, zps 2 5, bias 8).
absl::StatusOr<std::vector<KernelLaunch>> IntConvKernel(const Node& node, bool qlinear) {
  const int x = 0, wi = qlinear ? 3 : 1, zx = 2, zw = qlinear ? 5 : 3;
  absl::StatusOr<IntConvPlan> p = kiln::ops::PlanIntConv(node, x, wi);
  if (!p.ok()) return p.status();
  const Shape& xs = node.input(x)->shape();
  const Shape& ws = node.input(wi)->shape();
  const int sd = static_cast<int>(xs.size()) - 2;
  const int64_t m = ws[0], cg = ws[1], mg = m / p->group;
  int64_t in_plane = 1, taps = 1;
  for (int i = 0; i < sd; ++i) {
    in_plane *= xs[i + 2];
    taps *= ws[i + 2];
  }
  const Kernel k = Params(node, qlinear ? std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8} : std::vector<int>{0, 1, 2, 3});
  const bool w_zp_per_channel = node.has_input(zw) && node.input(zw)->numel() > 1;
  std::string body = "kiln_index r_ = w;\n";
  for (int i = sd - 1; i >= 0; --i) {
    absl::StrAppend(&body, "const kiln_index o", i, " = r_ % ", p->out[i + 2], ";\nr_ /= ", p->out[i + 2], ";\n");
  }
  absl::StrAppend(
      &body, "const kiln_index oc = r_ % ", m, ", n = r_ / ", m, ";\nconst kiln_i64 zx = ",
      node.has_input(zx) ? absl::StrCat("(kiln_i64)in", zx, "[0]") : "(kiln_i64)0", ", zw = ",
      node.has_input(zw) ? absl::StrCat("(kiln_i64)in", zw, "[", w_zp_per_channel ? "oc" : "0", "]") : "(kiln_i64)0",
      ";\nkiln_i64 acc = 0;\nfor (kiln_index ci = 0; ci < ", cg, "; ++ci) {\nconst kiln_index xb = (n * ", xs[1],
      " + (oc / ", mg, ") * ", cg, " + ci) * ", in_plane, ", wb = (oc * ", cg, " + ci) * ", taps,
      ";\nfor (kiln_index tap = 0; tap < ", taps, "; ++tap) {\nkiln_index t_ = tap, xi = 0;\nbool inside = true;\n");
  int64_t stride = 1;
  for (int i = sd - 1; i >= 0; --i) {
    absl::StrAppend(&body, "{\nconst kiln_index kk = t_ % ", ws[i + 2], ";\nt_ /= ", ws[i + 2],
                    ";\nconst kiln_index ii = o", i, " * ", p->strides[i], " - ", p->pads_begin[i], " + kk * ",
                    p->dilations[i], ";\ninside = inside && ii >= 0 && ii < ", xs[i + 2], ";\nxi += ii * ", stride,
                    ";\n}\n");
    stride *= xs[i + 2];
  }
  absl::StrAppend(&body, "if (inside) acc += ((kiln_i64)in", x, "[xb + xi] - zx) * ((kiln_i64)in", wi,
                  "[wb + tap] - zw);\n}\n}\n");
  if (qlinear) {
    const bool w_scale_per_channel = node.input(4)->numel() > 1;
    absl::StrAppend(&body, node.has_input(8) ? "acc += (kiln_i64)in8[oc];\n" : "",
                    RequantizeStore(node.output(0)->dtype(),
                                    absl::StrCat("(double)acc * (double)", LoadAs(node.input(1)->dtype(), Domain::kFloat, "in1", "0"),
                                                 " * (double)", LoadAs(node.input(4)->dtype(), Domain::kFloat, "in4", w_scale_per_channel ? "oc" : "0"),
                                                 " / (double)", LoadAs(node.input(6)->dtype(), Domain::kFloat, "in6", "0")),
                                    "(kiln_i64)in7[0]"));
  } else {
    absl::StrAppend(&body, "out[w] = (kiln_i32)acc;\n");
  }
  return std::vector<KernelLaunch>{Launch(node, k, node.output(0)->numel(), "", body)};
}

}  // namespace

bool IsQuantizedOp(absl::string_view op) {
  return op == "QuantizeLinear" || op == "DequantizeLinear" || op == "MatMulInteger" || op == "QLinearMatMul" ||
         op == "ConvInteger" || op == "QLinearConv";
}

absl::StatusOr<std::vector<KernelLaunch>> GenerateQuantized(const Node& node) {
  const std::string& op = node.op_type();
  if (op == "QuantizeLinear" || op == "DequantizeLinear") return QuantizeOrDequantize(node, op == "QuantizeLinear");
  if (op == "MatMulInteger" || op == "QLinearMatMul") return IntMatMulKernel(node, op == "QLinearMatMul");
  if (op == "ConvInteger" || op == "QLinearConv") return IntConvKernel(node, op == "QLinearConv");
  return NoKernel(node, "");
}

}  // namespace kiln::codegen::ops
