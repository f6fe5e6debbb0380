// Shared helpers of the per-node kernel generators.
#include "codegen/ops/kernel_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codegen/templates.h"

namespace kiln::codegen::ops {

std::string FloatLit(float v) {
  if (std::isfinite(v)) return absl::StrFormat("%.9ef", v);
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return absl::StrFormat("__int_as_float(0x%08x)", bits);
}

std::string IntLit(int64_t v) {
  if (v == INT64_MIN) return "(-9223372036854775807LL - 1LL)";
  return absl::StrCat(v, "LL");
}

const char* IndexType(int64_t n) { return n < (int64_t{1} << 31) ? "int" : "kiln_index"; }

const char* FloatSuffix(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return "f16";
    case DType::kBFloat16: return "bf16";
    default: return "f32";
  }
}

Domain DomainOf(DType dtype) { return IsFloating(dtype) ? Domain::kFloat : Domain::kInt; }

const char* DomainType(Domain d) {
  switch (d) {
    case Domain::kFloat: return "float";
    case Domain::kInt: return "kiln_i64";
    case Domain::kBool: return "bool";
  }
  return "float";
}

std::string LoadAs(DType dtype, Domain domain, const std::string& ptr, const std::string& idx) {
  if (IsFloating(dtype)) {
    const std::string f = absl::StrCat("KILN_LOAD_", FloatSuffix(dtype), "(", ptr, ", ", idx, ")");
    switch (domain) {
      case Domain::kFloat: return f;
      case Domain::kInt: return absl::StrCat("((kiln_i64)(", f, "))");
      case Domain::kBool: return absl::StrCat("((", f, ") != 0.f)");
    }
  }
  const std::string raw = absl::StrCat(ptr, "[", idx, "]");
  switch (domain) {
    case Domain::kFloat: return absl::StrCat("((float)", raw, ")");
    case Domain::kInt: return absl::StrCat("((kiln_i64)", raw, ")");
    case Domain::kBool: return absl::StrCat("(", raw, " != 0)");
  }
  return raw;
}

std::string StoreFrom(DType dtype, Domain domain, const std::string& ptr, const std::string& idx,
                      const std::string& value) {
  const std::string at = absl::StrCat(ptr, "[", idx, "]");
  if (IsFloating(dtype)) {
    std::string f = value;
    if (domain != Domain::kFloat) f = absl::StrCat("((float)(", value, "))");
    return absl::StrCat("KILN_STORE_", FloatSuffix(dtype), "(", ptr, ", ", idx, ", ", f, ");");
  }
  const char* t = StorageTypeName(dtype);
  if (dtype == DType::kBool) {
    switch (domain) {
      case Domain::kFloat: return absl::StrCat(at, " = (kiln_bool)((", value, ") != 0.f);");
      default: return absl::StrCat(at, " = (kiln_bool)((", value, ") != 0);");
    }
  }
  switch (domain) {
    case Domain::kFloat:  // PTX cvt.rzi.s64.f32: truncates, saturates, NaN -> 0
      return absl::StrCat(at, " = (", t, ")(kiln_i64)(", value, ");");
    case Domain::kInt: return absl::StrCat(at, " = (", t, ")(", value, ");");
    case Domain::kBool: return absl::StrCat(at, " = (", t, ")((", value, ") ? 1 : 0);");
  }
  return "";
}

std::string Param(DType dtype, bool is_const, const std::string& name) {
  return absl::StrCat(is_const ? "const " : "", StorageTypeName(dtype), "* __restrict__ ", name);
}

void SetGrid1D(KernelLaunch& launch, int64_t n, uint32_t block) {
  const int64_t blocks = std::max<int64_t>(1, (n + block - 1) / block);
  launch.grid = {static_cast<uint32_t>(std::min<int64_t>(blocks, kMaxGrid)), 1, 1};
  launch.block = {block, 1, 1};
}

std::vector<int64_t> DenseStrides(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
  return s;
}

void StridedSpace::Collapse() {
  Shape out_shape;
  std::vector<std::vector<int64_t>> out_strides(strides.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !out_shape.empty();
    for (size_t k = 0; merge && k < strides.size(); ++k) {
      merge = out_strides[k].back() == strides[k][d] * shape[d];
    }
    if (merge) {
      out_shape.back() *= shape[d];
      for (size_t k = 0; k < strides.size(); ++k) out_strides[k].back() = strides[k][d];
    } else {
      out_shape.push_back(shape[d]);
      for (size_t k = 0; k < strides.size(); ++k) out_strides[k].push_back(strides[k][d]);
    }
  }
  shape = std::move(out_shape);
  strides = std::move(out_strides);
}

std::string OffsetCode(const StridedSpace& space, const std::vector<int>& operands, const std::string& i,
                       const std::string& index_type, const std::string& prefix) {
  const std::vector<int64_t> dense = DenseStrides(space.shape);
  std::string decl, body;
  std::vector<int> general;
  for (int k : operands) {
    if (space.strides[k] == dense) {
      absl::StrAppend(&decl, "const ", index_type, " ", prefix, k, " = ", i, ";\n");
    } else {
      absl::StrAppend(&decl, index_type, " ", prefix, k, " = 0;\n");
      general.push_back(k);
    }
  }
  if (general.empty()) return decl;
  const int rank = static_cast<int>(space.shape.size());
  absl::StrAppend(&body, "{\n", index_type, " r_ = ", i, ";\n");
  for (int d = rank - 1; d >= 0; --d) {
    bool used = false;
    for (int k : general) used |= space.strides[k][d] != 0;
    if (d == 0) {
      if (used) absl::StrAppend(&body, "const ", index_type, " c", d, "_ = r_;\n");
    } else {
      if (used) absl::StrAppend(&body, "const ", index_type, " c", d, "_ = r_ % ", space.shape[d], ";\n");
      absl::StrAppend(&body, "r_ /= ", space.shape[d], ";\n");
    }
    for (int k : general) {
      if (space.strides[k][d] != 0) absl::StrAppend(&body, prefix, k, " += c", d, "_ * ", space.strides[k][d], ";\n");
    }
  }
  absl::StrAppend(&body, "}\n");
  return decl + body;
}

std::string GridStrideLoop(int64_t n, const std::string& var) {
  const char* t = IndexType(n);
  return GridStrideLoop(absl::StrCat("(", t, ")", n), t, var);
}

std::string GridStrideLoop(const std::string& count, const char* t, const std::string& var) {
  return absl::StrCat("for (", t, " ", var, " = (", t, ")blockIdx.x * blockDim.x + threadIdx.x; ", var, " < ", count,
                      "; ", var, " += (", t, ")gridDim.x * blockDim.x) {\n");
}

bool BroadcastStrides(const Shape& view, const Shape& shape, std::vector<int64_t>* strides) {
  if (view.size() > shape.size()) return false;
  strides->assign(shape.size(), 0);
  const std::vector<int64_t> dense = DenseStrides(view);
  const size_t lead = shape.size() - view.size();
  for (size_t d = 0; d < view.size(); ++d) {
    if (view[d] != 1 && view[d] != shape[lead + d]) return false;
    (*strides)[lead + d] = view[d] == 1 ? 0 : dense[d];
  }
  return true;
}

std::string LinearOffsetCode(const StridedSpace& space, const std::vector<int>& operands, const std::string& i,
                             const std::string& index_type, const std::string& prefix) {
  const std::vector<int64_t> dense = DenseStrides(space.shape);
  std::string decl;
  std::vector<int> rest;
  for (int k : operands) {
    const std::vector<int64_t>& s = space.strides[k];
    // The multiple c with s == c * dense, if any.
    int64_t c = s.empty() ? 0 : s.back();
    bool linear = true;
    for (size_t d = 0; d < s.size() && linear; ++d) linear = s[d] == c * dense[d];
    if (!linear) {
      rest.push_back(k);
    } else if (c == 0) {
      absl::StrAppend(&decl, "const ", index_type, " ", prefix, k, " = 0;\n");
    } else {
      absl::StrAppend(&decl, "const ", index_type, " ", prefix, k, " = ", i, c == 1 ? "" : absl::StrCat(" * ", c),
                      ";\n");
    }
  }
  if (rest.empty()) return decl;
  return decl + OffsetCode(space, rest, i, index_type, prefix);
}

int MaxVectorWidth(const std::vector<DType>& dtypes) {
  int v = 8;
  for (DType t : dtypes) v = std::min<int>(v, static_cast<int>(16 / std::max<size_t>(1, DTypeSize(t))));
  return std::max(v, 1);
}

namespace {

// Elements per vector for an element-wise space (collapsed; operand 0 = the dense
// outputs): 1 when no vector width fits.
int ElementwiseVectorWidth(const StridedSpace& space, int max_width, bool* flat) {
  const size_t rank = space.shape.size();
  *flat = rank == 1;
  if (rank == 0) return 1;
  for (int v = max_width; v > 1; v /= 2) {
    if (*flat) return v;
    bool ok = space.shape.back() % v == 0;
    for (size_t k = 1; k < space.strides.size() && ok; ++k) {
      const std::vector<int64_t>& s = space.strides[k];
      ok = s.back() == 0 || s.back() == 1;
      // A contiguous operand's vectors start at multiples of v; one broadcast along
      // the innermost dim reads one element per vector, anywhere.
      for (size_t d = 0; d + 1 < rank && ok && s.back() == 1; ++d) ok = s[d] % v == 0;
    }
    if (ok) return v;
  }
  return 1;
}

}  // namespace

std::string ElementwiseLoops(const EwKernel& k, const char* it, int vec, const std::vector<bool>& contiguous,
                             const std::string& vecs_decl, bool tail, const std::string& count,
                             const std::function<std::string(const std::string&)>& offsets) {
  // One element at linear index `i` (the scalar path and the tail).
  auto scalar_element = [&](const std::string& i) {
    std::string s = offsets(i);
    for (size_t l = 0; l < k.operands.size(); ++l) {
      const EwOperand& in = k.operands[l];
      absl::StrAppend(&s, "const ", DomainType(in.domain), " ", in.var, " = ",
                      LoadAs(in.dtype, in.domain, in.param, absl::StrCat("o", l + 1)), ";\n");
    }
    absl::StrAppend(&s, k.code);
    for (const EwOutput& o : k.outputs) absl::StrAppend(&s, StoreFrom(o.dtype, o.domain, o.param, i, o.expr), "\n");
    return s;
  };
  std::string src;
  if (vec > 1) {
    std::string aligned = "true";
    for (const EwOutput& o : k.outputs) {
      absl::StrAppend(&aligned, " && kiln_vec_aligned(", o.param, ", ", vec * DTypeSize(o.dtype), ")");
    }
    // One vector per thread per iteration: one 16-byte access per operand already
    // keeps enough bytes in flight at full occupancy (2048 threads x 16 bytes per
    // SM), and unrolling further would multiply NVRTC's work by the body's size.
    std::string loads, unpack;
    for (size_t l = 0; l < k.operands.size(); ++l) {
      const EwOperand& in = k.operands[l];
      const char* t = StorageTypeName(in.dtype);
      if (contiguous[l]) {
        absl::StrAppend(&aligned, " && kiln_vec_aligned(", in.param, ", ", vec * DTypeSize(in.dtype), ")");
        absl::StrAppend(&loads, "const kiln_vec_pack<", t, ", ", vec, "> p", l, " = kiln_vec_ld<", vec, ">(", in.param,
                        " + o", l + 1, ");\n");
        absl::StrAppend(&unpack, "const ", DomainType(in.domain), " ", in.var, " = ",
                        LoadAs(in.dtype, in.domain, absl::StrCat("p", l, ".v"), "e"), ";\n");
      } else {  // broadcast along the innermost dim: one element per vector
        absl::StrAppend(&loads, "const ", t, " p", l, " = ", in.param, "[o", l + 1, "];\n");
        absl::StrAppend(&unpack, "const ", DomainType(in.domain), " ", in.var, " = ",
                        LoadAs(in.dtype, in.domain, absl::StrCat("(&p", l, ")"), "0"), ";\n");
      }
    }
    std::string stores_decl, stores_put, stores_write;
    for (size_t o = 0; o < k.outputs.size(); ++o) {
      const EwOutput& out = k.outputs[o];
      absl::StrAppend(&stores_decl, "kiln_vec_pack<", StorageTypeName(out.dtype), ", ", vec, "> q", o, ";\n");
      absl::StrAppend(&stores_put, StoreFrom(out.dtype, out.domain, absl::StrCat("q", o, ".v"), "e", out.expr), "\n");
      absl::StrAppend(&stores_write, "kiln_vec_st<", vec, ">(", out.param, " + i, q", o, ");\n");
    }
    absl::StrAppend(&src, "if (", aligned, ") {\n", vecs_decl, "for (", it, " iv = (", it,
                    ")blockIdx.x * blockDim.x + threadIdx.x; iv < kVecs; iv += (", it,
                    ")gridDim.x * blockDim.x) {\nconst ", it, " i = iv * ", vec, ";\n", offsets("i"), loads, stores_decl,
                    "#pragma unroll\nfor (int e = 0; e < ", vec, "; ++e) {\n", unpack, k.code, stores_put, "}\n",
                    stores_write, "}\n");
    if (tail) {
      absl::StrAppend(&src, "// the tail after the last whole vector\n", "for (", it, " i = kVecs * ", vec, " + (", it,
                      ")blockIdx.x * blockDim.x + threadIdx.x; i < ", count, "; i += (", it,
                      ")gridDim.x * blockDim.x) {\n", scalar_element("i"), "}\n");
    }
    absl::StrAppend(&src, "return;\n}\n// unaligned pointers: one element per thread\n");
  }
  // One element per access, four per thread per iteration, strided by the grid so
  // that a warp's accesses stay contiguous: four loads in flight per thread instead
  // of one (a memory-bound kernel of 2-byte loads needs them to approach bandwidth).
  absl::StrAppend(&src, "const ", it, " kStride_ = (", it, ")gridDim.x * blockDim.x;\nfor (", it, " i0_ = (", it,
                  ")blockIdx.x * blockDim.x + threadIdx.x; i0_ < ", count, "; i0_ += ", kScalarUnroll,
                  " * kStride_) {\n#pragma unroll\nfor (int u_ = 0; u_ < ", kScalarUnroll, "; ++u_) {\nconst ", it,
                  " i = i0_ + u_ * kStride_;\nif (i < ", count, ") {\n", scalar_element("i"), "}\n}\n}\n}\n");
  return src;
}

KernelLaunch EmitElementwiseKernel(const EwKernel& k) {
  if (!k.dims.empty()) return EmitDynamicElementwiseKernel(k);
  const int64_t n = NumElements(k.shape);
  StridedSpace space;
  space.shape = k.shape;
  space.strides.push_back(DenseStrides(k.shape));
  std::vector<int> operands;
  std::vector<DType> dtypes;
  for (const EwOutput& o : k.outputs) dtypes.push_back(o.dtype);
  for (size_t i = 0; i < k.operands.size(); ++i) {
    space.strides.push_back(k.operands[i].strides);
    operands.push_back(static_cast<int>(i) + 1);
    dtypes.push_back(k.operands[i].dtype);
  }
  space.Collapse();
  const char* it = IndexType(n);
  bool flat = false;
  const int vec = ElementwiseVectorWidth(space, MaxVectorWidth(dtypes), &flat);
  const uint32_t block = kBlock;

  std::string params;
  for (const EwOutput& o : k.outputs) {
    absl::StrAppend(&params, params.empty() ? "" : ", ", Param(o.dtype, false, o.param));
  }
  for (const EwOperand& in : k.operands) {
    absl::StrAppend(&params, params.empty() ? "" : ", ", Param(in.dtype, true, in.param));
  }
  std::string src = absl::StrCat(TemplateSource("pointwise.cuh"), TemplateSource("vector.cuh"), "\n// ", k.comment,
                                 vec > 1 ? absl::StrCat(" (", vec, " elements per vector)") : "",
                                 "\nextern \"C\" __global__ void __launch_bounds__(", block, ") KILN_KERNEL(", params,
                                 ") {\n");
  for (const EwOperand& in : k.operands) {
    if (in.offset != 0) absl::StrAppend(&src, in.param, " += ", in.offset, ";\n");
  }
  std::vector<bool> contiguous;
  for (size_t l = 0; l < k.operands.size(); ++l) contiguous.push_back(vec > 1 && space.strides[l + 1].back() == 1);
  absl::StrAppend(&src, ElementwiseLoops(k, it, vec, contiguous, absl::StrCat("constexpr ", it, " kVecs = ", n / vec, ";\n"),
                                         flat && vec > 1 && n % vec != 0, absl::StrCat("(", it, ")", n),
                                         [&](const std::string& i) { return LinearOffsetCode(space, operands, i, it, "o"); }));
  KernelLaunch launch;
  launch.source = std::move(src);
  SetGrid1D(launch, vec > 1 ? n / vec : (n + kScalarUnroll - 1) / kScalarUnroll, block);
  return launch;
}

absl::Status NoKernel(const Node& node, const std::string& form) {
  return absl::UnimplementedError(absl::StrCat("no generated GPU kernel for ", node.op_type(),
                                               form.empty() ? "" : absl::StrCat(" (", form, ")"), " (node '",
                                               node.name(), "')"));
}

std::string BatchRowColOffset(const Shape& shape, const std::vector<int64_t>& strides) {
  const size_t r = shape.size();
  std::vector<std::string> terms;
  int64_t inner = 1;
  for (size_t d = r - 2; d-- > 0;) {
    if (strides[d] != 0) {
      terms.push_back(absl::StrCat("(kiln_index)((batch / ", inner, ") % ", shape[d], ") * ", strides[d], "LL"));
    }
    inner *= shape[d];
  }
  if (strides[r - 2] != 0) terms.push_back(absl::StrCat("(kiln_index)row * ", strides[r - 2], "LL"));
  if (strides[r - 1] != 0) terms.push_back(absl::StrCat("(kiln_index)col * ", strides[r - 1], "LL"));
  if (terms.empty()) return std::string("0");
  std::string out;
  for (size_t i = 0; i < terms.size(); ++i) absl::StrAppend(&out, i ? " + " : "", terms[i]);
  return out;
}

std::string FoldedRowColOffset(const Shape& shape, const std::vector<int64_t>& strides) {
  const size_t r = shape.size();
  std::vector<std::string> terms;
  // Walk the row dims from the innermost out, merging a run of dims whose strides are
  // dense over the run into one coordinate of the run's extent.
  size_t d = r - 1;
  int64_t inner = 1;  // rows inside dim d
  while (d-- > 0) {
    const int64_t stride = strides[d];
    int64_t extent = shape[d];
    size_t outer = d;
    while (outer > 0 && stride != 0 && strides[outer - 1] == stride * extent) extent *= shape[--outer];
    while (outer > 0 && stride == 0 && strides[outer - 1] == 0) extent *= shape[--outer];
    if (stride != 0) {
      std::string coord = inner == 1 ? "(kiln_index)row" : absl::StrCat("((kiln_index)row / ", inner, "LL)");
      if (outer > 0) coord = absl::StrCat("(", coord, " % ", extent, "LL)");
      terms.push_back(absl::StrCat(coord, " * ", stride, "LL"));
    }
    inner *= extent;
    d = outer;
  }
  if (strides[r - 1] != 0) terms.push_back(absl::StrCat("(kiln_index)col * ", strides[r - 1], "LL"));
  if (terms.empty()) return std::string("0");
  std::string out;
  for (size_t i = 0; i < terms.size(); ++i) absl::StrAppend(&out, i ? " + " : "", terms[i]);
  return out;
}

}  // namespace kiln::codegen::ops
