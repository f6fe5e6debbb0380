// Shared helpers of the per-node kernel generators.
#include "codegen/ops/kernel_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

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
  return absl::StrCat("for (", t, " ", var, " = (", t, ")blockIdx.x * blockDim.x + threadIdx.x; ", var, " < (", t,
                      ")", n, "; ", var, " += (", t, ")gridDim.x * blockDim.x) {\n");
}

absl::Status NoKernel(const Node& node, const std::string& form) {
  return absl::UnimplementedError(absl::StrCat("no generated GPU kernel for ", node.op_type(),
                                               form.empty() ? "" : absl::StrCat(" (", form, ")"), " (node '",
                                               node.name(), "')"));
}

}  // namespace kiln::codegen::ops
