// Kernels over lines along one axis, one thread per line (or, for
// InstanceNormalization, one block per image plane; for Det, one thread per matrix):
// CumSum, Hardmax, TopK, ReduceLogSumExp, InstanceNormalization and Det. Each follows its CPU reference's order of
// operations (CumSum accumulates floats in double; TopK breaks ties by the lower
// index and counts NaN as the largest value), so results agree to the storage dtype's
// rounding. Throughput is not the aim: none of these ops sits on a hot path of the
// models kiln is measured on.
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/kernel_util.h"
#include "graph/ops/axes.h"
#include "graph/ops/infer_common.h"
#include "graph/ops/reduce_eval.h"

namespace kiln::codegen::ops {
namespace {

using kiln::ops::AxisSplit;
using kiln::ops::ConstantInts;
using kiln::ops::SplitAtAxis;

// Kernel parameters "out0, out1, ..., in0, in1, ..." (each output and the listed
// inputs) and their args.
struct Params {
  std::string text;
  std::vector<int> args;
};
Params OutsAndIns(const Node& node, const std::vector<int>& inputs) {
  Params p;
  for (int o = 0; o < node.num_outputs(); ++o) {
    absl::StrAppend(&p.text, o ? ", " : "", Param(node.output(o)->dtype(), false, absl::StrCat("out", o)));
    p.args.push_back(o);
  }
  for (int i : inputs) {
    absl::StrAppend(&p.text, ", ", Param(node.input(i)->dtype(), true, absl::StrCat("in", i)));
    p.args.push_back(InputArg(node, i));
  }
  return p;
}

// One thread per line of `s`: `body` sees `base` (the line's first element) and the
// line's element `l` at `base + l * inner`.
KernelLaunch LineKernel(const Node& node, const AxisSplit& s, const std::vector<int>& inputs, const std::string& body,
                        const std::string& what = "") {
  const Params p = OutsAndIns(node, inputs);
  KernelLaunch l;
  l.args = p.args;
  const int64_t lines = s.outer * s.inner;
  l.source = absl::StrCat("// ", node.op_type(), what, " ", node.input(0)->TypeString(), ", lines of ", s.len,
                          "\nextern \"C\" __global__ void KILN_KERNEL(", p.text, ") {\n", GridStrideLoop(lines, "w"),
                          "const kiln_index base = ((kiln_index)w / ", s.inner, ") * ", s.len * s.inner,
                          " + (kiln_index)w % ", s.inner, ";\n", body, "}\n}\n");
  SetGrid1D(l, lines);
  return l;
}

std::string At(const AxisSplit& s, const std::string& l) { return absl::StrCat("base + (", l, ") * ", s.inner); }

// CumSum's walk along one line of `len` elements `inner` apart from `base` (C code).
std::string CumSumLine(const Node& node, const std::string& len, const std::string& inner, bool exclusive,
                       bool reverse) {
  const DType dt = node.input(0)->dtype();
  const bool fl = IsFloating(dt);
  const Domain d = DomainOf(dt);
  const std::string acc_t = fl ? "double" : "kiln_i64";
  const std::string at = absl::StrCat("base + (", reverse ? absl::StrCat(len, " - 1 - k") : "k", ") * ", inner);
  const std::string load = LoadAs(dt, d, "in0", "at");
  const std::string store = StoreFrom(dt, d, "out0", "at", fl ? "(float)acc" : "acc");
  const std::string step =
      fl ? absl::StrCat("acc += (double)", load, ";\n")
         : absl::StrCat("acc = (kiln_i64)((unsigned long long)acc + (unsigned long long)", load, ");\n");
  return absl::StrCat(acc_t, " acc = 0;\nfor (kiln_index k = 0; k < ", len, "; ++k) {\nconst kiln_index at = ", at,
                      ";\n", exclusive ? store + "\n" + step : step + store + "\n", "}\n");
}

// CumSum of a dynamic graph (issue 34; transformers' packed-sequence mask sums over
// seq): LineKernel's walk with the line count, length and stride read from kiln_dims.
KernelLaunch DynamicCumSum(const Node& node, int64_t axis, bool exclusive, bool reverse) {
  const std::vector<DimExpr> dims = ValueDims(*node.input(0));
  const DimExpr outer = DimsProduct(std::vector<DimExpr>(dims.begin(), dims.begin() + axis));
  const DimExpr inner = DimsProduct(std::vector<DimExpr>(dims.begin() + axis + 1, dims.end()));
  const DimExpr lines = DimsProduct({outer, inner});
  const Params p = OutsAndIns(node, {0});
  KernelLaunch l;
  l.args = p.args;
  l.source = absl::StrCat(
      "// CumSum ", node.input(0)->TypeString(), " on axis ", axis, " (sizes at run time)\n",
      "extern \"C\" __global__ void KILN_KERNEL(", p.text, ", const kiln_dims kiln_dims_) {\n",
      "const kiln_index kLines = ", DimCode(lines), ", kLen = ", DimCode(dims[axis]), ", kInner = ", DimCode(inner),
      ";\nfor (kiln_index w = (kiln_index)blockIdx.x * blockDim.x + threadIdx.x; w < kLines; w += "
      "(kiln_index)gridDim.x * blockDim.x) {\nconst kiln_index base = (w / kInner) * kLen * kInner + w % kInner;\n",
      CumSumLine(node, "kLen", "kInner", exclusive, reverse), "}\n}\n");
  SetGrid1D(l, node.input(0)->numel());
  SetDynamicGrid1D(l, lines, kBlock);
  return l;
}

absl::StatusOr<std::vector<KernelLaunch>> CumSum(const Node& node) {
  absl::StatusOr<std::vector<int64_t>> axis = ConstantInts(node, 1, "axis");
  if (!axis.ok()) return axis.status();
  auto exclusive = node.GetInt("exclusive", 0);
  auto reverse = node.GetInt("reverse", 0);
  if (!exclusive.ok()) return exclusive.status();
  if (!reverse.ok()) return reverse.status();
  const Shape& shape = node.input(0)->shape();
  const int64_t a = (*axis)[0] < 0 ? (*axis)[0] + static_cast<int64_t>(shape.size()) : (*axis)[0];
  if (a < 0 || a >= static_cast<int64_t>(shape.size())) return NoKernel(node, "axis out of range");
  if (HasDynamicValues(node)) return std::vector<KernelLaunch>{DynamicCumSum(node, a, *exclusive, *reverse)};
  const AxisSplit s = SplitAtAxis(shape, a);
  const std::string body = CumSumLine(node, absl::StrCat(s.len), absl::StrCat(s.inner), *exclusive, *reverse);
  return std::vector<KernelLaunch>{LineKernel(node, s, {0}, body)};
}

absl::StatusOr<std::vector<KernelLaunch>> Hardmax(const Node& node) {
  auto axis = node.GetInt("axis", -1);
  if (!axis.ok()) return axis.status();
  const Shape& shape = node.input(0)->shape();
  if (shape.empty()) return NoKernel(node, "scalar input");
  const int64_t a = *axis < 0 ? *axis + static_cast<int64_t>(shape.size()) : *axis;
  const AxisSplit s = SplitAtAxis(shape, a);
  const DType dt = node.input(0)->dtype();
  const std::string x = LoadAs(dt, Domain::kFloat, "in0", At(s, "l"));
  const std::string body = absl::StrCat(
      "kiln_index best = 0;\nfloat bv = ", LoadAs(dt, Domain::kFloat, "in0", "base"), ";\nfor (kiln_index l = 1; l < ",
      s.len, "; ++l) {\nconst float v = ", x, ";\nif (v > bv) { bv = v; best = l; }\n}\nfor (kiln_index l = 0; l < ",
      s.len, "; ++l) ", StoreFrom(dt, Domain::kFloat, "out0", At(s, "l"), "l == best ? 1.f : 0.f"), "\n");
  return std::vector<KernelLaunch>{LineKernel(node, s, {0}, body)};
}

// TopK: for j = 0..k-1, the element that comes first (value, then index; NaN the
// largest) among those after the (j-1)th pick.
absl::StatusOr<std::vector<KernelLaunch>> TopK(const Node& node) {
  absl::StatusOr<std::vector<int64_t>> kv = ConstantInts(node, 1, "K");
  if (!kv.ok()) return kv.status();
  auto axis = node.GetInt("axis", -1);
  auto largest = node.GetInt("largest", 1);
  if (!axis.ok()) return axis.status();
  if (!largest.ok()) return largest.status();
  const Shape& shape = node.input(0)->shape();
  const int64_t a = *axis < 0 ? *axis + static_cast<int64_t>(shape.size()) : *axis;
  const AxisSplit s = SplitAtAxis(shape, a);
  const int64_t k = (*kv)[0];
  const DType dt = node.input(0)->dtype();
  const bool fl = IsFloating(dt);
  const Domain d = DomainOf(dt);
  const std::string t = DomainType(d);
  // before(a, ia, b, ib): a comes strictly before b.
  const std::string nan = fl ? "const bool na = av != av, nb = bv != bv;\nif (na || nb) return na && nb ? ia < ib : "
                                   + std::string(*largest ? "na" : "nb") + ";\n"
                             : "";
  const std::string before = absl::StrCat("auto before = [](", t, " av, kiln_index ia, ", t, " bv, kiln_index ib) -> bool {\n",
                                          nan, "if (av != bv) return ", *largest ? "av > bv" : "av < bv",
                                          ";\nreturn ia < ib;\n};\n");
  // Outputs: values [.., k, ..] at obase + j * inner.
  const std::string body = absl::StrCat(
      before, "const kiln_index obase = ((kiln_index)w / ", s.inner, ") * ", k * s.inner, " + (kiln_index)w % ",
      s.inner, ";\n", t, " pv = 0;\nkiln_index pi = -1;\nfor (kiln_index j = 0; j < ", k,
      "; ++j) {\nkiln_index bi = -1;\n", t, " bv = 0;\nfor (kiln_index l = 0; l < ", s.len, "; ++l) {\nconst ", t,
      " v = ", LoadAs(dt, d, "in0", At(s, "l")),
      ";\nif (pi >= 0 && !before(pv, pi, v, l)) continue;\nif (bi < 0 || before(v, l, bv, bi)) { bv = v; bi = l; }\n}\n",
      StoreFrom(dt, d, "out0", absl::StrCat("obase + j * ", s.inner), "bv"), "\nout1[obase + j * ", s.inner,
      "] = bi;\npv = bv;\npi = bi;\n}\n");
  return std::vector<KernelLaunch>{LineKernel(node, s, {0}, body)};
}

// ReduceLogSumExp: one thread per output element, two passes over its reduced
// elements (the max, then the sum of exp(x - max)), as the reference.
absl::StatusOr<std::vector<KernelLaunch>> ReduceLogSumExp(const Node& node) {
  const Shape& shape = node.input(0)->shape();
  absl::StatusOr<std::vector<bool>> mask = kiln::ops::ReducedAxes(node, static_cast<int64_t>(shape.size()));
  if (!mask.ok()) return mask.status();
  const std::vector<int64_t> strides = DenseStrides(shape);
  Shape kept, reduced;
  std::vector<int64_t> kept_strides, reduced_strides;
  for (size_t d = 0; d < shape.size(); ++d) {
    ((*mask)[d] ? reduced : kept).push_back(shape[d]);
    ((*mask)[d] ? reduced_strides : kept_strides).push_back(strides[d]);
  }
  auto offsets = [](const Shape& s, const std::vector<int64_t>& st, const std::string& from, const std::string& to) {
    std::string code = absl::StrCat("kiln_index ", to, " = 0;\n{\nkiln_index q_ = ", from, ";\n");
    for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
      absl::StrAppend(&code, to, " += (q_ % ", s[d], ") * ", st[d], ";\nq_ /= ", s[d], ";\n");
    }
    return code + "}\n";
  };
  const int64_t outputs = NumElements(kept), count = NumElements(reduced);
  const DType dt = node.input(0)->dtype(), ot = node.output(0)->dtype();
  const std::string x = LoadAs(dt, Domain::kFloat, "in0", "b + r");
  const Params p = OutsAndIns(node, {0});
  KernelLaunch l;
  l.args = p.args;
  l.source = absl::StrCat(
      "// ReduceLogSumExp ", node.input(0)->TypeString(), " -> ", node.output(0)->TypeString(),
      "\nextern \"C\" __global__ void KILN_KERNEL(", p.text, ") {\n", GridStrideLoop(outputs, "w"),
      offsets(kept, kept_strides, "w", "b"), "float m = -", FloatLit(INFINITY), ";\nfor (kiln_index t = 0; t < ", count,
      "; ++t) {\n", offsets(reduced, reduced_strides, "t", "r"), "m = fmaxf(m, ", x,
      ");\n}\nif (!(m > -3.0e38f && m < 3.0e38f)) m = 0.f;\nfloat sum = 0.f;\nfor (kiln_index t = 0; t < ", count,
      "; ++t) {\n", offsets(reduced, reduced_strides, "t", "r"), "sum += expf(", x, " - m);\n}\n",
      StoreFrom(ot, Domain::kFloat, "out0", "w", "m + logf(sum)"), "\n}\n}\n");
  SetGrid1D(l, outputs);
  return std::vector<KernelLaunch>{std::move(l)};
}

// InstanceNormalization: one block of kBlock threads per (image, channel) plane:
// the mean, then the variance about it (block sums in shared memory), then y.
absl::StatusOr<std::vector<KernelLaunch>> InstanceNorm(const Node& node) {
  auto eps = node.GetFloat("epsilon", 1e-5f);
  if (!eps.ok()) return eps.status();
  const Shape& shape = node.input(0)->shape();
  const int64_t c = shape[1], planes = shape[0] * shape[1];
  const int64_t size = planes == 0 ? 0 : node.input(0)->numel() / planes;
  const DType dt = node.input(0)->dtype();
  const Params p = OutsAndIns(node, {0, 1, 2});
  const std::string x = LoadAs(dt, Domain::kFloat, "in0", "base + i");
  auto block_sum = [](const std::string& v) {
    return absl::StrCat("red[threadIdx.x] = ", v, ";\n__syncthreads();\nfor (int o = ", kBlock / 2,
                        "; o > 0; o >>= 1) {\nif ((int)threadIdx.x < o) red[threadIdx.x] += red[threadIdx.x + o];\n"
                        "__syncthreads();\n}\n");
  };
  KernelLaunch l;
  l.args = p.args;
  l.source = absl::StrCat(
      "// InstanceNormalization ", node.input(0)->TypeString(), ": ", planes, " planes of ", size,
      "\nextern \"C\" __global__ void KILN_KERNEL(", p.text, ") {\n__shared__ float red[", kBlock,
      "];\nfor (kiln_index t = blockIdx.x; t < ", planes, "; t += gridDim.x) {\nconst kiln_index base = t * ", size,
      ";\nfloat s = 0.f;\nfor (kiln_index i = threadIdx.x; i < ", size, "; i += ", kBlock, ") s += ", x, ";\n",
      block_sum("s"), "const float mean = red[0] / (float)", size, ";\n__syncthreads();\nfloat q = 0.f;\n",
      "for (kiln_index i = threadIdx.x; i < ", size, "; i += ", kBlock, ") { const float d = ", x,
      " - mean; q += d * d; }\n", block_sum("q"), "const float inv = 1.f / sqrtf(red[0] / (float)", size, " + ",
      FloatLit(*eps), ");\n__syncthreads();\nconst float a = ",
      LoadAs(node.input(1)->dtype(), Domain::kFloat, "in1", absl::StrCat("t % ", c)), " * inv;\nconst float b = ",
      LoadAs(node.input(2)->dtype(), Domain::kFloat, "in2", absl::StrCat("t % ", c)),
      " - mean * a;\nfor (kiln_index i = threadIdx.x; i < ", size, "; i += ", kBlock, ") ",
      StoreFrom(node.output(0)->dtype(), Domain::kFloat, "out0", "base + i", absl::StrCat(x, " * a + b")), "\n}\n}\n");
  l.grid = {static_cast<uint32_t>(std::max<int64_t>(1, std::min<int64_t>(planes, kMaxGrid))), 1, 1};
  l.block = {kBlock, 1, 1};
  return std::vector<KernelLaunch>{std::move(l)};
}

// Det: one thread per matrix, LU with partial pivoting in double in local memory,
// as the reference.
absl::StatusOr<std::vector<KernelLaunch>> Det(const Node& node) {
  const Shape& x = node.input(0)->shape();
  const int64_t m = x.back();
  const int64_t mats = node.output(0)->numel();
  const DType dt = node.input(0)->dtype();
  const Params p = OutsAndIns(node, {0});
  KernelLaunch l;
  l.args = p.args;
  l.source = absl::StrCat(
      "// Det ", node.input(0)->TypeString(), "\nextern \"C\" __global__ void KILN_KERNEL(", p.text, ") {\n",
      GridStrideLoop(mats, "w"), "double a[", std::max<int64_t>(1, m * m), "];\nfor (int i = 0; i < ", m * m,
      "; ++i) a[i] = (double)", LoadAs(dt, Domain::kFloat, "in0", absl::StrCat("(kiln_index)w * ", m * m, " + i")),
      ";\ndouble det = 1.0;\nfor (int c = 0; c < ", m, "; ++c) {\nint p = c;\nfor (int r = c + 1; r < ", m,
      "; ++r) if (fabs(a[r * ", m, " + c]) > fabs(a[p * ", m, " + c])) p = r;\nif (a[p * ", m,
      " + c] == 0.0) { det = 0.0; break; }\nif (p != c) {\nfor (int k = 0; k < ", m, "; ++k) { const double t = a[p * ",
      m, " + k]; a[p * ", m, " + k] = a[c * ", m, " + k]; a[c * ", m, " + k] = t; }\ndet = -det;\n}\ndet *= a[c * ", m,
      " + c];\nfor (int r = c + 1; r < ", m, "; ++r) {\nconst double f = a[r * ", m, " + c] / a[c * ", m,
      " + c];\nfor (int k = c; k < ", m, "; ++k) a[r * ", m, " + k] -= f * a[c * ", m, " + k];\n}\n}\n",
      StoreFrom(node.output(0)->dtype(), Domain::kFloat, "out0", "w", "(float)det"), "\n}\n}\n");
  SetGrid1D(l, mats);
  return std::vector<KernelLaunch>{std::move(l)};
}

}  // namespace

bool IsLineOp(absl::string_view op) {
  return op == "CumSum" || op == "Hardmax" || op == "TopK" || op == "ReduceLogSumExp" ||
         op == "InstanceNormalization" || op == "Det";
}

absl::StatusOr<std::vector<KernelLaunch>> GenerateLine(const Node& node) {
  const std::string& op = node.op_type();
  if (op == "CumSum") return CumSum(node);
  if (op == "Hardmax") return Hardmax(node);
  if (op == "TopK") return TopK(node);
  if (op == "ReduceLogSumExp") return ReduceLogSumExp(node);
  if (op == "InstanceNormalization") return InstanceNorm(node);
  if (op == "Det") return Det(node);
  return NoKernel(node, "");
}

}  // namespace kiln::codegen::ops
