// Data-movement kernels: element copies between strided views, typed by storage
// (bytes are never converted). Views, Transpose, Slice, Tile, Expand are one strided
// copy each; Split and Concat one launch over all their parts; Gather and Pad compute
// their source index per element.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/kernel_util.h"
#include "codegen/templates.h"
#include "common/status_macros.h"
#include "graph/fused_group.h"
#include "graph/ops/infer_common.h"
#include "graph/ops/slice.h"

namespace kiln::codegen::ops {
namespace {

using kiln::ops::ConstantInts;

// out[dst_base + dst(i)] = in[src_base + src(i)] over `shape`; dst/src strides.
KernelLaunch StridedCopy(DType dtype, const Shape& shape, std::vector<int64_t> dst_strides, int64_t dst_base,
                         std::vector<int64_t> src_strides, int64_t src_base, int dst_arg, int src_arg,
                         int64_t max_extent, const std::string& what) {
  StridedSpace space;
  space.shape = shape;
  space.strides = {std::move(dst_strides), std::move(src_strides)};
  space.Collapse();
  const int64_t n = NumElements(shape);
  const char* it = IndexType(std::max(n, max_extent));
  KernelLaunch l;
  l.args = {dst_arg, src_arg};
  l.source = absl::StrCat("// ", what, "\nextern \"C\" __global__ void KILN_KERNEL(", Param(dtype, false, "out"), ", ",
                          Param(dtype, true, "in"), ") {\n", GridStrideLoop(n),
                          OffsetCode(space, {0, 1}, "i", it, "o"), "out[", dst_base == 0 ? "" : absl::StrCat(dst_base, " + "),
                          "o0] = in[", src_base == 0 ? "" : absl::StrCat(src_base, " + "), "o1];\n}\n}\n");
  SetGrid1D(l, n);
  return l;
}

// Copy of input `in` into dense output `out` through source strides.
KernelLaunch Gather(const Node& node, int out, int in, const Shape& shape, std::vector<int64_t> src_strides,
                    int64_t src_base) {
  return StridedCopy(node.output(out)->dtype(), shape, DenseStrides(shape), 0, std::move(src_strides), src_base, out,
                     InputArg(node, in), node.input(in)->numel(), absl::StrCat(node.op_type(), " ",
                                                                              node.output(out)->TypeString()));
}

// Concat or Split in one launch: the whole tensor viewed as [outer, row] (row = the
// axis and everything after it), each part a [outer, chunk_p] column block of it at
// column offset off_p. Threads walk the whole tensor in vectors of V elements (V
// divides every chunk, up to 16 bytes) and find their part by its column; where a
// pointer is not aligned to V elements (a view), the same loop runs with V = 1.
absl::StatusOr<std::vector<KernelLaunch>> ConcatOrSplit(const Node& node) {
  const bool concat = node.op_type() == "Concat";
  auto axis_attr = concat ? node.GetInt("axis") : node.GetInt("axis", 0);
  if (!axis_attr.ok()) return axis_attr.status();
  const Value* whole_value = concat ? node.output(0) : node.input(0);
  const Shape& whole = whole_value->shape();
  const DType dt = whole_value->dtype();
  const int64_t rank = static_cast<int64_t>(whole.size());
  const int64_t axis = *axis_attr < 0 ? *axis_attr + rank : *axis_attr;
  if (axis < 0 || axis >= rank) return NoKernel(node, "axis out of range");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) outer *= whole[d];
    if (d > axis) inner *= whole[d];
  }
  const int64_t row = whole[axis] * inner;
  const int parts = concat ? node.num_inputs() : node.num_outputs();
  int64_t vec = 16 / static_cast<int64_t>(DTypeSize(dt));
  std::vector<int64_t> chunks;
  std::vector<std::string> params;
  std::vector<int> args;
  for (int p = 0; p < parts; ++p) {
    const Value* part = concat ? node.input(p) : node.output(p);
    if (part == nullptr) return NoKernel(node, "absent part");
    chunks.push_back(part->shape()[axis] * inner);
    while (vec > 1 && chunks.back() % vec != 0) vec /= 2;
    params.push_back(absl::StrCat("p", p));
    args.push_back(concat ? InputArg(node, p) : p);
  }
  const int64_t total = NumElements(whole);
  if (total == 0) return std::vector<KernelLaunch>{};
  // The index runs up to a grid stride past the end.
  const char* it = IndexType(total + int64_t{kMaxGrid} * kBlock * vec);
  // Part lookup by column (in elements) and the copy, for a vector width V.
  std::string body;
  int64_t off = 0;
  bool first = true;
  for (int p = 0; p < parts; ++p) {
    if (chunks[p] == 0) continue;
    const std::string part_at = absl::StrCat("p", p, " + o * ", chunks[p], " + (c - ", off, ")");
    const std::string copy = concat ? absl::StrCat("kiln_vec_st<V>(w + i, kiln_vec_ld<V>(", part_at, "));")
                                    : absl::StrCat("kiln_vec_st<V>(", part_at, ", kiln_vec_ld<V>(w + i));");
    absl::StrAppend(&body, "    ", first ? "" : "else ", "if (c < ", off + chunks[p], ") ", copy, "\n");
    first = false;
    off += chunks[p];
  }
  std::string sig = absl::StrCat(Param(dt, !concat, "w"));
  std::string call_args = "w";
  std::string aligned = absl::StrCat("kiln_vec_aligned(w, ", vec * DTypeSize(dt), ")");
  for (int p = 0; p < parts; ++p) {
    absl::StrAppend(&sig, ", ", Param(dt, concat, params[p]));
    absl::StrAppend(&call_args, ", ", params[p]);
    if (chunks[p] > 0) absl::StrAppend(&aligned, " && kiln_vec_aligned(", params[p], ", ", vec * DTypeSize(dt), ")");
  }
  std::vector<int> launch_args = concat ? std::vector<int>{0} : std::vector<int>{InputArg(node, 0)};
  launch_args.insert(launch_args.end(), args.begin(), args.end());
  KernelLaunch l;
  l.args = std::move(launch_args);
  l.source = absl::StrCat(
      TemplateSource("vector.cuh"), "// ", node.op_type(), " of ", whole_value->TypeString(), " on axis ", axis, " into ",
      parts, " parts, one launch\ntemplate <int V>\nstatic __device__ __forceinline__ void kiln_parts(", sig,
      ") {\n  for (", it, " i = ((", it, ")blockIdx.x * blockDim.x + threadIdx.x) * V; i < (", it, ")", total,
      "; i += (", it, ")gridDim.x * blockDim.x * V) {\n    const ", it, " o = i / ", row, ", c = i % ", row, ";\n", body,
      "  }\n}\nextern \"C\" __global__ void KILN_KERNEL(", sig, ") {\n  if (", aligned, ") kiln_parts<", vec,
      ">(", call_args, ");\n  else kiln_parts<1>(", call_args, ");\n}\n");
  SetGrid1D(l, (total + vec - 1) / vec);
  return std::vector<KernelLaunch>{std::move(l)};
}

// Gather of a dynamic graph (issue 34): GatherOp's loop with the extents read from
// kiln_dims (an embedding lookup of [batch, seq] ids, a mask gathered by row).
absl::StatusOr<std::vector<KernelLaunch>> DynamicGather(const Node& node, int64_t axis) {
  const std::vector<DimExpr> data = ValueDims(*node.input(0));
  const DimExpr inner = DimsProduct(std::vector<DimExpr>(data.begin() + axis + 1, data.end()));
  const DimExpr nidx = DimsProduct(ValueDims(*node.input(1)));
  const DimExpr n = DimsProduct(ValueDims(*node.output(0)));
  const DType dt = node.output(0)->dtype();
  KernelLaunch l;
  l.args = {0, InputArg(node, 0), InputArg(node, 1)};
  l.source = absl::StrCat(
      "// Gather ", node.output(0)->TypeString(), " axis ", axis, " (sizes at run time)\nextern \"C\" __global__ void "
      "KILN_KERNEL(", Param(dt, false, "out"), ", ", Param(dt, true, "data"), ", ", Param(node.input(1)->dtype(), true, "indices"),
      ", const kiln_dims kiln_dims_) {\nconst kiln_index kN = ", DimCode(n), ", kInner = ", DimCode(inner),
      ", kNidx = ", DimCode(nidx), ", kDim = ", DimCode(data[axis]),
      ";\nfor (kiln_index i = (kiln_index)blockIdx.x * blockDim.x + threadIdx.x; i < kN; i += (kiln_index)gridDim.x * "
      "blockDim.x) {\nconst kiln_index k = i % kInner;\nconst kiln_index t = i / kInner;\nconst kiln_index j = t % kNidx;\n"
      "const kiln_index o = t / kNidx;\nkiln_i64 x = (kiln_i64)indices[j];\nif (x < 0) x += kDim;\n"
      "x = x < 0 ? 0 : (x >= kDim ? kDim - 1 : x);  // out of range: clamped\nout[i] = data[(o * kDim + x) * kInner + k];\n}\n}\n");
  SetGrid1D(l, node.output(0)->numel());
  SetDynamicGrid1D(l, n, kBlock);
  return std::vector<KernelLaunch>{std::move(l)};
}

// Concat of a dynamic graph: each input copied into its block of the output, one
// launch per input; the last input's size along the axis may vary (transformers'
// position ids shifted by one: [first - 1, ids...]).
absl::StatusOr<std::vector<KernelLaunch>> DynamicConcat(const Node& node) {
  const Value* out = node.output(0);
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", 0));
  const std::vector<DimExpr> out_dims = ValueDims(*out);
  if (axis < 0) axis += static_cast<int64_t>(out_dims.size());
  const std::vector<DimExpr> strides = DenseDimStrides(out_dims);
  if (!strides[axis].IsConstant()) return NoKernel(node, "an axis inside one whose size varies");
  std::vector<KernelLaunch> launches;
  DimExpr at = DimExpr::Constant(0);  // the next input's first index along the axis
  for (int i = 0; i < node.num_inputs(); ++i) {
    const std::vector<DimExpr> dims = ValueDims(*node.input(i));
    if (!at.IsConstant()) return NoKernel(node, "an input after one whose size along the axis varies");
    if (node.input(i)->numel() > 0) {
      KernelLaunch l =
          EmitDynamicStridedCopy(out->dtype(), dims, strides, *at.constant() * *strides[axis].constant(),
                                 node.input(i)->numel(), absl::StrCat("Concat input ", i, " of ", out->TypeString()));
      l.args = {0, InputArg(node, i)};
      launches.push_back(std::move(l));
    }
    KILN_ASSIGN_OR_RETURN(at, DimExpr::Add(at, dims[axis]));
  }
  return launches;
}

// Slice of a dynamic graph whose ends may follow the sizes (the position ids'
// buffer cut to seq): a strided view of the input, for fixed starts and steps; along
// an axis whose size varies, a start counted from the axis' beginning and step 1.
absl::StatusOr<std::vector<KernelLaunch>> DynamicSlice(const Node& node) {
  for (int i = 1; i < node.num_inputs(); ++i) {
    if (i != 2 && node.has_input(i) && node.input(i)->has_symbolic_data()) {
      return NoKernel(node, "starts, axes or steps computed from the sizes");
    }
  }
  auto plan = kiln::ops::ConstantSlicePlan(node);  // at the largest sizes
  if (!plan.ok()) return NoKernel(node, std::string(plan.status().message()));
  // Along an axis that varies, the plan's start is the start at every size only when
  // it does not count from the end.
  auto starts = ConstantInts(node, 1, "starts");
  if (!starts.ok()) return NoKernel(node, std::string(starts.status().message()));
  std::vector<int64_t> axes;
  for (size_t j = 0; j < starts->size(); ++j) axes.push_back(static_cast<int64_t>(j));
  if (node.has_input(3)) {
    auto given = ConstantInts(node, 3, "axes");
    if (!given.ok()) return NoKernel(node, std::string(given.status().message()));
    axes = *std::move(given);
  }
  std::vector<bool> from_end(node.input(0)->rank(), false);
  for (size_t j = 0; j < axes.size() && j < starts->size(); ++j) {
    const int64_t a = axes[j] < 0 ? axes[j] + node.input(0)->rank() : axes[j];
    if (a >= 0 && a < node.input(0)->rank()) from_end[a] = (*starts)[j] < 0;
  }
  const Value* in = node.input(0);
  const Value* out = node.output(0);
  const std::vector<DimExpr> in_dims = ValueDims(*in), out_dims = ValueDims(*out);
  const std::vector<DimExpr> dense = DenseDimStrides(in_dims);
  EwKernel k;
  k.comment = absl::StrCat("Slice ", out->TypeString());
  k.shape = out->shape();
  k.dims = out_dims;
  EwOperand src{"in", in->dtype(), DomainOf(in->dtype()), "v", {}};
  src.strides.assign(k.shape.size(), 0);
  for (size_t d = 0; d < in_dims.size(); ++d) {
    const kiln::ops::AxisSlice& p = (*plan)[d];
    const bool sliced = p.start != 0 || p.step != 1 || in_dims[d] != out_dims[d];
    if (sliced && !in_dims[d].IsConstant() && (p.step != 1 || from_end[d])) {
      return NoKernel(node, "a slice along an axis whose size varies, strided or counted from its end");
    }
    KILN_ASSIGN_OR_RETURN(DimExpr stride, DimExpr::Mul(dense[d], DimExpr::Constant(p.step)));
    src.dim_strides.push_back(std::move(stride));
    if (p.start == 0) continue;
    if (!dense[d].IsConstant()) return NoKernel(node, "a start inside an axis whose size varies");
    src.offset += p.start * *dense[d].constant();
  }
  k.operands.push_back(std::move(src));
  k.outputs.push_back({"out", out->dtype(), DomainOf(out->dtype()), "v"});
  KernelLaunch l = EmitElementwiseKernel(k);
  l.args = {0, InputArg(node, 0)};
  return std::vector<KernelLaunch>{std::move(l)};
}

absl::StatusOr<std::vector<KernelLaunch>> GatherOp(const Node& node) {
  auto axis_attr = node.GetInt("axis", 0);
  if (!axis_attr.ok()) return axis_attr.status();
  if (HasDynamicValues(node)) {
    const int64_t rank = node.input(0)->rank();
    const DType it_dtype = node.input(1)->dtype();
    if (it_dtype != DType::kInt64 && it_dtype != DType::kInt32) return NoKernel(node, "indices dtype");
    return DynamicGather(node, *axis_attr < 0 ? *axis_attr + rank : *axis_attr);
  }
  const Shape& data = node.input(0)->shape();
  const int64_t rank = static_cast<int64_t>(data.size());
  const int64_t axis = *axis_attr < 0 ? *axis_attr + rank : *axis_attr;
  const DType it_dtype = node.input(1)->dtype();
  if (it_dtype != DType::kInt64 && it_dtype != DType::kInt32) return NoKernel(node, "indices dtype");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) outer *= data[d];
    if (d > axis) inner *= data[d];
  }
  const int64_t dim = data[axis];
  const int64_t nidx = node.input(1)->numel();
  const int64_t n = node.output(0)->numel();
  const char* it = IndexType(std::max(n, node.input(0)->numel()));
  const DType dt = node.output(0)->dtype();
  KernelLaunch l;
  l.args = {0, InputArg(node, 0), InputArg(node, 1)};
  l.source = absl::StrCat(
      "// Gather ", node.output(0)->TypeString(), " axis ", axis, "\nextern \"C\" __global__ void KILN_KERNEL(",
      Param(dt, false, "out"), ", ", Param(dt, true, "data"), ", ", Param(it_dtype, true, "indices"), ") {\n",
      GridStrideLoop(n), "const ", it, " k = i % ", inner, ";\nconst ", it, " t = i / ", inner, ";\nconst ", it,
      " j = t % ", nidx, ";\nconst ", it, " o = t / ", nidx, ";\nkiln_i64 x = (kiln_i64)indices[j];\n",
      "if (x < 0) x += ", dim, ";\nx = x < 0 ? 0 : (x >= ", dim, " ? ", dim - 1, " : x);  // out of range: clamped\n",
      "out[i] = data[(o * ", dim, " + (", it, ")x) * ", inner, " + k];\n}\n}\n");
  SetGrid1D(l, n);
  return std::vector<KernelLaunch>{std::move(l)};
}

// A constant Pad whose innermost output dim is a whole vector of 4 to 16 bytes (an
// image's channels padded to 8 fp16 for a stem conv, read through a Transpose from
// NCHW): a thread per output row of that dim, which reads its row's elements (adjacent
// threads read adjacent pixels of each channel plane) and stores the row at once,
// instead of a thread per element with 2-byte stores and the index decomposed per
// element. nullopt where the rows are not such vectors.
std::optional<KernelLaunch> PadRowsKernel(const Shape& shape, const Shape& oshape, const std::vector<int64_t>& begin,
                                          const MovementView& src, DType dt, DType src_dtype, int in_arg,
                                          int64_t in_numel, const std::string& fill_value, const std::string& what) {
  const int64_t rank = static_cast<int64_t>(oshape.size());
  if (rank < 2) return std::nullopt;
  const int64_t len = oshape[rank - 1], bytes = len * static_cast<int64_t>(DTypeSize(dt));
  if (len < 2 || (bytes != 4 && bytes != 8 && bytes != 16)) return std::nullopt;
  const int64_t n = NumElements(oshape), rows = n / len;
  if (rows == 0) return std::nullopt;
  const char* it = IndexType(std::max(n, in_numel));
  std::string body = absl::StrCat(it, " r_ = i;\n", it, " src = ", src.offset, ";\nbool inside = true;\n");
  for (int64_t d = rank - 2; d >= 0; --d) {
    absl::StrAppend(&body, "{\n", it, " j = r_ % ", oshape[d], ";\nr_ /= ", oshape[d], ";\n", it, " s = j - (",
                    begin[d], ");\ninside = inside && s >= 0 && s < ", shape[d], ";\nsrc += s * ", src.strides[d],
                    ";\n}\n");
  }
  const std::string at = absl::StrCat("src + s * ", src.strides[rank - 1]);
  const std::string copy = dt == src_dtype
                               ? absl::StrCat("v.v[e] = in[", at, "];")
                               : StoreFrom(dt, Domain::kFloat, "v.v", "e", LoadAs(src_dtype, Domain::kFloat, "in", at));
  absl::StrAppend(&body, "kiln_vec_pack<", StorageTypeName(dt), ", ", len, "> v;\n#pragma unroll\nfor (int e = 0; e < ",
                  len, "; ++e) {\nconst ", it, " s = e - (", begin[rank - 1], ");\nif (inside && s >= 0 && s < ",
                  shape[rank - 1], ") ", copy, " else ", StoreFrom(dt, Domain::kFloat, "v.v", "e", fill_value),
                  "\n}\nif (kiln_vec_aligned(out, ", bytes, ")) kiln_vec_st<", len, ">(out + i * ", len,
                  ", v);\nelse for (int e = 0; e < ", len, "; ++e) out[i * ", len, " + e] = v.v[e];\n");
  KernelLaunch l;
  l.args = {0, in_arg};
  l.source = absl::StrCat("// ", what, " (a thread per row of ", len, ")\n", TemplateSource("vector.cuh"),
                          "extern \"C\" __global__ void KILN_KERNEL(", Param(dt, false, "out"), ", ",
                          Param(src_dtype, true, "in"), ") {\n", GridStrideLoop(absl::StrCat("(", it, ")", rows), it),
                          body, "}\n}\n");
  SetGrid1D(l, rows);
  return l;
}

// Pad `node` reading its data input through `src` (strides over the input's shape,
// an offset) from the kernel argument `in_arg` of dtype `src_dtype` (converted through
// float when it is not the output's), `in_numel` elements.
absl::StatusOr<std::vector<KernelLaunch>> PadKernel(const Node& node, const MovementView& src, DType src_dtype,
                                                    int in_arg, int64_t in_numel, const std::string& what) {
  auto pads = ConstantInts(node, 1, "pads");
  if (!pads.ok()) return pads.status();
  auto mode = node.GetString("mode", "constant");
  if (!mode.ok()) return mode.status();
  if (*mode != "constant" && *mode != "edge" && *mode != "reflect" && *mode != "wrap") {
    return NoKernel(node, absl::StrCat("mode ", *mode));
  }
  const Shape& shape = node.input(0)->shape();
  const Shape& oshape = node.output(0)->shape();
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> axes;
  if (node.has_input(3)) {
    auto a = ConstantInts(node, 3, "axes");
    if (!a.ok()) return a.status();
    axes = *a;
  } else {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  const size_t na = axes.size();
  if (pads->size() != 2 * na) return NoKernel(node, "pads size");
  std::vector<int64_t> begin(rank, 0), end(rank, 0);
  for (size_t i = 0; i < na; ++i) {
    const int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    begin[a] = (*pads)[i];
    end[a] = (*pads)[na + i];
  }
  const DType dt = node.output(0)->dtype();
  if (dt != src_dtype && !(IsFloating(dt) && IsFloating(src_dtype))) return NoKernel(node, "a conversion not between floats");
  const int64_t n = node.output(0)->numel();
  // A dynamic graph's Pad (issue 34): the outermost dim (the batch), unpadded, may vary;
  // the element count is then read from kiln_dims.
  KILN_ASSIGN_OR_RETURN(std::optional<DimExpr> dynamic_n, VaryingOutermostDim(node, *node.output(0)));
  if (dynamic_n) {
    if (begin[0] != 0 || end[0] != 0) return NoKernel(node, "a Pad of the dim that varies");
    dynamic_n = DimsProduct(ValueDims(*node.output(0)));
  }
  if (*mode == "constant" && !dynamic_n && IsFloating(dt) && (!node.has_input(2) || node.input(2)->is_constant())) {
    const std::string fill_value = node.has_input(2) ? FloatLit(node.input(2)->constant().ScalarFloat()) : "0.f";
    std::optional<KernelLaunch> rows =
        PadRowsKernel(shape, oshape, begin, src, dt, src_dtype, in_arg, in_numel, fill_value, what);
    if (rows) return std::vector<KernelLaunch>{*std::move(rows)};
  }
  const char* it = IndexType(std::max(n, in_numel));
  const std::vector<int64_t>& in_strides = src.strides;
  KernelLaunch l;
  l.args = {0, in_arg};
  std::string params = absl::StrCat(Param(dt, false, "out"), ", ", Param(src_dtype, true, "in"));
  std::string fill;
  const bool constant = *mode == "constant";
  if (constant) {
    if (!node.has_input(2)) {
      fill = absl::StrCat("out[i] = (", StorageTypeName(dt), ")0;");
    } else if (node.input(2)->is_constant()) {
      const Tensor& c = node.input(2)->constant();
      fill = IsFloating(dt) ? StoreFrom(dt, Domain::kFloat, "out", "i", FloatLit(c.ScalarFloat()))
                            : StoreFrom(dt, Domain::kInt, "out", "i", IntLit(c.ScalarInt64()));
    } else {
      absl::StrAppend(&params, ", ", Param(dt, true, "cv"));
      l.args.push_back(InputArg(node, 2));
      fill = "out[i] = cv[0];";
    }
  }
  std::string body = absl::StrCat(it, " r_ = i;\n", it, " src = 0;\nbool inside = true;\n");
  for (int64_t d = rank - 1; d >= 0; --d) {
    if (dynamic_n && d == 0) {  // the outermost index is what is left
      absl::StrAppend(&body, "{\n", it, " j = r_;\n");
    } else {
      absl::StrAppend(&body, "{\n", it, " j = r_ % ", oshape[d], ";\nr_ /= ", oshape[d], ";\n");
    }
    if (constant) {
      absl::StrAppend(&body, it, " s = j - (", begin[d], ");\ninside = inside && s >= 0 && s < ", shape[d], ";\n");
    } else {
      const int64_t lo = std::max<int64_t>(0, -begin[d]);
      const int64_t len = shape[d] - lo - std::max<int64_t>(0, -end[d]);
      const int64_t pb = std::max<int64_t>(0, begin[d]);
      absl::StrAppend(&body, it, " s = j - ", pb, ";\n");
      if (*mode == "edge") {
        absl::StrAppend(&body, "s = s < 0 ? 0 : (s > ", len - 1, " ? ", len - 1, " : s);\n");
      } else if (*mode == "wrap") {
        absl::StrAppend(&body, "s %= ", len, ";\nif (s < 0) s += ", len, ";\n");
      } else if (len == 1) {
        absl::StrAppend(&body, "s = 0;\n");
      } else {
        absl::StrAppend(&body, "s %= ", 2 * (len - 1), ";\nif (s < 0) s += ", 2 * (len - 1), ";\nif (s >= ", len,
                        ") s = ", 2 * (len - 1), " - s;\n");
      }
      absl::StrAppend(&body, "s += ", lo, ";\n");
    }
    absl::StrAppend(&body, "src += s * ", in_strides[d], ";\n}\n");
  }
  const std::string at = src.offset == 0 ? "src" : absl::StrCat(src.offset, " + src");
  const std::string copy = dt == src_dtype ? absl::StrCat("out[i] = in[", at, "];")
                                           : StoreFrom(dt, Domain::kFloat, "out", "i", LoadAs(src_dtype, Domain::kFloat, "in", at));
  absl::StrAppend(&body, constant ? absl::StrCat("if (inside) ", copy, " else ", fill, "\n") : copy + "\n");
  if (dynamic_n) {
    absl::StrAppend(&params, ", const kiln_dims kiln_dims_");
    l.source = absl::StrCat("// ", what, " (sizes at run time)\nextern \"C\" __global__ void KILN_KERNEL(", params,
                            ") {\n", GridStrideLoop(absl::StrCat("(", it, ")", DimCode(*dynamic_n)), it), body,
                            "}\n}\n");
    SetGrid1D(l, n);
    SetDynamicGrid1D(l, *dynamic_n, kBlock);
    return std::vector<KernelLaunch>{std::move(l)};
  }
  l.source = absl::StrCat("// ", what, "\nextern \"C\" __global__ void KILN_KERNEL(", params, ") {\n", GridStrideLoop(n),
                          body, "}\n}\n");
  SetGrid1D(l, n);
  return std::vector<KernelLaunch>{std::move(l)};
}

// A Pad node reading its data input densely.
absl::StatusOr<std::vector<KernelLaunch>> PadOp(const Node& node) {
  return PadKernel(node, MovementView{DenseStrides(node.input(0)->shape()), 0}, node.input(0)->dtype(),
                     InputArg(node, 0), node.input(0)->numel(), absl::StrCat("Pad ", node.output(0)->TypeString()));
}

// DepthToSpace / SpaceToDepth: one strided copy, the output seen as a 6-D space (the
// reference's views, graph/ops/depth_to_space.cc and space_to_depth.cc).
absl::StatusOr<std::vector<KernelLaunch>> BlockMove(const Node& node) {
  auto b_attr = node.GetInt("blocksize");
  if (!b_attr.ok()) return b_attr.status();
  const int64_t b = *b_attr;
  const Shape& s = node.input(0)->shape();
  Shape space;
  std::vector<int64_t> strides;
  if (node.op_type() == "DepthToSpace") {
    auto mode = node.GetString("mode", "DCR");
    if (!mode.ok()) return mode.status();
    const int64_t n = s[0], c = s[1] / (b * b), h = s[2], w = s[3];
    const bool crd = *mode == "CRD";
    const std::vector<int64_t> st = DenseStrides(crd ? Shape{n, c, b, b, h, w} : Shape{n, b, b, c, h, w});
    strides = crd ? std::vector<int64_t>{st[0], st[1], st[4], st[2], st[5], st[3]}
                  : std::vector<int64_t>{st[0], st[3], st[4], st[1], st[5], st[2]};
    space = {n, c, h, b, w, b};
  } else {
    const int64_t n = s[0], c = s[1], h = s[2] / b, w = s[3] / b;
    const std::vector<int64_t> st = DenseStrides({n, c, h, b, w, b});
    strides = {st[0], st[3], st[5], st[1], st[2], st[4]};
    space = {n, b, b, c, h, w};
  }
  return std::vector<KernelLaunch>{Gather(node, 0, 0, space, strides, 0)};
}

}  // namespace

bool IsMovementOp(absl::string_view op) {
  static const char* const kOps[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout",
                                     "Transpose", "Concat", "Split", "Slice", "Gather", "Pad", "Tile", "Expand",
                                     "DepthToSpace", "SpaceToDepth"};
  for (const char* k : kOps) {
    if (op == k) return true;
  }
  return false;
}

absl::StatusOr<MovementView> ViewOf(const Node& node, const std::vector<int64_t>& in_strides, int64_t in_offset) {
  const std::string& op = node.op_type();
  const Shape& ishape = node.input(0)->shape();
  const Shape& oshape = node.output(0)->shape();
  const int64_t rank = static_cast<int64_t>(ishape.size());
  if (static_cast<int64_t>(in_strides.size()) != rank) return NoKernel(node, "input strides of the wrong rank");
  MovementView view;
  view.offset = in_offset;
  if (op == "Transpose") {
    std::vector<int64_t> dflt(rank);
    for (int64_t i = 0; i < rank; ++i) dflt[i] = rank - 1 - i;
    auto perm = node.GetInts("perm", dflt);
    if (!perm.ok()) return perm.status();
    if (static_cast<int64_t>(perm->size()) != rank) return NoKernel(node, "bad perm");
    view.strides.resize(rank);
    for (int64_t i = 0; i < rank; ++i) view.strides[i] = in_strides[(*perm)[i] < 0 ? (*perm)[i] + rank : (*perm)[i]];
    return view;
  }
  if (op == "Expand") {
    view.strides.assign(oshape.size(), 0);
    const size_t lead = oshape.size() - ishape.size();
    for (size_t d = 0; d < ishape.size(); ++d) view.strides[lead + d] = ishape[d] == 1 ? 0 : in_strides[d];
    return view;
  }
  if (op == "Slice") {
    auto plan = kiln::ops::ConstantSlicePlan(node);
    if (!plan.ok()) return NoKernel(node, std::string(plan.status().message()));
    view.strides.resize(rank);
    for (int64_t d = 0; d < rank; ++d) {
      if ((*plan)[d].count != oshape[d]) return NoKernel(node, "slice plan disagrees with the output shape");
      view.offset += (*plan)[d].start * in_strides[d];
      view.strides[d] = (*plan)[d].step * in_strides[d];
    }
    return view;
  }
  return NoKernel(node, "not a strided view of its input");
}

absl::StatusOr<MovementView> ViewOf(const Node& node) {
  return ViewOf(node, DenseStrides(node.input(0)->shape()), 0);
}

namespace {

// A movement op of a dynamic graph (issue 34): output element i is the input's at
// strides over expressions (a Transpose's permuted dense strides, an Expand's
// broadcast, a copy's dense ones), through the element-wise kernel with run-time sizes.
absl::StatusOr<std::vector<KernelLaunch>> DynamicMovement(const Node& node) {
  const std::string& op = node.op_type();
  const Value* in = node.input(0);
  const Value* out = node.output(0);
  EwKernel k;
  k.comment = absl::StrCat(op, " ", out->TypeString());
  k.shape = out->shape();
  k.dims = ValueDims(*out);
  EwOperand src{"in", in->dtype(), DomainOf(in->dtype()), "v", {}};
  const std::vector<DimExpr> in_dims = ValueDims(*in);
  if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity") {
    k.dims = {DimsProduct(in_dims)};  // one flat copy of every element
    k.shape = {out->numel()};
    src.dim_strides = {DimExpr::Constant(1)};
  } else if (op == "Transpose") {
    const int64_t rank = static_cast<int64_t>(in_dims.size());
    std::vector<int64_t> dflt(rank);
    for (int64_t i = 0; i < rank; ++i) dflt[i] = rank - 1 - i;
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> perm, node.GetInts("perm", dflt));
    const std::vector<DimExpr> dense = DenseDimStrides(in_dims);
    if (static_cast<int64_t>(perm.size()) != rank) return NoKernel(node, "bad perm");
    for (int64_t p : perm) src.dim_strides.push_back(dense[p < 0 ? p + rank : p]);
  } else if (op == "Slice") {
    return DynamicSlice(node);
  } else if (op == "Concat") {
    return DynamicConcat(node);
  } else if (op == "Gather") {
    return GatherOp(node);
  } else if (op == "Pad") {
    return PadOp(node);
  } else if (op == "Expand") {
    if (!DynamicBroadcastStrides(in_dims, k.dims, &src.dim_strides)) {
      return NoKernel(node, "an input that does not broadcast to the output for every size in the dim ranges");
    }
  } else {
    return NoKernel(node, "sizes that vary with the dim ranges (no kernel with run-time sizes for this op yet)");
  }
  src.strides.assign(k.shape.size(), 0);  // unused: the dim strides are read
  k.operands.push_back(std::move(src));
  k.outputs.push_back({"out", out->dtype(), DomainOf(out->dtype()), "v"});
  KernelLaunch l = EmitElementwiseKernel(k);
  l.args = {0, InputArg(node, 0)};
  return std::vector<KernelLaunch>{std::move(l)};
}

}  // namespace

absl::StatusOr<std::vector<KernelLaunch>> GenerateMovement(const Node& node) {
  const std::string& op = node.op_type();
  if (HasDynamicValues(node)) return DynamicMovement(node);
  const Value* out = node.output(0);
  const Shape& oshape = out->shape();
  if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity" ||
      op == "Dropout") {
    if (op == "Dropout" && node.has_input(2)) {
      const Value* tm = node.input(2);
      if (!tm->is_constant() || tm->constant().ScalarFloat() != 0.f) return NoKernel(node, "training_mode");
    }
    const Shape flat = {out->numel()};
    std::vector<KernelLaunch> ls = {Gather(node, 0, 0, flat, {1}, 0)};
    if (op == "Dropout" && node.num_outputs() > 1) {
      KernelLaunch m;
      const int64_t n = node.output(1)->numel();
      m.args = {1};
      m.source = absl::StrCat("// Dropout mask\nextern \"C\" __global__ void KILN_KERNEL(",
                              Param(DType::kBool, false, "mask"), ") {\n", GridStrideLoop(n), "mask[i] = 1;\n}\n}\n");
      SetGrid1D(m, n);
      ls.push_back(std::move(m));
    }
    return ls;
  }
  if (op == "Transpose" || op == "Expand" || op == "Slice") {
    absl::StatusOr<MovementView> view = ViewOf(node);
    if (!view.ok()) return view.status();
    return std::vector<KernelLaunch>{Gather(node, 0, 0, oshape, view->strides, view->offset)};
  }
  if (op == "Tile") {
    const Shape& ishape = node.input(0)->shape();
    const std::vector<int64_t> s = DenseStrides(ishape);
    Shape space;
    std::vector<int64_t> strides;
    for (size_t d = 0; d < ishape.size(); ++d) {
      space.push_back(ishape[d] == 0 ? 0 : oshape[d] / ishape[d]);
      strides.push_back(0);
      space.push_back(ishape[d]);
      strides.push_back(s[d]);
    }
    return std::vector<KernelLaunch>{Gather(node, 0, 0, space, strides, 0)};
  }
  if (op == "Concat" || op == "Split") return ConcatOrSplit(node);
  if (op == "Gather") return GatherOp(node);
  if (op == "Pad") return PadOp(node);
  if (op == "DepthToSpace" || op == "SpaceToDepth") return BlockMove(node);
  return NoKernel(node, "");
}

namespace {

// Where a group body's value `v` is read from: the group input its chain of strided
// views starts at, and the strides and offset composed along the chain (with
// `through_casts`, the chain's element-wise Casts keep the strides; without, a Cast
// is no view and refused). The body's inputs are `input_index`'s keys.
struct GroupInputView {
  const Value* source = nullptr;  // the body input the chain starts at
  int input = 0;                  // its index among the group's inputs
  MovementView view;
  bool direct = true;  // `v` is that input itself
};

absl::StatusOr<GroupInputView> ReadThroughViews(const Node& group,
                                                const absl::flat_hash_map<const Value*, int>& input_index,
                                                const Value* v, bool through_casts) {
  std::vector<const Node*> chain;  // nearest `v` first
  while (!input_index.contains(v)) {
    const Node* n = v->producer();
    if (n == nullptr) return NoKernel(group, "a copied value with no source in the group");
    chain.push_back(n);
    v = n->input(0);
  }
  GroupInputView out{v, input_index.at(v), MovementView{DenseStrides(v->shape()), 0}, chain.empty()};
  for (auto n = chain.rbegin(); n != chain.rend(); ++n) {
    if (through_casts && (*n)->op_type() == "Cast") continue;
    absl::StatusOr<MovementView> next = ViewOf(**n, out.view.strides, out.view.offset);
    if (!next.ok()) return next.status();
    out.view = *std::move(next);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<KernelLaunch>> GenerateConcatGroup(const Node& group) {
  absl::StatusOr<std::shared_ptr<const Graph>> body_or = FusedGroupBody(group);
  if (!body_or.ok()) return NoKernel(group, std::string(body_or.status().message()));
  const Graph& body = **body_or;
  if (group.num_outputs() != 1 || body.outputs().size() != 1) return NoKernel(group, "concat group with several outputs");
  const Node* concat = body.outputs()[0]->producer();
  if (concat == nullptr || concat->op_type() != "Concat") return NoKernel(group, "concat group not ending in a Concat");
  absl::flat_hash_map<const Value*, int> input_index;
  for (size_t i = 0; i < body.inputs().size(); ++i) input_index[body.inputs()[i]] = static_cast<int>(i);
  const Value* out = group.output(0);
  const Shape& oshape = out->shape();
  const int64_t rank = static_cast<int64_t>(oshape.size());
  absl::StatusOr<int64_t> axis_attr = concat->GetInt("axis");
  if (!axis_attr.ok()) return axis_attr.status();
  const int64_t axis = *axis_attr < 0 ? *axis_attr + rank : *axis_attr;
  if (axis < 0 || axis >= rank) return NoKernel(group, "Concat axis out of range");
  const std::vector<int64_t> dst = DenseStrides(oshape);
  std::vector<KernelLaunch> launches;
  int64_t at = 0;  // the part's first index along the axis
  for (int p = 0; p < concat->num_inputs(); ++p) {
    absl::StatusOr<GroupInputView> src = ReadThroughViews(group, input_index, concat->input(p), false);
    if (!src.ok()) return src.status();
    const int in = src->input;
    const Shape& part = concat->input(p)->shape();
    if (NumElements(part) > 0) {
      launches.push_back(StridedCopy(out->dtype(), part, dst, at * dst[axis], src->view.strides, src->view.offset, 0,
                                     InputArg(group, in), std::max(out->numel(), group.input(in)->numel()),
                                     absl::StrCat("concat group ", group.name(), " part ", p, " ",
                                                  concat->input(p)->TypeString(),
                                                  src->direct ? "" : absl::StrCat(" read from ", src->source->TypeString()))));
    }
    at += part[axis];
  }
  return launches;
}

absl::StatusOr<std::vector<KernelLaunch>> GeneratePadGroup(const Node& group) {
  absl::StatusOr<std::shared_ptr<const Graph>> body_or = FusedGroupBody(group);
  if (!body_or.ok()) return NoKernel(group, std::string(body_or.status().message()));
  const Graph& body = **body_or;
  if (group.num_outputs() != 1 || body.outputs().size() != 1) return NoKernel(group, "pad group with several outputs");
  const Node* pad = body.outputs()[0]->producer();
  if (pad == nullptr || pad->op_type() != "Pad") return NoKernel(group, "pad group not ending in a Pad");
  // A computed fill value would be a kernel argument of the group, not of the Pad.
  if (pad->has_input(2) && !pad->input(2)->is_constant()) return NoKernel(group, "a pad group's fill value is computed");
  absl::flat_hash_map<const Value*, int> input_index;
  for (size_t i = 0; i < body.inputs().size(); ++i) input_index[body.inputs()[i]] = static_cast<int>(i);
  absl::StatusOr<GroupInputView> src = ReadThroughViews(group, input_index, pad->input(0), true);
  if (!src.ok()) return src.status();
  const int in = src->input;
  return PadKernel(*pad, src->view, src->source->dtype(), InputArg(group, in), group.input(in)->numel(),
                   absl::StrCat("pad group ", group.name(), ": ", pad->output(0)->TypeString(), " read from ",
                                src->source->TypeString()));
}

}  // namespace kiln::codegen::ops
