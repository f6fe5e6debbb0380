// Placeholder until the generators land: no op has a generated kernel yet.
#include "codegen/op_kernels.h"

#include "absl/strings/str_cat.h"

namespace kiln::codegen {

const char* StorageTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float";
    case DType::kFloat16: return "kiln_f16";
    case DType::kBFloat16: return "kiln_bf16";
    case DType::kInt64: return "kiln_i64";
    case DType::kInt32: return "kiln_i32";
    case DType::kInt8: return "kiln_i8";
    case DType::kUInt8: return "kiln_u8";
    case DType::kBool: return "kiln_bool";
  }
  return "void";
}

absl::StatusOr<std::vector<KernelLaunch>> GenerateNodeKernels(const Node& node) {
  return absl::UnimplementedError(absl::StrCat("no generated GPU kernel for ", node.op_type()));
}

}  // namespace kiln::codegen
