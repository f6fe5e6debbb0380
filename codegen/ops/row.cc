// Row kernels: Softmax/LogSoftmax over the last axis, LayerNormalization and
// RMSNormalization, alone or as fused "softmax", "layernorm" and "rmsnorm" groups with
// their element-wise prologue in registers. Instantiates
// codegen/templates/{softmax,layernorm}.cuh (after vector.cuh) with a generated prefix
// of types, constants and load/store functions (codegen/ops/row_plan.h).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/kernel_util.h"
#include "codegen/ops/pointwise_spec.h"
#include "codegen/ops/row_moves_code.h"
#include "codegen/ops/row_plan.h"
#include "codegen/templates.h"
#include "common/status_macros.h"
#include "graph/fused_group.h"
#include "graph/ops/axes.h"
#include "graph/pattern_match.h"

namespace kiln::codegen::ops {
namespace {

constexpr int kRowCacheElements = 32;  // softmax / norms: the row held in registers

// A tensor the row load reads, broadcast into x's shape at `strides`, as the
// register variable `var`.
struct RowIn {
  std::string param;
  DType dtype;
  Domain domain;
  std::string var;
  std::vector<int64_t> strides;  // over x's shape, 0 where broadcast
  // Run-time sizes, an input not of x's dims (a mask broadcast over the heads): its
  // strides over x's outer dims [0, axis) as expressions; empty: dense, row * kLen.
  std::vector<DimExpr> outer_dim_strides;
  // Rows moved into x's shape (RowKernelSpec::row_maps): row r of x's shape is the
  // input's row row_maps[row_map](r); -1: read at `strides`.
  int row_map = -1;
};
// An x-shaped output computed by the prologue (`expr`), stored by the first load.
struct RowOut {
  std::string param;
  DType dtype;
  Domain domain;
  std::string expr;
};
// A LayerNorm scale or bias: a pointer (broadcast into the normalised shape) or a
// literal (a one-element constant of the group's body).
struct RowParam {
  std::string param;  // "" when `literal`
  std::string literal;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> strides;  // over the normalised shape
};

// Everything a row kernel reads and writes; the kernel's parameters are, in order:
// y, extra outputs, stats (mean, inv_std), ins, scale, bias (those present), and
// `args` gives the tensor of each.
struct RowKernelSpec {
  Shape shape;   // x's
  int64_t axis;  // rows are dims [axis, rank)
  std::vector<RowIn> ins;
  std::string code;    // per element: statements over the ins' variables
  std::string x_expr;  // x's element, an fp32 expression
  std::vector<RowOut> extra;
  DType y_dtype;
  // y's row starts over the outer dims [0, axis), when a Transpose keeping the rows
  // places them (empty: dense, row * kLen).
  std::vector<int64_t> y_row_strides;
  // Chains of row moves (graph/row_moves.h) the kernel reads or writes through; y's
  // (`y_map` >= 0): the kernel's row r is y's, dense, and x's row row_maps[y_map](r).
  std::vector<RowMap> row_maps;
  int y_map = -1;
  // LayerNorm only.
  RowParam scale, bias;
  bool has_bias = false;
  std::string mean_param, inv_param;  // "" when absent
  DType stat_dtype = DType::kFloat32;
  std::vector<int> args;
  // Run-time sizes (a dynamic graph's node): the row count as an expression over the
  // dim symbols, read from kiln_dims, and every input dense; the row length too when
  // `dynamic_len` is set (Softmax: rows of seq scores), else it is fixed.
  std::optional<DimExpr> dynamic_rows;
  std::optional<DimExpr> dynamic_len;
  std::vector<DimExpr> outer_dims;  // x's dims [0, axis), for the inputs with outer_dim_strides
};

enum class InRow { kContiguous, kBroadcast, kStrided };

// How operand strides run along a row of shape `row`: contiguous (j), one element
// per row (0), or anything else.
InRow InRowKind(const Shape& row, const std::vector<int64_t>& strides) {
  StridedSpace s;
  s.shape = row;
  s.strides = {strides};
  s.Collapse();
  if (s.shape.empty() || (s.shape.size() == 1 && s.strides[0][0] == 1)) return InRow::kContiguous;
  bool zero = true;
  for (int64_t v : s.strides[0]) zero &= v == 0;
  return zero ? InRow::kBroadcast : InRow::kStrided;
}

// A parameter (LayerNorm's scale or bias) read as one vector per row chunk: a
// group input whose row is contiguous.
bool DenseParam(const Shape& row, const RowParam& p) {
  return !p.param.empty() && InRowKind(row, p.strides) == InRow::kContiguous;
}

// LayerNorm's part of a row kernel's prefix: the scale and bias loads, the stats store.
std::string NormParamCode(const RowKernelSpec& k, const Shape& row, const char* it) {
  std::string src;
  auto dense_param = [&](const RowParam& p) { return DenseParam(row, p); };
  auto param_load = [&](const std::string& fn, const RowParam& p) {
    std::string body;
    if (!p.literal.empty()) {
      body = absl::StrCat("#pragma unroll\nfor (int e = 0; e < V; ++e) s[e] = ", p.literal, ";\n");
    } else if (dense_param(p)) {
      body = absl::StrCat("const kiln_vec_pack<", StorageTypeName(p.dtype), ", V> v = kiln_vec_ld<V>(a.", p.param,
                          " + j);\n#pragma unroll\nfor (int e = 0; e < V; ++e) s[e] = ",
                          LoadAs(p.dtype, Domain::kFloat, "v.v", "e"), ";\n");
    } else {
      absl::StrAppend(&src, OffsetFn(absl::StrCat(fn, "_off"), row, p.strides, it));
      body = absl::StrCat("#pragma unroll\nfor (int e = 0; e < V; ++e) s[e] = ",
                          LoadAs(p.dtype, Domain::kFloat, absl::StrCat("a.", p.param), absl::StrCat(fn, "_off(j + e)")),
                          ";\n");
    }
    absl::StrAppend(&src, "template <int V>\nstatic __device__ __forceinline__ void ", fn,
                    "(const kiln_args& a, kiln_idx_t j, float (&s)[V]) {\n", body, "}\n");
  };
  param_load("kiln_load_scale", k.scale);
  if (k.has_bias) {
    param_load("kiln_load_bias", k.bias);
  } else {
    absl::StrAppend(&src, "template <int V>\nstatic __device__ __forceinline__ void kiln_load_bias(const kiln_args&, "
                          "kiln_idx_t, float (&)[V]) {}\n");
  }
  absl::StrAppend(&src, "constexpr bool kHasBias = ", k.has_bias ? "true" : "false",
                  ";\nconstexpr bool kHasStats = ", k.mean_param.empty() && k.inv_param.empty() ? "false" : "true",
                  ";\nstatic __device__ __forceinline__ void kiln_store_stats(const kiln_args& a, kiln_idx_t row, "
                  "float mu, float inv) {\n",
                  k.mean_param.empty() ? "" : StoreFrom(k.stat_dtype, Domain::kFloat, "a." + k.mean_param, "row", "mu"),
                  "\n",
                  k.inv_param.empty() ? "" : StoreFrom(k.stat_dtype, Domain::kFloat, "a." + k.inv_param, "row", "inv"),
                  "\n}\n");
  return src;
}

// The shared prefix of a row kernel: types and plan constants, kiln_args, the row
// load with the prologue, the row store, the alignment check, LayerNorm's scale/bias
// loads and stats store. Returns the plan through `plan`.
std::string RowPrefix(const RowKernelSpec& k, int cap, RowPlan* plan, std::string* kernel_params,
                      std::string* member_init) {
  const Shape outer(k.shape.begin(), k.shape.begin() + k.axis);
  const Shape row(k.shape.begin() + k.axis, k.shape.end());
  const int64_t len = NumElements(row);
  const int64_t rows = len == 0 ? 0 : NumElements(k.shape) / len;
  const char* it = IndexType(std::max<int64_t>(NumElements(k.shape), 1));

  // Vector width: every contiguous operand's rows start at multiples of it.
  std::vector<InRow> kinds;
  std::vector<DType> dtypes = {k.y_dtype};
  bool strided = false;
  for (const RowIn& in : k.ins) {
    const std::vector<int64_t> inner(in.strides.begin() + k.axis, in.strides.end());
    kinds.push_back(InRowKind(row, inner));
    strided |= kinds.back() == InRow::kStrided;
    if (kinds.back() == InRow::kContiguous) dtypes.push_back(in.dtype);
  }
  for (const RowOut& o : k.extra) dtypes.push_back(o.dtype);
  auto dense_param = [&](const RowParam& p) { return DenseParam(row, p); };
  if (dense_param(k.scale)) dtypes.push_back(k.scale.dtype);
  if (k.has_bias && dense_param(k.bias)) dtypes.push_back(k.bias.dtype);
  int vec = strided ? 1 : MaxVectorWidth(dtypes);
  for (; vec > 1; vec /= 2) {
    bool ok = len % vec == 0 &&
              (!k.dynamic_len.has_value() || DimExpr::DivideExactly(*k.dynamic_len, DimExpr::Constant(vec)));
    for (size_t i = 0; i < k.ins.size() && ok; ++i) {
      if (kinds[i] != InRow::kContiguous) continue;
      for (int64_t d = 0; d < k.axis && ok; ++d) ok = k.ins[i].strides[d] % vec == 0;
      for (const DimExpr& e : k.ins[i].outer_dim_strides) {
        ok = ok && DimExpr::DivideExactly(e, DimExpr::Constant(vec)).has_value();
      }
    }
    for (int64_t s : k.y_row_strides) ok = ok && s % vec == 0;
    if (ok) break;
  }
  *plan = PlanRows(rows, len, vec, cap);

  // kiln_args, the kernel parameters and the struct's initialiser, in arg order.
  std::string members, aligned = "true";
  auto member = [&](DType dtype, bool is_const, const std::string& name, bool vector_access) {
    absl::StrAppend(&members, is_const ? "const " : "", StorageTypeName(dtype), "* ", name, ";\n");
    absl::StrAppend(kernel_params, kernel_params->empty() ? "" : ", ", Param(dtype, is_const, name));
    absl::StrAppend(member_init, member_init->empty() ? "" : ", ", name);
    if (vector_access) absl::StrAppend(&aligned, " && kiln_vec_aligned(a.", name, ", ", vec * DTypeSize(dtype), ")");
  };
  member(k.y_dtype, false, "y", true);
  for (const RowOut& o : k.extra) member(o.dtype, false, o.param, true);
  if (!k.mean_param.empty()) member(k.stat_dtype, false, k.mean_param, false);
  if (!k.inv_param.empty()) member(k.stat_dtype, false, k.inv_param, false);
  for (size_t i = 0; i < k.ins.size(); ++i) member(k.ins[i].dtype, true, k.ins[i].param, kinds[i] == InRow::kContiguous);
  const bool is_ln = !k.scale.param.empty() || !k.scale.literal.empty();
  if (!k.scale.param.empty()) member(k.scale.dtype, true, k.scale.param, dense_param(k.scale));
  if (k.has_bias && !k.bias.param.empty()) member(k.bias.dtype, true, k.bias.param, dense_param(k.bias));
  // Dynamic rows: a member of the argument struct, which the templates' entry functions
  // (taking it as `a`) read through kRows.
  std::string sizes_decl = absl::StrCat("constexpr kiln_idx_t kRows = ", rows, ";\nconstexpr kiln_idx_t kLen = ", len,
                                        ";\n");
  if (k.dynamic_rows.has_value()) {
    absl::StrAppend(&members, "kiln_idx_t rows;\nkiln_idx_t len;\n");
    absl::StrAppend(kernel_params, ", const kiln_dims kiln_dims_");
    absl::StrAppend(member_init, ", (kiln_idx_t)", DimCode(*k.dynamic_rows), ", (kiln_idx_t)",
                    k.dynamic_len.has_value() ? DimCode(*k.dynamic_len) : absl::StrCat(len));
    // The outer extents and the strides of the inputs that are not dense at x's dims.
    bool any_strided = false;
    for (const RowIn& in : k.ins) any_strided |= !in.outer_dim_strides.empty();
    for (size_t d = 0; any_strided && d < k.outer_dims.size(); ++d) {
      absl::StrAppend(&members, "kiln_idx_t od", d, ";\n");
      absl::StrAppend(member_init, ", (kiln_idx_t)", DimCode(k.outer_dims[d]));
    }
    for (size_t i = 0; i < k.ins.size(); ++i) {
      for (size_t d = 0; d < k.ins[i].outer_dim_strides.size(); ++d) {
        absl::StrAppend(&members, "kiln_idx_t s", i, "_", d, ";\n");
        absl::StrAppend(member_init, ", (kiln_idx_t)", DimCode(k.ins[i].outer_dim_strides[d]));
      }
    }
    sizes_decl = absl::StrCat("#define kRows (a.rows)\n",
                              k.dynamic_len.has_value() ? "#define kLen (a.len)\n"
                                                        : absl::StrCat("constexpr kiln_idx_t kLen = ", len, ";\n"));
  }

  std::string src = absl::StrCat(TemplateSource("pointwise.cuh"), TemplateSource("vector.cuh"), "typedef ", it,
                                 " kiln_idx_t;\n", sizes_decl, "constexpr kiln_idx_t kMaxLen = ", len,
                                 ";\n#define kSize kLen\n", RowPlanConstants(*plan),
                                 "struct kiln_args {\n", members, "};\n",
                                 "static __device__ __forceinline__ bool kiln_vec_ok(const kiln_args& a) { return ",
                                 aligned, "; }\n");

  // Row offsets of the ins over the outer dims (operand 0: the dense outputs).
  StridedSpace space;
  space.shape = outer;
  space.strides.push_back(std::vector<int64_t>(outer.size(), 0));
  {
    const std::vector<int64_t> dense = DenseStrides(k.shape);
    for (int64_t d = 0; d < k.axis; ++d) space.strides[0][d] = dense[d];
  }
  std::vector<int> operands;
  for (size_t i = 0; i < k.ins.size(); ++i) {
    space.strides.emplace_back(k.ins[i].strides.begin(), k.ins[i].strides.begin() + k.axis);
    if (k.ins[i].row_map < 0) operands.push_back(static_cast<int>(i) + 1);
  }
  space.Collapse();
  for (size_t m = 0; m < k.row_maps.size(); ++m)
    absl::StrAppend(&src, RowMapFn(absl::StrCat("kiln_rmap", m), k.row_maps[m]));
  for (size_t i = 0; i < k.ins.size(); ++i) {
    if (kinds[i] != InRow::kStrided) continue;
    absl::StrAppend(&src, OffsetFn(absl::StrCat("kiln_in", i, "_off"), row,
                                   std::vector<int64_t>(k.ins[i].strides.begin() + k.axis, k.ins[i].strides.end()), it));
  }
  std::string row_offsets = space.shape.empty() ? "" : LinearOffsetCode(space, operands, "row", "kiln_idx_t", "r");
  for (size_t i = 0; i < k.ins.size() && !space.shape.empty(); ++i) {
    if (k.ins[i].row_map < 0) continue;
    absl::StrAppend(&row_offsets, "const kiln_idx_t r", i + 1, " = kiln_rmap", k.ins[i].row_map, "(row) * kLen;\n");
  }
  // Rows in y's order: x's row (and every input's) is where y's row came from.
  if (k.y_map >= 0) row_offsets = absl::StrCat("row = kiln_rmap", k.y_map, "(row);\n", row_offsets);
  if (k.dynamic_rows.has_value()) {  // dense inputs, or strides over the outer dims
    row_offsets.clear();
    std::string decomposed;
    for (size_t i = 0; i < k.ins.size(); ++i) {
      const std::vector<DimExpr>& st = k.ins[i].outer_dim_strides;
      if (st.empty()) {
        absl::StrAppend(&row_offsets, "const kiln_idx_t r", i + 1, " = row * kLen;\n");
        continue;
      }
      if (decomposed.empty()) {
        decomposed = "kiln_idx_t q_ = row;\n";
        for (int64_t d = static_cast<int64_t>(k.outer_dims.size()) - 1; d >= 0; --d) {
          absl::StrAppend(&decomposed, "const kiln_idx_t x", d, "_ = ",
                          d > 0 ? absl::StrCat("q_ % a.od", d, ";\nq_ /= a.od", d, ";\n") : "q_;\n");
        }
      }
      std::string sum;
      for (size_t d = 0; d < st.size(); ++d) {
        if (st[d].constant() == 0) continue;
        absl::StrAppend(&sum, sum.empty() ? "" : " + ", "x", d, "_ * a.s", i, "_", d);
      }
      absl::StrAppend(&row_offsets, "const kiln_idx_t r", i + 1, " = ", sum.empty() ? "0" : sum, ";\n");
    }
    row_offsets = decomposed + row_offsets;
  }
  std::string load = absl::StrCat(
      "template <int V, bool kFirst>\nstatic __device__ __forceinline__ void kiln_row_load(const kiln_args& a, "
      "kiln_idx_t row, kiln_idx_t j, float (&x)[V]) {\n",
      row_offsets);
  std::string unpack;
  for (size_t i = 0; i < k.ins.size(); ++i) {
    const RowIn& in = k.ins[i];
    const std::string r =
        space.shape.empty() && !k.dynamic_rows.has_value() ? "0" : absl::StrCat("r", i + 1);
    const char* t = StorageTypeName(in.dtype);
    switch (kinds[i]) {
      case InRow::kContiguous:
        absl::StrAppend(&load, "const kiln_vec_pack<", t, ", V> p", i, " = kiln_vec_ld<V>(a.", in.param, " + ", r,
                        " + j);\n");
        absl::StrAppend(&unpack, "const ", DomainType(in.domain), " ", in.var, " = ",
                        LoadAs(in.dtype, in.domain, absl::StrCat("p", i, ".v"), "e"), ";\n");
        break;
      case InRow::kBroadcast:
        absl::StrAppend(&load, "const ", t, " p", i, " = a.", in.param, "[", r, "];\n");
        absl::StrAppend(&unpack, "const ", DomainType(in.domain), " ", in.var, " = ",
                        LoadAs(in.dtype, in.domain, absl::StrCat("(&p", i, ")"), "0"), ";\n");
        break;
      case InRow::kStrided:
        absl::StrAppend(&unpack, "const ", DomainType(in.domain), " ", in.var, " = ",
                        LoadAs(in.dtype, in.domain, absl::StrCat("a.", in.param),
                               absl::StrCat(r, " + kiln_in", i, "_off(j + e)")),
                        ";\n");
        break;
    }
  }
  std::string put, write;
  for (size_t o = 0; o < k.extra.size(); ++o) {
    const RowOut& out = k.extra[o];
    absl::StrAppend(&load, "kiln_vec_pack<", StorageTypeName(out.dtype), ", V> q", o, ";\n");
    absl::StrAppend(&put, StoreFrom(out.dtype, out.domain, absl::StrCat("q", o, ".v"), "e", out.expr), "\n");
    absl::StrAppend(&write, "kiln_vec_st<V>(a.", out.param, " + row * kLen + j, q", o, ");\n");
  }
  absl::StrAppend(&load, "#pragma unroll\nfor (int e = 0; e < V; ++e) {\n", unpack, k.code, "x[e] = (float)(",
                  k.x_expr, ");\n", put.empty() ? "" : absl::StrCat("if constexpr (kFirst) {\n", put, "}\n"), "}\n",
                  write.empty() ? "" : absl::StrCat("if constexpr (kFirst) {\n", write, "}\n"), "}\n");
  if (!k.y_row_strides.empty()) absl::StrAppend(&src, OffsetFn("kiln_y_row", outer, k.y_row_strides, it));
  absl::StrAppend(&src, load, "template <int V>\nstatic __device__ __forceinline__ void kiln_row_store(const kiln_args& a, "
                  "kiln_idx_t row, kiln_idx_t j, const float (&y)[V]) {\nkiln_vec_pack<", StorageTypeName(k.y_dtype),
                  ", V> q;\n#pragma unroll\nfor (int e = 0; e < V; ++e) ",
                  StoreFrom(k.y_dtype, Domain::kFloat, "q.v", "e", "y[e]"), "\nkiln_vec_st<V>(a.y + ",
                  k.y_row_strides.empty() ? "row * kLen" : "kiln_y_row(row)", " + j, q);\n}\n");
  if (!is_ln) return src;
  return absl::StrCat(src, NormParamCode(k, row, it));
}

// The launch of a row kernel whose template entry is `entry(a)`.
KernelLaunch RowLaunch(const RowKernelSpec& k, const std::string& comment, const std::string& constants,
                       const char* tpl, const char* entry, int cap) {
  RowPlan plan;
  std::string params, init;
  std::string src = absl::StrCat("// ", comment, "\n", RowPrefix(k, cap, &plan, &params, &init), constants,
                                 TemplateSource(tpl), "\nextern \"C\" __global__ void __launch_bounds__(", plan.block,
                                 ") KILN_KERNEL(", params, ") {\nconst kiln_args a = {", init, "};\n", entry,
                                 "(a);\n}\n#undef kSize\n", k.dynamic_rows ? "#undef kRows\n" : "",
                                 k.dynamic_len ? "#undef kLen\n" : "");
  KernelLaunch l;
  l.source = std::move(src);
  l.args = k.args;
  l.block = {plan.block, 1, 1};
  l.grid = {plan.grid, 1, 1};
  if (k.dynamic_rows.has_value()) SetDynamicGrid1D(l, *k.dynamic_rows, plan.rows_per_block);
  return l;
}

std::string SoftmaxConstants(bool log) { return absl::StrCat("constexpr bool kLog = ", log ? "true" : "false", ";\n"); }

// The norm's constants: epsilon, and whether it is RMSNormalization (no mean).
std::string LayerNormConstants(float epsilon, bool rms) {
  return absl::StrCat("constexpr float kEpsilon = ", FloatLit(epsilon), ";\nconstexpr bool kRms = ",
                      rms ? "true" : "false", ";\n");
}

bool IsNorm(const std::string& op) { return op == "LayerNormalization" || op == "RMSNormalization"; }

// Softmax over a middle axis: one thread per (outer, inner) row.
absl::StatusOr<std::vector<KernelLaunch>> StridedSoftmax(const Node& node, int64_t axis) {
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  const kiln::ops::AxisSplit s = kiln::ops::SplitAtAxis(x->shape(), axis);
  const char* it = IndexType(x->numel());
  KernelLaunch l;
  l.source = absl::StrCat(
      "// ", node.op_type(), " ", x->TypeString(), " axis ", axis, "\n#define KILN_SOFTMAX_STRIDED 1\ntypedef ",
      StorageTypeName(x->dtype()), " kiln_in_t;\ntypedef ", StorageTypeName(y->dtype()), " kiln_out_t;\ntypedef ", it,
      " kiln_idx_t;\nconstexpr kiln_idx_t kRows = ", s.outer * s.inner, ";\nconstexpr kiln_idx_t kLen = ", s.len,
      ";\nconstexpr kiln_idx_t kInner = ", s.inner, ";\n", SoftmaxConstants(node.op_type() == "LogSoftmax"),
      LoadFn("kiln_load", x->dtype(), Domain::kFloat, it), StoreFn("kiln_store", y->dtype(), Domain::kFloat, it, "v"),
      TemplateSource("softmax.cuh"), "\nextern \"C\" __global__ void KILN_KERNEL(", Param(y->dtype(), false, "out"),
      ", ", Param(x->dtype(), true, "in"), ") { kiln_softmax_strided(out, in); }\n#undef KILN_SOFTMAX_STRIDED\n");
  l.args = {0, InputArg(node, 0)};
  SetGrid1D(l, s.outer * s.inner);
  return std::vector<KernelLaunch>{std::move(l)};
}

absl::StatusOr<int64_t> NormalAxis(const Node& node, int64_t dflt) {
  auto axis = node.GetInt("axis", dflt);
  if (!axis.ok()) return axis.status();
  const int64_t rank = node.input(0)->rank();
  if (rank == 0) return int64_t{0};
  return *axis < 0 ? *axis + rank : *axis;
}

// The rows (dims before `axis`) and the row length of `x`, as expressions. The length
// goes to `*dynamic_len` when it varies; Unimplemented then when that is null.
absl::StatusOr<DimExpr> RowsOf(const Node& where, const Value& x, int64_t axis, std::optional<DimExpr>* dynamic_len) {
  const std::vector<DimExpr> dims = ValueDims(x);
  DimExpr rows = DimExpr::Constant(1), len = DimExpr::Constant(1);
  for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d) {
    absl::StatusOr<DimExpr> r = DimExpr::Mul(d < axis ? rows : len, dims[d]);
    if (!r.ok()) return r.status();
    (d < axis ? rows : len) = *r;
  }
  if (!len.IsConstant()) {
    if (dynamic_len == nullptr) return NoKernel(where, "a row whose length varies with the dim ranges");
    *dynamic_len = len;
  }
  return rows;
}

// A dynamic group's input as a row kernel reads it: empty when it has x's dims (dense,
// row * kLen), else its strides over x's outer dims [0, axis) when it broadcasts into
// x for every size and is contiguous or broadcast along the row (a mask [batch, 1, 1,
// seq] against scores [batch, heads, seq, seq]); Unimplemented otherwise.
absl::StatusOr<std::vector<DimExpr>> DynamicRowStrides(const Node& group, const Value& x, int64_t axis,
                                                       const ElementwiseLoad& load) {
  const Value* v = group.input(load.input);
  const std::vector<DimExpr> x_dims = ValueDims(x);
  auto refuse = [&] { return NoKernel(group, absl::StrCat("input '", v->name(), "' is not read densely at x's dims")); };
  if (!load.strides.empty() || v->has_symbolic_data() || load.view != v->shape()) return refuse();
  if (ValueDims(*v) == x_dims) return std::vector<DimExpr>();
  std::vector<DimExpr> strides;
  if (!DynamicBroadcastStrides(ValueDims(*v), x_dims, &strides)) return refuse();
  const std::vector<DimExpr> row(x_dims.begin() + axis, x_dims.end());
  const std::vector<DimExpr> dense = DenseDimStrides(row);
  bool contiguous = true, broadcast = true;
  for (size_t d = 0; d < row.size(); ++d) {
    contiguous = contiguous && strides[axis + d] == dense[d];
    broadcast = broadcast && strides[axis + d].constant() == 0;
  }
  if (!contiguous && !broadcast) return refuse();
  return std::vector<DimExpr>(strides.begin(), strides.begin() + axis);
}

// For a node of a dynamic graph (issue 34), the number of rows of its input as an
// expression; nullopt when every size is fixed. The row length, when it varies, goes
// to `*dynamic_len`; Unimplemented when it varies and `dynamic_len` is null, or when
// an input other than x (a scale, a bias) varies.
absl::StatusOr<std::optional<DimExpr>> DynamicRows(const Node& node, int64_t axis,
                                                   std::optional<DimExpr>* dynamic_len = nullptr) {
  if (!HasDynamicValues(node)) return std::optional<DimExpr>();
  KILN_ASSIGN_OR_RETURN(DimExpr rows, RowsOf(node, *node.input(0), axis, dynamic_len));
  for (int i = 1; i < node.num_inputs(); ++i) {
    if (node.has_input(i) && node.input(i)->is_dynamic()) {
      return NoKernel(node, "a scale or bias whose sizes vary with the dim ranges");
    }
  }
  return std::optional<DimExpr>(rows);
}

RowIn DenseIn(const std::string& param, const Value* v) {
  return {param, v->dtype(), Domain::kFloat, "g0", DenseStrides(v->shape())};
}

absl::StatusOr<std::vector<KernelLaunch>> Softmax(const Node& node) {
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  if (!IsFloating(x->dtype())) return NoKernel(node, "non-float input");
  absl::StatusOr<int64_t> axis = NormalAxis(node, -1);
  if (!axis.ok()) return axis.status();
  if (x->rank() > 0 && *axis != x->rank() - 1) {
    if (HasDynamicValues(node)) return NoKernel(node, "an axis other than the last, with sizes that vary");
    return StridedSoftmax(node, *axis);
  }
  RowKernelSpec k;
  KILN_ASSIGN_OR_RETURN(k.dynamic_rows, DynamicRows(node, x->rank() == 0 ? 0 : *axis, &k.dynamic_len));
  k.shape = x->rank() == 0 ? Shape{1} : x->shape();
  k.axis = static_cast<int64_t>(k.shape.size()) - 1;
  k.ins = {DenseIn("x", x)};
  k.ins[0].strides = DenseStrides(k.shape);
  k.x_expr = "g0";
  k.y_dtype = y->dtype();
  k.args = {0, InputArg(node, 0)};
  return std::vector<KernelLaunch>{RowLaunch(k, absl::StrCat(node.op_type(), " ", x->TypeString()),
                                             SoftmaxConstants(node.op_type() == "LogSoftmax"), "softmax.cuh",
                                             "kiln_softmax", kRowCacheElements)};
}

// A LayerNorm scale or bias `v` broadcast into the normalised shape, read through
// the kernel parameter `param`.
RowParam LnParam(const Value* v, const Shape& normalized, const std::string& param) {
  RowParam p;
  p.param = param;
  p.dtype = v->dtype();
  BroadcastStrides(v->shape(), normalized, &p.strides);
  return p;
}

absl::StatusOr<std::vector<KernelLaunch>> LayerNorm(const Node& node) {
  const Value* x = node.input(0);
  absl::StatusOr<int64_t> axis = NormalAxis(node, -1);
  if (!axis.ok()) return axis.status();
  auto eps = node.GetFloat("epsilon", 1e-5f);
  if (!eps.ok()) return eps.status();
  const Shape normalized(x->shape().begin() + *axis, x->shape().end());
  RowKernelSpec k;
  KILN_ASSIGN_OR_RETURN(k.dynamic_rows, DynamicRows(node, *axis));
  k.shape = x->shape();
  k.axis = *axis;
  k.ins = {DenseIn("x", x)};
  k.x_expr = "g0";
  k.y_dtype = node.output(0)->dtype();
  k.args = {0};
  const bool has_mean = node.num_outputs() > 1 && node.output(1) != nullptr;
  const bool has_inv = node.num_outputs() > 2 && node.output(2) != nullptr;
  if (has_mean) {
    k.mean_param = "mean";
    k.stat_dtype = node.output(1)->dtype();
    k.args.push_back(1);
  }
  if (has_inv) {
    k.inv_param = "inv_std";
    k.stat_dtype = node.output(2)->dtype();
    k.args.push_back(2);
  }
  k.args.push_back(InputArg(node, 0));
  k.scale = LnParam(node.input(1), normalized, "scale");
  k.args.push_back(InputArg(node, 1));
  k.has_bias = node.has_input(2);
  if (k.has_bias) {
    k.bias = LnParam(node.input(2), normalized, "bias");
    k.args.push_back(InputArg(node, 2));
  }
  return std::vector<KernelLaunch>{RowLaunch(k, absl::StrCat(node.op_type(), " ", x->TypeString(), " axis ", *axis),
                                             LayerNormConstants(*eps, node.op_type() == "RMSNormalization"),
                                             "layernorm.cuh", "kiln_layernorm", kRowCacheElements)};
}

}  // namespace

// A "softmax" or "layernorm" FusedGroup (fusion/fuse_pointwise.h): the anchor
// (Softmax/LogSoftmax over the last axis, or LayerNormalization) reads x computed in
// registers by the group's element-wise members (ComposeElementwise) from the group
// inputs; x-shaped intermediates the group outputs (the residual sum) are stored by
// the same pass. LayerNorm's scale and bias are group inputs or one-element constants.
namespace {

// The row kernel's outputs (`k`'s extra values, stat parameters and the first of its
// args: y, the extra x-shaped values, mean, inverse std), from the group's outputs:
// the anchor's (through `y_view` when the group writes y transposed), or values the
// element-wise members compute.
absl::Status SetRowOutputs(const Node& group, const Graph& body, const Node& anchor, const Value* y_moved,
                           const ComposedElementwise& composed, RowKernelSpec& k) {
  const bool ln = IsNorm(anchor.op_type());
  int y_out = -1, mean_out = -1, inv_out = -1;
  std::vector<int> extra_out;
  for (int o = 0; o < group.num_outputs(); ++o) {
    const Value* v = body.outputs()[o];
    if (v == anchor.output(0) || v == y_moved) {
      y_out = o;
    } else if (ln && anchor.num_outputs() > 1 && v == anchor.output(1)) {
      mean_out = o;
    } else if (ln && anchor.num_outputs() > 2 && v == anchor.output(2)) {
      inv_out = o;
    } else if (auto c = composed.computed.find(v); c != composed.computed.end()) {
      k.extra.push_back({absl::StrCat("out", o), group.output(o)->dtype(), c->second.second, c->second.first});
      extra_out.push_back(o);
    } else {
      return NoKernel(group, absl::StrCat("group output '", v->name(), "' is not computed by a member"));
    }
  }
  if (y_out < 0) return NoKernel(group, "the group does not output the normalised values");
  k.args.push_back(y_out);
  k.args.insert(k.args.end(), extra_out.begin(), extra_out.end());
  if (mean_out >= 0) {
    k.mean_param = "mean";
    k.stat_dtype = group.output(mean_out)->dtype();
    k.args.push_back(mean_out);
  }
  if (inv_out >= 0) {
    k.inv_param = "inv_std";
    k.stat_dtype = group.output(inv_out)->dtype();
    k.args.push_back(inv_out);
  }
  return absl::OkStatus();
}

// The row kernel's inputs (`k.ins` and their args): each of the members' loads read
// dense-broadcast into x's shape, through a view member's strides, or with sizes that
// vary (`dynamic`) through strides over the outer dims.
absl::Status SetRowInputs(const Node& group, const Value& x, int64_t axis, bool dynamic,
                          const ComposedElementwise& composed, RowKernelSpec& k) {
  const Shape& shape = x.shape();
  for (size_t l = 0; l < composed.loads.size(); ++l) {
    const ElementwiseLoad& load = composed.loads[l];
    RowIn in{absl::StrCat("in", l), group.input(load.input)->dtype(), load.domain, absl::StrCat("g", l), {}};
    in.row_map = load.row_map;
    if (!load.strides.empty()) {
      if (load.offset != 0 || load.strides.size() != shape.size()) {
        return NoKernel(group, "a view member that does not start at its input's first element");
      }
      in.strides = load.strides;
    } else if (!BroadcastStrides(load.view, shape, &in.strides)) {
      return NoKernel(group, "input does not broadcast to x");
    }
    if (dynamic) {
      KILN_ASSIGN_OR_RETURN(in.outer_dim_strides, DynamicRowStrides(group, x, axis, load));
    }
    k.ins.push_back(std::move(in));
    k.args.push_back(InputArg(group, load.input));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<KernelLaunch>> GenerateRowGroup(const Node& group) {
  auto body_or = FusedGroupBody(group);
  if (!body_or.ok()) return NoKernel(group, std::string(body_or.status().message()));
  const Graph& body = **body_or;
  const Node* anchor = nullptr;
  for (const Node* n : body.nodes()) {
    const std::string& op = n->op_type();
    if (op != "Softmax" && op != "LogSoftmax" && !IsNorm(op)) continue;
    if (anchor != nullptr) return NoKernel(group, "two softmax/norm members");
    anchor = n;
  }
  if (anchor == nullptr) return NoKernel(group, "no Softmax, LayerNormalization or RMSNormalization member");
  const bool ln = IsNorm(anchor->op_type());
  const bool rms = anchor->op_type() == "RMSNormalization";
  const Value* x = anchor->input(0);
  if (!IsFloating(x->dtype())) return NoKernel(group, "non-float input");
  const Shape& shape = x->shape();
  if (shape.empty()) return NoKernel(group, "scalar input");
  absl::StatusOr<int64_t> axis = NormalAxis(*anchor, -1);
  if (!axis.ok()) return axis.status();
  if (!ln && *axis != static_cast<int64_t>(shape.size()) - 1) {
    return NoKernel(group, absl::StrCat("softmax group over axis ", *axis, " (the kernel reduces the last axis)"));
  }
  // y written through a Transpose that keeps the rows (the group's output is its
  // output): row r of y starts where the Transpose puts it.
  const Node* y_view = nullptr;
  std::vector<int64_t> y_row_strides;
  for (const Value* v : body.outputs()) {
    const Node* t = v->producer();
    if (t == nullptr || t->op_type() != "Transpose" || t->input(0) != anchor->output(0)) continue;
    const std::vector<int64_t> perm = PermOf(*t);
    const int64_t r = static_cast<int64_t>(shape.size());
    if (static_cast<int64_t>(perm.size()) != r || perm.back() != r - 1 || *axis != r - 1) {
      return NoKernel(group, "an output Transpose that moves the normalised axis");
    }
    const std::vector<int64_t> dense = DenseStrides(v->shape());
    y_row_strides.assign(r - 1, 0);
    for (int64_t i = 0; i + 1 < r; ++i) y_row_strides[perm[i]] = dense[i];
    y_view = t;
  }
  // A dynamic graph's group (issue 34): rows counted at run time, every member over x's
  // dims, each input read at x's dims or broadcast into them (DynamicRowStrides).
  const bool dynamic = HasDynamicValues(group);
  RowMoves moves;
  if (!dynamic) {
    KILN_ASSIGN_OR_RETURN(moves, FindRowMoves(group, body, *anchor, *axis));
  }
  std::vector<const Node*> members;
  for (const Node* n : body.nodes()) {
    if (n != anchor && n != y_view && !absl::c_linear_search(moves.nodes, n)) members.push_back(n);
  }
  if (dynamic) {
    if (y_view != nullptr) return NoKernel(group, "an output Transpose, with sizes that vary");
    for (const Node* n : members) {
      if (n->num_outputs() != 1 || ValueDims(*n->output(0)) != ValueDims(*x)) {
        return NoKernel(group, absl::StrCat("member ", n->Describe(), " does not write x's dims for every size"));
      }
    }
  }
  ComposedElementwise composed;
  composed.allow_views = !dynamic;  // a Transpose member keeping the rows: read through its strides
  composed.row_views = moves.views;
  if (absl::Status st = ComposeElementwise(group, body, members, shape, composed); !st.ok()) return st;
  std::string x_expr;
  if (auto c = composed.computed.find(x); c != composed.computed.end()) {
    x_expr = c->second.first;
  } else {
    const auto& ins = body.inputs();
    const auto pos = std::find(ins.begin(), ins.end(), x);
    const auto moved = moves.views.find(x);
    if (pos == ins.end() && moved == moves.views.end()) {
      return NoKernel(group, "the normalised input has no source in the group");
    }
    composed.loads.push_back({moved != moves.views.end() ? moved->second.first : static_cast<int>(pos - ins.begin()),
                              Domain::kFloat, shape});
    if (moved != moves.views.end()) composed.loads.back().row_map = moved->second.second;
    x_expr = absl::StrCat("g", composed.loads.size() - 1);
  }

  RowKernelSpec k;
  if (dynamic) {
    KILN_ASSIGN_OR_RETURN(DimExpr rows, RowsOf(group, *x, *axis, ln ? nullptr : &k.dynamic_len));
    k.dynamic_rows = rows;
    const std::vector<DimExpr> x_dims = ValueDims(*x);
    k.outer_dims.assign(x_dims.begin(), x_dims.begin() + *axis);
  }
  k.shape = shape;
  k.axis = *axis;
  k.code = composed.code;
  k.x_expr = x_expr;
  k.y_dtype = anchor->output(0)->dtype();
  k.y_row_strides = std::move(y_row_strides);
  k.row_maps = std::move(moves.maps);
  k.y_map = moves.y_map;
  KILN_RETURN_IF_ERROR(
      SetRowOutputs(group, body, *anchor, y_view != nullptr ? y_view->output(0) : moves.y_end, composed, k));
  KILN_RETURN_IF_ERROR(SetRowInputs(group, *x, *axis, dynamic, composed, k));
  const char* kind = rms ? "rmsnorm" : ln ? "layernorm" : "softmax";
  const std::string comment =
      absl::StrCat("fused ", kind, " group: ", body.num_nodes(), " ops over ", ShapeToString(shape));
  if (!ln) {
    return std::vector<KernelLaunch>{RowLaunch(k, comment, SoftmaxConstants(anchor->op_type() == "LogSoftmax"),
                                               "softmax.cuh", "kiln_softmax", kRowCacheElements)};
  }
  auto eps = anchor->GetFloat("epsilon", 1e-5f);
  if (!eps.ok()) return eps.status();
  const Shape normalized(shape.begin() + *axis, shape.end());
  auto param = [&](int i, const std::string& name, RowParam* p) -> absl::Status {
    const Value* v = anchor->input(i);
    if (v->is_constant()) {
      if (v->numel() != 1) return NoKernel(group, absl::StrCat("constant '", v->name(), "' is not a scalar"));
      p->literal = FloatLit(v->constant().ScalarFloat());
      return absl::OkStatus();
    }
    const auto& ins = body.inputs();
    const auto pos = std::find(ins.begin(), ins.end(), v);
    if (pos == ins.end()) return NoKernel(group, absl::StrCat("the norm's '", v->name(), "' is not a group input"));
    if (v->is_dynamic()) return NoKernel(group, absl::StrCat("the norm's '", v->name(), "' varies with the dim ranges"));
    *p = LnParam(v, normalized, name);
    k.args.push_back(InputArg(group, static_cast<int>(pos - ins.begin())));
    return absl::OkStatus();
  };
  if (absl::Status st = param(1, "scale", &k.scale); !st.ok()) return st;
  k.has_bias = anchor->has_input(2);
  if (k.has_bias) {
    if (absl::Status st = param(2, "bias", &k.bias); !st.ok()) return st;
  }
  return std::vector<KernelLaunch>{RowLaunch(k, comment, LayerNormConstants(*eps, rms), "layernorm.cuh",
                                             "kiln_layernorm", kRowCacheElements)};
}

bool IsRowOp(absl::string_view op) {
  return op == "Softmax" || op == "LogSoftmax" || op == "LayerNormalization" || op == "RMSNormalization";
}

absl::StatusOr<std::vector<KernelLaunch>> GenerateRowOp(const Node& node) {
  if (node.op_type() == "Softmax" || node.op_type() == "LogSoftmax") return Softmax(node);
  return LayerNorm(node);
}

}  // namespace kiln::codegen::ops
