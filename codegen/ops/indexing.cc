// Index-driven kernels: GatherElements, GatherND, ScatterElements (and Scatter),
// ScatterND, OneHot, Trilu, Compress, EyeLike, ReverseSequence, MaxUnpool. Offsets are computed in 64 bits. An index outside its axis cannot raise
// an error on the GPU: it is clamped into the axis (the CPU reference rejects it).
// Scatters copy data into the output, then apply the updates: without a reduction
// one thread per update element (a repeated target keeps an arbitrary one of its
// updates, as ONNX allows); with one, one thread per target line walks its updates in
// the reference's order, so the result matches it exactly.
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/kernel_util.h"
#include "codegen/templates.h"
#include "common/status_macros.h"
#include "graph/ops/compress.h"
#include "graph/ops/scatter_util.h"

namespace kiln::codegen::ops {
namespace {

using kiln::ops::ScatterReduction;

// Statements that declare `var` = the index loaded from `expr` (of an integer
// dtype), wrapped once if negative and clamped into [0, dim).
std::string ClampedIndex(const std::string& var, const std::string& expr, int64_t dim) {
  return absl::StrCat("kiln_index ", var, " = (kiln_index)(", expr, ");\nif (", var, " < 0) ", var, " += ", dim,
                      ";\n", var, " = ", var, " < 0 ? 0 : (", var, " >= ", dim, " ? ", dim - 1, " : ", var, ");\n");
}

// The statement that combines update element `u` into output element `o`.
std::string CombineStatement(ScatterReduction r, DType dtype, const std::string& o, const std::string& u) {
  const Domain d = DomainOf(dtype);
  const std::string a = LoadAs(dtype, d, "out", o), b = LoadAs(dtype, d, "upd", u);
  std::string v;
  switch (r) {
    case ScatterReduction::kNone: return absl::StrCat("out[", o, "] = upd[", u, "];\n");
    case ScatterReduction::kAdd: v = absl::StrCat(a, " + ", b); break;
    case ScatterReduction::kMul: v = absl::StrCat(a, " * ", b); break;
    case ScatterReduction::kMax: v = absl::StrCat("(", b, " > ", a, " ? ", b, " : ", a, ")"); break;
    case ScatterReduction::kMin: v = absl::StrCat("(", b, " < ", a, " ? ", b, " : ", a, ")"); break;
  }
  return StoreFrom(dtype, d, "out", o, v) + "\n";
}

// out = data (the scatters' first launch).
KernelLaunch CopyData(const Node& node) {
  const DType dt = node.output(0)->dtype();
  const int64_t n = node.output(0)->numel();
  KernelLaunch l;
  l.args = {0, InputArg(node, 0)};
  l.source = absl::StrCat("// ", node.op_type(), " copy ", node.output(0)->TypeString(),
                          "\nextern \"C\" __global__ void KILN_KERNEL(", Param(dt, false, "out"), ", ",
                          Param(dt, true, "data"), ") {\n", GridStrideLoop(n), "out[i] = data[i];\n}\n}\n");
  SetGrid1D(l, n);
  return l;
}

// The parameters out, then `inputs` (name, node input), with their launch args into `l`.
std::string OutAndInputs(const Node& node, const std::vector<std::pair<std::string, int>>& inputs, KernelLaunch& l) {
  l.args = {0};
  std::string params = Param(node.output(0)->dtype(), false, "out");
  for (const auto& [name, input] : inputs) {
    absl::StrAppend(&params, ", ", Param(node.input(input)->dtype(), true, name));
    l.args.push_back(InputArg(node, input));
  }
  return params;
}

// Kernel over `n` work items `w` with parameters out, then `inputs` (name, node input).
KernelLaunch Kernel(const Node& node, const std::string& what, int64_t n,
                    const std::vector<std::pair<std::string, int>>& inputs, const std::string& body) {
  KernelLaunch l;
  const std::string params = OutAndInputs(node, inputs, l);
  l.source = absl::StrCat("// ", node.op_type(), " ", what, " ", node.output(0)->TypeString(),
                          "\nextern \"C\" __global__ void KILN_KERNEL(", params, ") {\n",
                          GridStrideLoop(n, "w"), body, "}\n}\n");
  SetGrid1D(l, n);
  return l;
}

// Decomposes `w` over `shape` and declares `off` = sum of coordinate * strides[d].
std::string Decompose(const Shape& shape, const std::vector<int64_t>& strides) {
  std::string s = "kiln_index r_ = w, off = 0;\n";
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    if (strides[d] != 0) absl::StrAppend(&s, "off += (r_ % ", shape[d], ") * ", strides[d], ";\n");
    if (d > 0) absl::StrAppend(&s, "r_ /= ", shape[d], ";\n");
  }
  return s + "(void)r_;\n";
}

absl::StatusOr<int64_t> Axis(const Node& node, int64_t rank) {
  absl::StatusOr<int64_t> axis = node.GetInt("axis", 0);
  if (!axis.ok()) return axis.status();
  return *axis < 0 ? *axis + rank : *axis;
}

// ClampedIndex for a run-time extent: `dim` is C code.
std::string ClampedIndexAt(const std::string& var, const std::string& expr, const std::string& dim) {
  return absl::StrCat("kiln_index ", var, " = (kiln_index)(", expr, ");\nif (", var, " < 0) ", var, " += ", dim, ";\n",
                      var, " = ", var, " < 0 ? 0 : (", var, " >= ", dim, " ? ", dim, " - 1 : ", var, ");\n");
}

// Kernel's form with run-time sizes: `n` work items `w` (an expression over the dim
// symbols), the kernel taking kiln_dims after out and `inputs`.
KernelLaunch DynamicKernel(const Node& node, const DimExpr& n, const std::vector<std::pair<std::string, int>>& inputs,
                           const std::string& body) {
  KernelLaunch l;
  const std::string params = OutAndInputs(node, inputs, l);
  l.source = absl::StrCat("// ", node.op_type(), " ", node.output(0)->TypeString(), " (sizes at run time)\n",
                          "extern \"C\" __global__ void KILN_KERNEL(", params,
                          ", const kiln_dims kiln_dims_) {\nconst kiln_index kN = ", DimCode(n),
                          ";\nfor (kiln_index w = (kiln_index)blockIdx.x * blockDim.x + threadIdx.x; w < kN; w += "
                          "(kiln_index)gridDim.x * blockDim.x) {\n",
                          body, "}\n}\n");
  SetGrid1D(l, node.output(0)->numel());
  SetDynamicGrid1D(l, n, kBlock);
  return l;
}

// GatherElements of a dynamic graph (issue 34): the same walk over the indices with
// every extent and stride read from kiln_dims.
absl::StatusOr<std::vector<KernelLaunch>> DynamicGatherElements(const Node& node, int64_t axis) {
  const std::vector<DimExpr> data = ValueDims(*node.input(0));
  const std::vector<DimExpr> idx = ValueDims(*node.input(1));
  std::vector<DimExpr> strides = DenseDimStrides(data);
  const DimExpr axis_stride = strides[axis];
  strides[axis] = DimExpr();
  std::string body = "kiln_index r_ = w, off = 0;\n";
  for (int d = static_cast<int>(idx.size()) - 1; d >= 0; --d) {
    const std::string extent = absl::StrCat("(kiln_index)", DimCode(idx[d]));
    if (strides[d].constant() != 0) absl::StrAppend(&body, "off += (r_ % ", extent, ") * ", DimCode(strides[d]), ";\n");
    if (d > 0) absl::StrAppend(&body, "r_ /= ", extent, ";\n");
  }
  absl::StrAppend(&body, "(void)r_;\n",
                  ClampedIndexAt("x", "indices[w]", absl::StrCat("(kiln_index)", DimCode(data[axis]))),
                  "out[w] = data[off + x * ", DimCode(axis_stride), "];\n");
  return std::vector<KernelLaunch>{DynamicKernel(node, DimsProduct(idx), {{"data", 0}, {"indices", 1}}, body)};
}

// GatherND of a dynamic graph (issue 34; transformers' packed-sequence mask reads a
// cumulative sum at [batch, query] and [batch, key] pairs): GatherNd's walk with the
// extents and strides read from kiln_dims.
absl::StatusOr<std::vector<KernelLaunch>> DynamicGatherNd(const Node& node, int64_t b) {
  const std::vector<DimExpr> data = ValueDims(*node.input(0));
  const std::vector<DimExpr> idx = ValueDims(*node.input(1));
  const std::optional<int64_t> k = idx.back().constant();
  if (!k) return NoKernel(node, "index tuples whose length varies");
  const std::vector<DimExpr> strides = DenseDimStrides(data);
  const DimExpr per_batch = DimsProduct(std::vector<DimExpr>(idx.begin() + b, idx.end() - 1));
  const DimExpr slice = DimsProduct(std::vector<DimExpr>(data.begin() + b + *k, data.end()));
  std::string body = absl::StrCat("const kiln_index t = w / ", DimCode(slice), ", e = w % ", DimCode(slice),
                                  ";\nkiln_index off = e;\n");
  if (b > 0) {
    absl::StrAppend(&body, "off += (t / ", DimCode(per_batch), ") * ", DimCode(strides[b - 1]), ";\n");
  }
  for (int64_t j = 0; j < *k; ++j) {
    absl::StrAppend(&body, "{\n",
                    ClampedIndexAt("x", absl::StrCat("indices[t * ", *k, " + ", j, "]"),
                                   absl::StrCat("(kiln_index)", DimCode(data[b + j]))),
                    "off += x * ", DimCode(strides[b + j]), ";\n}\n");
  }
  absl::StrAppend(&body, "out[w] = data[off];\n");
  return std::vector<KernelLaunch>{
      DynamicKernel(node, DimsProduct(ValueDims(*node.output(0))), {{"data", 0}, {"indices", 1}}, body)};
}

// Range: out[i] = start + i * delta, from the start and delta inputs (scalars); the
// count is the output's size, read from kiln_dims in a dynamic graph (a Range over the
// sequence length).
absl::StatusOr<std::vector<KernelLaunch>> Range(const Node& node) {
  const Value* out = node.output(0);
  const Domain dom = DomainOf(out->dtype());
  if (dom == Domain::kBool) return NoKernel(node, "bool output");
  const std::vector<DimExpr> dims = ValueDims(*out);
  if (dims.size() != 1) return NoKernel(node, "output of rank other than 1");
  if (node.input(0)->has_symbolic_data() || node.input(2)->has_symbolic_data()) {
    return NoKernel(node, "a start or delta computed from the sizes");
  }
  const char* t = DomainType(dom);
  KernelLaunch l;
  l.args = {0, InputArg(node, 0), InputArg(node, 2)};
  const bool dynamic = !dims[0].IsConstant();
  const std::string value = dom == Domain::kFloat ? "start + (float)w * delta" : "kiln_wadd(start, kiln_wmul(w, delta))";
  l.source = absl::StrCat(TemplateSource("pointwise.cuh"), "// Range ", out->TypeString(),
                          dynamic ? " (sizes at run time)" : "", "\nextern \"C\" __global__ void KILN_KERNEL(", Param(out->dtype(), false, "out"), ", ",
                          Param(node.input(0)->dtype(), true, "start_p"), ", ", Param(node.input(2)->dtype(), true, "delta_p"),
                          dynamic ? ", const kiln_dims kiln_dims_" : "", ") {\nconst ", t, " start = ",
                          LoadAs(node.input(0)->dtype(), dom, "start_p", "0"), ";\nconst ", t, " delta = ",
                          LoadAs(node.input(2)->dtype(), dom, "delta_p", "0"), ";\nconst kiln_index kN = ",
                          DimCode(dims[0]), ";\nfor (kiln_index w = (kiln_index)blockIdx.x * blockDim.x + threadIdx.x; "
                          "w < kN; w += (kiln_index)gridDim.x * blockDim.x) {\n",
                          StoreFrom(out->dtype(), dom, "out", "w", value), "\n}\n}\n");
  SetGrid1D(l, out->numel());
  if (dynamic) SetDynamicGrid1D(l, dims[0], kBlock);
  return std::vector<KernelLaunch>{std::move(l)};
}

// ConstantOfShape: every element the `value` attribute's (default 0); the count read
// from kiln_dims when the shape follows the sizes (T5's mask of seq ones).
absl::StatusOr<std::vector<KernelLaunch>> ConstantOfShape(const Node& node) {
  const Value* out = node.output(0);
  std::string value = "0";
  Domain dom = Domain::kInt;
  if (node.has_attr("value")) {
    KILN_ASSIGN_OR_RETURN(Tensor t, node.GetTensor("value"));
    if (t.numel() != 1) return NoKernel(node, "a value of more than one element");
    dom = IsFloating(t.dtype()) ? Domain::kFloat : Domain::kInt;
    value = dom == Domain::kFloat ? FloatLit(t.ToFloat()[0]) : IntLit(t.ToInt64()[0]);
  }
  const DimExpr n = DimsProduct(ValueDims(*out));
  const bool dynamic = !n.IsConstant();
  KernelLaunch l;
  l.args = {0};
  l.source = absl::StrCat("// ConstantOfShape ", out->TypeString(), dynamic ? " (sizes at run time)" : "",
                          "\nextern \"C\" __global__ void KILN_KERNEL(", Param(out->dtype(), false, "out"),
                          dynamic ? ", const kiln_dims kiln_dims_" : "", ") {\nconst kiln_index kN = ", DimCode(n),
                          ";\nfor (kiln_index w = (kiln_index)blockIdx.x * blockDim.x + threadIdx.x; w < kN; w += "
                          "(kiln_index)gridDim.x * blockDim.x) {\n",
                          StoreFrom(out->dtype(), dom, "out", "w", value), "\n}\n}\n");
  SetGrid1D(l, out->numel());
  if (dynamic) SetDynamicGrid1D(l, n, kBlock);
  return std::vector<KernelLaunch>{std::move(l)};
}

absl::StatusOr<std::vector<KernelLaunch>> GatherElements(const Node& node) {
  if (HasDynamicValues(node)) {
    absl::StatusOr<int64_t> axis = Axis(node, node.input(0)->rank());
    if (!axis.ok()) return axis.status();
    return DynamicGatherElements(node, *axis);
  }
  const Shape& data = node.input(0)->shape();
  const Shape& idx = node.input(1)->shape();
  absl::StatusOr<int64_t> axis = Axis(node, data.size());
  if (!axis.ok()) return axis.status();
  std::vector<int64_t> strides = DenseStrides(data);
  const int64_t axis_stride = strides[*axis];
  strides[*axis] = 0;
  const std::string body = absl::StrCat(Decompose(idx, strides), ClampedIndex("x", "indices[w]", data[*axis]),
                                        "out[w] = data[off + x * ", axis_stride, "];\n");
  return std::vector<KernelLaunch>{Kernel(node, "", node.output(0)->numel(), {{"data", 0}, {"indices", 1}}, body)};
}

// The offset of index tuple `t` (k indices starting at dim b of data): statements
// that add each clamped index times its stride to `off`.
std::string TupleOffset(const Shape& data, int64_t b, int64_t k) {
  const std::vector<int64_t> strides = DenseStrides(data);
  std::string s;
  for (int64_t j = 0; j < k; ++j) {
    absl::StrAppend(&s, "{\n", ClampedIndex("x", absl::StrCat("indices[t * ", k, " + ", j, "]"), data[b + j]),
                    "off += x * ", strides[b + j], ";\n}\n");
  }
  return s;
}

absl::StatusOr<std::vector<KernelLaunch>> GatherNd(const Node& node) {
  absl::StatusOr<int64_t> b = node.GetInt("batch_dims", 0);
  if (!b.ok()) return b.status();
  if (HasDynamicValues(node)) return DynamicGatherNd(node, *b);
  const Shape& data = node.input(0)->shape();
  const Shape& idx = node.input(1)->shape();
  const int64_t k = idx.back();
  int64_t per_batch = 1, slice = 1;
  for (size_t d = *b; d + 1 < idx.size(); ++d) per_batch *= idx[d];
  for (size_t d = *b + k; d < data.size(); ++d) slice *= data[d];
  const int64_t batch_stride = *b == 0 ? 0 : DenseStrides(data)[*b - 1];
  const std::string body =
      absl::StrCat("const kiln_index t = w / ", slice, ", e = w % ", slice, ";\nkiln_index off = (t / ", per_batch,
                   ") * ", batch_stride, " + e;\n", TupleOffset(data, *b, k), "out[w] = data[off];\n");
  return std::vector<KernelLaunch>{Kernel(node, "", node.output(0)->numel(), {{"data", 0}, {"indices", 1}}, body)};
}

absl::StatusOr<std::vector<KernelLaunch>> ScatterNd(const Node& node) {
  absl::StatusOr<ScatterReduction> r = kiln::ops::GetScatterReduction(node);
  if (!r.ok()) return r.status();
  const Shape& data = node.input(0)->shape();
  const int64_t k = node.input(1)->shape().back();
  const int64_t tuples = node.input(1)->numel() / k;
  int64_t slice = 1;
  for (size_t d = k; d < data.size(); ++d) slice *= data[d];
  const DType dt = node.output(0)->dtype();
  std::vector<KernelLaunch> ls = {CopyData(node)};
  if (tuples * slice == 0) return ls;
  const std::vector<std::pair<std::string, int>> in = {{"indices", 1}, {"upd", 2}};
  if (*r == ScatterReduction::kNone) {
    ls.push_back(Kernel(node, "updates", tuples * slice, in,
                        absl::StrCat("const kiln_index t = w / ", slice, ", e = w % ", slice, ";\nkiln_index off = e;\n",
                                     TupleOffset(data, 0, k), CombineStatement(*r, dt, "off", "w"))));
  } else {
    ls.push_back(Kernel(node, "updates (reduction)", slice, in,
                        absl::StrCat("for (kiln_index t = 0; t < ", tuples, "; ++t) {\nkiln_index off = w;\n",
                                     TupleOffset(data, 0, k),
                                     CombineStatement(*r, dt, "off", absl::StrCat("t * ", slice, " + w")), "}\n")));
  }
  return ls;
}

absl::StatusOr<std::vector<KernelLaunch>> ScatterElements(const Node& node) {
  absl::StatusOr<ScatterReduction> r = kiln::ops::GetScatterReduction(node);
  if (!r.ok()) return r.status();
  const Shape& data = node.input(0)->shape();
  const Shape& idx = node.input(1)->shape();
  absl::StatusOr<int64_t> axis = Axis(node, data.size());
  if (!axis.ok()) return axis.status();
  std::vector<int64_t> strides = DenseStrides(data);
  const int64_t axis_stride = strides[*axis];
  strides[*axis] = 0;
  const DType dt = node.output(0)->dtype();
  std::vector<KernelLaunch> ls = {CopyData(node)};
  const int64_t n = node.input(1)->numel();
  if (n == 0) return ls;
  const std::vector<std::pair<std::string, int>> in = {{"indices", 1}, {"upd", 2}};
  if (*r == ScatterReduction::kNone) {
    ls.push_back(Kernel(node, "updates", n, in,
                        absl::StrCat(Decompose(idx, strides), ClampedIndex("x", "indices[w]", data[*axis]),
                                     CombineStatement(*r, dt, absl::StrCat("off + x * ", axis_stride), "w"))));
    return ls;
  }
  // One thread per line along the axis: the line's first update element is `u0`,
  // its elements `idx_stride` apart.
  Shape lines = idx;
  lines[*axis] = 1;
  const int64_t idx_stride = DenseStrides(idx)[*axis];
  std::vector<int64_t> upd_strides = DenseStrides(idx);
  std::string body = Decompose(lines, strides);
  absl::StrAppend(&body, "kiln_index u0 = 0;\n{\nkiln_index q_ = w;\n");
  for (int d = static_cast<int>(lines.size()) - 1; d >= 0; --d) {
    absl::StrAppend(&body, "u0 += (q_ % ", lines[d], ") * ", upd_strides[d], "; q_ /= ", lines[d], ";\n");
  }
  absl::StrAppend(&body, "}\nfor (kiln_index j = 0; j < ", idx[*axis], "; ++j) {\nconst kiln_index u = u0 + j * ",
                  idx_stride, ";\n", ClampedIndex("x", "indices[u]", data[*axis]),
                  CombineStatement(*r, dt, absl::StrCat("off + x * ", axis_stride), "u"), "}\n");
  ls.push_back(Kernel(node, "updates (reduction)", NumElements(lines), in, body));
  return ls;
}

// OneHot: output [outer, depth, inner]; element (o, d, i) is on where the index at
// (o, i), wrapped once if negative, equals d.
absl::StatusOr<std::vector<KernelLaunch>> OneHot(const Node& node) {
  const Value* depth_v = node.input(1);
  if (!depth_v->is_constant()) return NoKernel(node, "depth is not a constant");
  const int64_t depth = depth_v->constant().ScalarInt64();
  const Shape& ind = node.input(0)->shape();
  const int64_t rank = static_cast<int64_t>(ind.size()) + 1;
  absl::StatusOr<int64_t> axis = node.GetInt("axis", -1);
  if (!axis.ok()) return axis.status();
  const int64_t a = *axis < 0 ? *axis + rank : *axis;
  int64_t inner = 1;
  for (int64_t d = a; d < rank - 1; ++d) inner *= ind[d];
  const std::string body = absl::StrCat(
      "const kiln_index i = w % ", inner, ", d = (w / ", inner, ") % ", depth, ", o = w / ", inner * depth,
      ";\nkiln_index x = ", LoadAs(node.input(0)->dtype(), Domain::kInt, "indices", absl::StrCat("o * ", inner, " + i")),
      ";\nif (x < 0) x += ", depth, ";\nout[w] = values[x == d ? 1 : 0];\n");
  return std::vector<KernelLaunch>{
      Kernel(node, "", node.output(0)->numel(), {{"indices", 0}, {"values", 2}}, body)};
}

// Trilu: element (.., i, j) of the last two dims is kept where j - i >= k (upper) or
// j - i <= k (lower), else 0; k a constant or a one-element input.
absl::StatusOr<std::vector<KernelLaunch>> Trilu(const Node& node) {
  absl::StatusOr<int64_t> upper = node.GetInt("upper", 1);
  if (!upper.ok()) return upper.status();
  const Shape& s = node.input(0)->shape();
  const int64_t rows = s[s.size() - 2], cols = s[s.size() - 1];
  std::vector<std::pair<std::string, int>> in = {{"x", 0}};
  std::string k = "0";
  if (node.has_input(1) && node.input(1)->is_constant()) {
    k = IntLit(node.input(1)->constant().ScalarInt64());
  } else if (node.has_input(1)) {
    in.push_back({"k", 1});
    k = "(kiln_index)k[0]";
  }
  const std::string body = absl::StrCat("const kiln_index j = w % ", cols, ", i = (w / ", cols, ") % ", rows,
                                        ";\nconst bool keep = j - i ", *upper ? ">=" : "<=", " ", k, ";\nout[w] = keep ? x[w] : (",
                                        StorageTypeName(node.output(0)->dtype()), ")0;\n");
  return std::vector<KernelLaunch>{Kernel(node, *upper ? "upper" : "lower", node.output(0)->numel(), in, body)};
}

// Compress with a constant condition: a gather of the kept positions along the axis
// (graph/ops/compress.h), their list baked into the kernel.
absl::StatusOr<std::vector<KernelLaunch>> Compress(const Node& node) {
  absl::StatusOr<kiln::ops::CompressPlan> p = kiln::ops::PlanCompress(node);
  if (!p.ok()) return p.status();
  const int64_t k = static_cast<int64_t>(p->kept.size());
  const int64_t n = node.output(0)->numel();
  std::string kept;
  for (int64_t j : p->kept) absl::StrAppend(&kept, kept.empty() ? "" : ",", j);
  KernelLaunch l = Kernel(node, "", n, {{"data", 0}},
                          absl::StrCat("const kiln_index i = w % ", p->inner, ", j = (w / ", p->inner, ") % ", k,
                                       ", o = w / ", k * p->inner, ";\nout[w] = data[(o * ", p->len,
                                       " + kKept[j]) * ", p->inner, " + i];\n"));
  if (n > 0) l.source = absl::StrCat("__device__ const kiln_index kKept[] = {", kept, "};\n", l.source);
  return std::vector<KernelLaunch>{std::move(l)};
}

// EyeLike: out[i, j] = (j - i == k), whatever the input holds.
absl::StatusOr<std::vector<KernelLaunch>> EyeLike(const Node& node) {
  absl::StatusOr<int64_t> k = node.GetInt("k", 0);
  if (!k.ok()) return k.status();
  const int64_t cols = node.output(0)->shape()[1];
  const DType dt = node.output(0)->dtype();
  KernelLaunch l;
  l.args = {0};
  const int64_t n = node.output(0)->numel();
  l.source = absl::StrCat("// EyeLike ", node.output(0)->TypeString(), " k ", *k,
                          "\nextern \"C\" __global__ void KILN_KERNEL(", Param(dt, false, "out"), ") {\n",
                          GridStrideLoop(n, "w"), "const bool on = (kiln_index)w % ", cols, " - (kiln_index)w / ", cols,
                          " == ", IntLit(*k), ";\n", StoreFrom(dt, Domain::kInt, "out", "w", "on ? 1 : 0"), "\n}\n}\n");
  SetGrid1D(l, n);
  return std::vector<KernelLaunch>{std::move(l)};
}

// ReverseSequence: element (t, b, ...) reads (len[b] - 1 - t, b, ...) for t < len[b]
// (lengths clamped into [0, T]), else itself; time and batch are dims 0 and 1.
absl::StatusOr<std::vector<KernelLaunch>> ReverseSequence(const Node& node) {
  absl::StatusOr<int64_t> time_axis = node.GetInt("time_axis", 0);
  if (!time_axis.ok()) return time_axis.status();
  const Shape& x = node.input(0)->shape();
  const int64_t inner = DenseStrides(x)[1];
  const int64_t steps = x[*time_axis];
  const std::string t = *time_axis == 0 ? "d0" : "d1", b = *time_axis == 0 ? "d1" : "d0";
  const std::string at = *time_axis == 0 ? absl::StrCat("(from * ", x[1], " + d1) * ", inner, " + i")
                                         : absl::StrCat("(d0 * ", x[1], " + from) * ", inner, " + i");
  const std::string body = absl::StrCat(
      "const kiln_index i = w % ", inner, ", d1 = (w / ", inner, ") % ", x[1], ", d0 = w / ", inner * x[1],
      ";\nkiln_index len = lens[", b, "];\nlen = len < 0 ? 0 : (len > ", steps, " ? ", steps,
      " : len);\nconst kiln_index from = ", t, " < len ? len - 1 - ", t, " : ", t, ";\nout[w] = x[", at, "];\n");
  return std::vector<KernelLaunch>{Kernel(node, "", node.output(0)->numel(), {{"x", 0}, {"lens", 1}}, body)};
}

// MaxUnpool: zeros, then each input value at its index's coordinates in the unpooled
// shape (MaxPool's), placed in the (possibly larger) output at the same coordinates.
absl::StatusOr<std::vector<KernelLaunch>> MaxUnpool(const Node& node) {
  const Shape& x = node.input(0)->shape();
  const Shape& os = node.output(0)->shape();
  const size_t n = x.size() - 2;
  auto kernel = node.GetInts("kernel_shape");
  auto strides = node.GetInts("strides", std::vector<int64_t>(n, 1));
  auto pads = node.GetInts("pads", std::vector<int64_t>(2 * n, 0));
  if (!kernel.ok() || !strides.ok() || !pads.ok()) return NoKernel(node, "attributes");
  Shape unpooled = {x[0], x[1]};
  for (size_t i = 0; i < n; ++i) {
    unpooled.push_back((x[i + 2] - 1) * (*strides)[i] + (*kernel)[i] - (*pads)[i] - (*pads)[i + n]);
  }
  const std::vector<int64_t> out_strides = DenseStrides(os);
  const DType dt = node.output(0)->dtype();
  KernelLaunch zero;
  zero.args = {0};
  const int64_t total = node.output(0)->numel();
  zero.source = absl::StrCat("// MaxUnpool zero ", node.output(0)->TypeString(),
                             "\nextern \"C\" __global__ void KILN_KERNEL(", Param(dt, false, "out"), ") {\n",
                             GridStrideLoop(total, "w"), "out[w] = (", StorageTypeName(dt), ")0;\n}\n}\n");
  SetGrid1D(zero, total);
  std::string body = absl::StrCat("kiln_index r = indices[w];\nif (r < 0 || r >= ", NumElements(unpooled),
                                  ") continue;\nkiln_index at = 0;\n");
  for (int d = static_cast<int>(unpooled.size()) - 1; d >= 0; --d) {
    absl::StrAppend(&body, "at += (r % ", unpooled[d], ") * ", out_strides[d], ";\nr /= ", unpooled[d], ";\n");
  }
  absl::StrAppend(&body, "out[at] = x[w];\n");
  return std::vector<KernelLaunch>{
      std::move(zero), Kernel(node, "scatter", node.input(0)->numel(), {{"x", 0}, {"indices", 1}}, body)};
}

}  // namespace

bool IsIndexingOp(absl::string_view op) {
  return op == "GatherElements" || op == "GatherND" || op == "ScatterElements" || op == "Scatter" ||
         op == "ScatterND" || op == "OneHot" || op == "Trilu" || op == "Compress" || op == "EyeLike" ||
         op == "ReverseSequence" || op == "MaxUnpool" || op == "Range" ||
         op == "ConstantOfShape";
}

absl::StatusOr<std::vector<KernelLaunch>> GenerateIndexing(const Node& node) {
  const std::string& op = node.op_type();
  if (op == "GatherElements") return GatherElements(node);
  if (op == "GatherND") return GatherNd(node);
  if (op == "ScatterND") return ScatterNd(node);
  if (op == "ScatterElements" || op == "Scatter") return ScatterElements(node);
  if (op == "OneHot") return OneHot(node);
  if (op == "Trilu") return Trilu(node);
  if (op == "Compress") return Compress(node);
  if (op == "EyeLike") return EyeLike(node);
  if (op == "ReverseSequence") return ReverseSequence(node);
  if (op == "MaxUnpool") return MaxUnpool(node);
  if (op == "Range") return Range(node);
  if (op == "ConstantOfShape") return ConstantOfShape(node);
  return NoKernel(node, "");
}

}  // namespace kiln::codegen::ops
