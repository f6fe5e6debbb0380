// Reduction kernels: the Reduce* family over any axes set, global pools (row
// reductions over planes), Softmax/LogSoftmax, LayerNormalization and
// ArgMax/ArgMin. Instantiates codegen/templates/{reduce,softmax,layernorm}.cuh with a
// generated prefix of types, constants and load/store functions.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/kernel_util.h"
#include "codegen/templates.h"
#include "graph/ops/op_util.h"

namespace kiln::codegen::ops {
namespace {

// Block size for a per-row loop over `len` elements: a power of two in [32, 256].
uint32_t RowBlock(int64_t len) {
  uint32_t b = 32;
  while (b < 256 && b < len) b *= 2;
  return b;
}

std::string LoadFn(const std::string& name, DType dtype, Domain domain, const char* idx_t) {
  return absl::StrCat("static __device__ __forceinline__ ", DomainType(domain), " ", name, "(const ",
                      StorageTypeName(dtype), "* p, ", idx_t, " i) { return ", LoadAs(dtype, domain, "p", "i"),
                      "; }\n");
}

std::string StoreFn(const std::string& name, DType dtype, Domain domain, const char* idx_t, const std::string& finish) {
  return absl::StrCat("static __device__ __forceinline__ void ", name, "(", StorageTypeName(dtype), "* p, ", idx_t,
                      " i, ", DomainType(domain), " v) { ", StoreFrom(dtype, domain, "p", "i", finish), " }\n");
}

// Offset function over a (collapsed) space of dims with input strides.
std::string OffsetFn(const std::string& name, const Shape& shape, const std::vector<int64_t>& strides,
                     const char* idx_t) {
  StridedSpace s;
  s.shape = shape;
  s.strides = {strides};
  s.Collapse();
  return absl::StrCat("static __device__ __forceinline__ ", idx_t, " ", name, "(", idx_t, " i) {\n",
                      s.shape.empty() ? absl::StrCat(idx_t, " o0 = 0;\n") : OffsetCode(s, {0}, "i", idx_t, "o"),
                      "return o0;\n}\n");
}

enum class Kind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum };

absl::StatusOr<std::vector<KernelLaunch>> EmitReduce(const Node& node, Kind kind, const std::vector<bool>& mask) {
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  const Shape& shape = x->shape();
  const std::vector<int64_t> strides = DenseStrides(shape);
  Shape kept, red;
  std::vector<int64_t> kept_s, red_s;
  int64_t count = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (mask[d]) {
      red.push_back(shape[d]);
      red_s.push_back(strides[d]);
      count *= shape[d];
    } else {
      kept.push_back(shape[d]);
      kept_s.push_back(strides[d]);
    }
  }
  // Innermost non-unit input dim reduced: rows of contiguous-ish elements.
  bool inner_reduced = false;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] != 1) {
      inner_reduced = mask[d];
      break;
    }
  }
  const int64_t rows = NumElements(kept);
  const char* it = IndexType(std::max(x->numel(), rows));
  const bool fl = IsFloating(x->dtype());
  const Domain dom = fl ? Domain::kFloat : Domain::kInt;
  std::string identity, map = "x", combine, finish = "v";
  const bool block_per_row = inner_reduced && count > 1;
  switch (kind) {
    case Kind::kSum: case Kind::kMean: case Kind::kLogSum: case Kind::kL1: case Kind::kL2: case Kind::kSumSquare:
      identity = fl ? "0.f" : "0";
      combine = fl ? "a + b" : "(kiln_i64)((unsigned long long)a + (unsigned long long)b)";
      break;
    case Kind::kProd:
      identity = fl ? "1.f" : "1";
      combine = fl ? "a * b" : "(kiln_i64)((unsigned long long)a * (unsigned long long)b)";
      break;
    case Kind::kMax:
      identity = fl ? "-__int_as_float(0x7f800000)" : IntLit(INT64_MIN);
      combine = "(b > a || b != b) ? b : a";
      break;
    case Kind::kMin:
      identity = fl ? "__int_as_float(0x7f800000)" : IntLit(INT64_MAX);
      combine = "(b < a || b != b) ? b : a";
      break;
  }
  if (kind == Kind::kL1) map = fl ? "fabsf(x)" : "(x < 0 ? (kiln_i64)(0ULL - (unsigned long long)x) : x)";
  if (kind == Kind::kL2 || kind == Kind::kSumSquare) map = fl ? "x * x" : "(kiln_i64)((unsigned long long)x * (unsigned long long)x)";
  if (kind == Kind::kMean) {
    if (fl) {
      finish = count == 0 ? "__int_as_float(0x7fc00000)" : absl::StrCat("v * ", FloatLit(1.f / static_cast<float>(count)));
      if (node.op_type() == "GlobalAveragePool") finish = absl::StrCat("v / ", FloatLit(static_cast<float>(count)));
    } else {
      finish = count == 0 ? "(kiln_i64)0" : absl::StrCat("v / ", IntLit(count));
    }
  }
  if (kind == Kind::kL2) finish = fl ? "sqrtf(v)" : "(kiln_i64)sqrt((double)v)";
  if (kind == Kind::kLogSum) finish = fl ? "logf(v)" : "(kiln_i64)log((double)v)";
  const char* acc = DomainType(dom);
  std::string src = absl::StrCat(
      "// ", node.op_type(), " ", x->TypeString(), " -> ", y->TypeString(), "\n", "typedef ",
      StorageTypeName(x->dtype()), " kiln_in_t;\ntypedef ", StorageTypeName(y->dtype()), " kiln_out_t;\ntypedef ", acc,
      " kiln_acc_t;\ntypedef ", it, " kiln_idx_t;\nconstexpr kiln_idx_t kRows = ", rows, ";\nconstexpr kiln_idx_t kLen = ",
      count, ";\nconstexpr bool kBlockPerRow = ", block_per_row ? "true" : "false", ";\n",
      OffsetFn("kiln_row_base", kept, kept_s, it), OffsetFn("kiln_elem", red, red_s, it),
      LoadFn("kiln_load", x->dtype(), dom, it), "static __device__ __forceinline__ ", acc,
      " kiln_identity() { return ", identity, "; }\nstatic __device__ __forceinline__ ", acc, " kiln_map(", acc,
      " x) { return ", map, "; }\nstatic __device__ __forceinline__ ", acc, " kiln_combine(", acc, " a, ", acc,
      " b) { return ", combine, "; }\n", StoreFn("kiln_store", y->dtype(), dom, it, finish),
      TemplateSource("reduce.cuh"), "\nextern \"C\" __global__ void KILN_KERNEL(", Param(y->dtype(), false, "out"),
      ", ", Param(x->dtype(), true, "in"), ") { kiln_reduce(out, in); }\n");
  KernelLaunch l;
  l.source = std::move(src);
  l.args = {0, InputArg(node, 0)};
  if (block_per_row) {
    l.block = {RowBlock(count), 1, 1};
    l.grid = {static_cast<uint32_t>(std::clamp<int64_t>(rows, 1, kMaxGrid)), 1, 1};
  } else {
    SetGrid1D(l, rows);
  }
  return std::vector<KernelLaunch>{std::move(l)};
}

absl::StatusOr<std::vector<KernelLaunch>> Softmax(const Node& node) {
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  if (!IsFloating(x->dtype())) return NoKernel(node, "non-float input");
  auto axis_attr = node.GetInt("axis", -1);
  if (!axis_attr.ok()) return axis_attr.status();
  const int64_t rank = x->rank();
  const int64_t axis = rank == 0 ? 0 : (*axis_attr < 0 ? *axis_attr + rank : *axis_attr);
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) outer *= x->shape()[d];
    else if (d == axis) len = x->shape()[d];
    else inner *= x->shape()[d];
  }
  const int64_t rows = outer * inner;
  const bool block = inner == 1;
  const char* it = IndexType(x->numel());
  KernelLaunch l;
  l.source = absl::StrCat(
      "// ", node.op_type(), " ", x->TypeString(), " axis ", axis, "\ntypedef ", StorageTypeName(x->dtype()),
      " kiln_in_t;\ntypedef ", StorageTypeName(y->dtype()), " kiln_out_t;\ntypedef ", it,
      " kiln_idx_t;\nconstexpr kiln_idx_t kRows = ", rows, ";\nconstexpr kiln_idx_t kLen = ", len,
      ";\nconstexpr kiln_idx_t kInner = ", inner, ";\nconstexpr bool kLog = ",
      node.op_type() == "LogSoftmax" ? "true" : "false", ";\nconstexpr bool kBlockPerRow = ", block ? "true" : "false",
      ";\n", LoadFn("kiln_load", x->dtype(), Domain::kFloat, it),
      StoreFn("kiln_store", y->dtype(), Domain::kFloat, it, "v"), TemplateSource("softmax.cuh"),
      "\nextern \"C\" __global__ void KILN_KERNEL(", Param(y->dtype(), false, "out"), ", ",
      Param(x->dtype(), true, "in"), ") { kiln_softmax(out, in); }\n");
  l.args = {0, InputArg(node, 0)};
  if (block) {
    l.block = {RowBlock(len), 1, 1};
    l.grid = {static_cast<uint32_t>(std::clamp<int64_t>(rows, 1, kMaxGrid)), 1, 1};
  } else {
    SetGrid1D(l, rows);
  }
  return std::vector<KernelLaunch>{std::move(l)};
}

absl::StatusOr<std::vector<KernelLaunch>> LayerNorm(const Node& node) {
  const Value* x = node.input(0);
  auto axis_attr = node.GetInt("axis", -1);
  if (!axis_attr.ok()) return axis_attr.status();
  auto eps = node.GetFloat("epsilon", 1e-5f);
  if (!eps.ok()) return eps.status();
  const int64_t rank = x->rank();
  const int64_t axis = *axis_attr < 0 ? *axis_attr + rank : *axis_attr;
  const Shape normalized(x->shape().begin() + axis, x->shape().end());
  const int64_t size = NumElements(normalized);
  const int64_t rows = size == 0 ? 0 : x->numel() / size;
  const char* it = IndexType(x->numel());
  const bool has_bias = node.has_input(2);
  const bool has_mean = node.num_outputs() > 1 && node.output(1) != nullptr;
  const bool has_inv = node.num_outputs() > 2 && node.output(2) != nullptr;
  const DType stat = has_mean ? node.output(1)->dtype() : has_inv ? node.output(2)->dtype() : DType::kFloat32;
  auto bcast = [&](const std::string& name, const Value* v) {
    // Offset of normalised index j in a tensor broadcast (right-aligned) to `normalized`.
    std::vector<int64_t> s(normalized.size(), 0);
    const std::vector<int64_t> dense = DenseStrides(v->shape());
    const size_t lead = normalized.size() - v->shape().size();
    for (size_t d = 0; d < v->shape().size(); ++d) s[lead + d] = v->shape()[d] == 1 ? 0 : dense[d];
    const std::string off = OffsetFn(absl::StrCat(name, "_off"), normalized, s, it);
    return absl::StrCat(off, "static __device__ __forceinline__ float ", name, "(const ", StorageTypeName(v->dtype()),
                        "* p, ", it, " j) { return ", LoadAs(v->dtype(), Domain::kFloat, "p", absl::StrCat(name, "_off(j)")),
                        "; }\n");
  };
  const Value* scale = node.input(1);
  const Value* bias = has_bias ? node.input(2) : nullptr;
  std::string prefix = absl::StrCat(
      "// LayerNormalization ", x->TypeString(), " axis ", axis, "\ntypedef ", StorageTypeName(x->dtype()),
      " kiln_x_t;\ntypedef ", StorageTypeName(node.output(0)->dtype()), " kiln_y_t;\ntypedef ",
      StorageTypeName(scale->dtype()), " kiln_scale_t;\ntypedef ", has_bias ? StorageTypeName(bias->dtype()) : "float",
      " kiln_bias_t;\ntypedef ", StorageTypeName(stat), " kiln_stat_t;\ntypedef ", it,
      " kiln_idx_t;\nconstexpr kiln_idx_t kRows = ", rows, ";\nconstexpr kiln_idx_t kSize = ", size,
      ";\nconstexpr float kEpsilon = ", FloatLit(*eps), ";\nconstexpr bool kHasBias = ", has_bias ? "true" : "false",
      ";\nconstexpr bool kHasMean = ", has_mean ? "true" : "false", ";\nconstexpr bool kHasInvStd = ",
      has_inv ? "true" : "false", ";\n", LoadFn("kiln_load_x", x->dtype(), Domain::kFloat, it),
      bcast("kiln_load_scale", scale),
      has_bias ? bcast("kiln_load_bias", bias)
               : absl::StrCat("static __device__ __forceinline__ float kiln_load_bias(const float*, ", it,
                              ") { return 0.f; }\n"),
      StoreFn("kiln_store_y", node.output(0)->dtype(), Domain::kFloat, it, "v"),
      StoreFn("kiln_store_stat", stat, Domain::kFloat, it, "v"), TemplateSource("layernorm.cuh"));
  KernelLaunch l;
  std::string params = Param(node.output(0)->dtype(), false, "y");
  l.args = {0};
  if (has_mean) {
    absl::StrAppend(&params, ", ", Param(stat, false, "mean"));
    l.args.push_back(1);
  }
  if (has_inv) {
    absl::StrAppend(&params, ", ", Param(stat, false, "inv_std"));
    l.args.push_back(2);
  }
  absl::StrAppend(&params, ", ", Param(x->dtype(), true, "x"), ", ", Param(scale->dtype(), true, "scale"));
  l.args.push_back(InputArg(node, 0));
  l.args.push_back(InputArg(node, 1));
  if (has_bias) {
    absl::StrAppend(&params, ", ", Param(bias->dtype(), true, "bias"));
    l.args.push_back(InputArg(node, 2));
  }
  l.source = absl::StrCat(prefix, "\nextern \"C\" __global__ void KILN_KERNEL(", params, ") { kiln_layernorm(y, ",
                          has_mean ? "mean" : "(kiln_stat_t*)0", ", ", has_inv ? "inv_std" : "(kiln_stat_t*)0",
                          ", x, scale, ", has_bias ? "bias" : "(const float*)0", "); }\n");
  l.block = {RowBlock(size), 1, 1};
  l.grid = {static_cast<uint32_t>(std::clamp<int64_t>(rows, 1, kMaxGrid)), 1, 1};
  return std::vector<KernelLaunch>{std::move(l)};
}

absl::StatusOr<std::vector<KernelLaunch>> ArgReduce(const Node& node) {
  const Value* x = node.input(0);
  auto axis_attr = node.GetInt("axis", 0);
  if (!axis_attr.ok()) return axis_attr.status();
  auto last = node.GetInt("select_last_index", 0);
  if (!last.ok()) return last.status();
  const int64_t rank = x->rank();
  const int64_t axis = *axis_attr < 0 ? *axis_attr + rank : *axis_attr;
  const kiln::ops::AxisSplit s = kiln::ops::SplitAtAxis(x->shape(), axis);
  const bool is_max = node.op_type() == "ArgMax";
  const Domain dom = DomainOf(x->dtype());
  const char* it = IndexType(x->numel());
  const int64_t n = s.outer * s.inner;
  const std::string cmp = is_max ? (*last ? "v >= bv" : "v > bv") : (*last ? "v <= bv" : "v < bv");
  KernelLaunch l;
  l.args = {0, InputArg(node, 0)};
  l.source = absl::StrCat(
      "// ", node.op_type(), " ", x->TypeString(), " axis ", axis, "\nextern \"C\" __global__ void KILN_KERNEL(",
      Param(DType::kInt64, false, "out"), ", ", Param(x->dtype(), true, "in"), ") {\n", GridStrideLoop(n), "const ", it,
      " base = (i / ", s.inner, ") * ", s.len * s.inner, " + i % ", s.inner, ";\n", DomainType(dom), " bv = ",
      LoadAs(x->dtype(), dom, "in", "base"), ";\nkiln_i64 best = 0;\nfor (", it, " l = 1; l < ", s.len, "; ++l) {\n",
      "const ", DomainType(dom), " v = ", LoadAs(x->dtype(), dom, "in", absl::StrCat("base + l * ", s.inner)),
      ";\nif (", cmp, ") { bv = v; best = l; }\n}\nout[i] = best;\n}\n}\n");
  SetGrid1D(l, n);
  return std::vector<KernelLaunch>{std::move(l)};
}

}  // namespace

bool IsReduceOp(absl::string_view op) {
  static const char* const kOps[] = {"ReduceSum",   "ReduceMean", "ReduceMax",       "ReduceMin",
                                     "ReduceProd",  "ReduceL1",   "ReduceL2",        "ReduceSumSquare",
                                     "ReduceLogSum", "Softmax",   "LogSoftmax",      "LayerNormalization",
                                     "GlobalAveragePool", "GlobalMaxPool", "ArgMax", "ArgMin"};
  for (const char* k : kOps) {
    if (op == k) return true;
  }
  return false;
}

absl::StatusOr<std::vector<KernelLaunch>> GenerateReduce(const Node& node) {
  const std::string& op = node.op_type();
  if (op == "Softmax" || op == "LogSoftmax") return Softmax(node);
  if (op == "LayerNormalization") return LayerNorm(node);
  if (op == "ArgMax" || op == "ArgMin") return ArgReduce(node);
  const int64_t rank = node.input(0)->rank();
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    std::vector<bool> mask(rank, true);
    mask[0] = mask[1] = false;
    return EmitReduce(node, op == "GlobalAveragePool" ? Kind::kMean : Kind::kMax, mask);
  }
  auto mask = kiln::ops::ReducedAxes(node, rank);
  if (!mask.ok()) return mask.status();
  if (node.input(0)->dtype() == DType::kBool) return NoKernel(node, "bool input");
  Kind kind;
  if (op == "ReduceSum") kind = Kind::kSum;
  else if (op == "ReduceMean") kind = Kind::kMean;
  else if (op == "ReduceMax") kind = Kind::kMax;
  else if (op == "ReduceMin") kind = Kind::kMin;
  else if (op == "ReduceProd") kind = Kind::kProd;
  else if (op == "ReduceL1") kind = Kind::kL1;
  else if (op == "ReduceL2") kind = Kind::kL2;
  else if (op == "ReduceSumSquare") kind = Kind::kSumSquare;
  else if (op == "ReduceLogSum") kind = Kind::kLogSum;
  else return NoKernel(node, "");
  return EmitReduce(node, kind, *mask);
}

}  // namespace kiln::codegen::ops
