// Vendor-library kernels: which call a node gets (LibraryKernelName) and the call
// planned on the device (CreateLibraryKernel). The plans are in library_plans.cc,
// the cuBLASLt and cuDNN kernels in cublaslt_kernel.cc and cudnn_kernel.cc.
#include "codegen/library_kernels.h"

#include "absl/strings/str_cat.h"
#include "codegen/library_plans.h"
#include "graph/fused_group.h"

namespace kiln::codegen {

std::string LibraryKernelName(const Node& node) {
  if (IsFusedGroup(node)) {
    if (libplan::PlanFusedMatMul(node).ok()) return "cublaslt:FusedMatMul";
    if (libplan::PlanFusedConv(node).ok()) return "cudnn:FusedConv";
    return "";
  }
  if (node.op_type() == "MatMul") return libplan::PlanMatMul(node).ok() ? "cublaslt:MatMul" : "";
  if (node.op_type() == "Gemm") return libplan::PlanGemm(node).ok() ? "cublaslt:Gemm" : "";
  if (node.op_type() == "Conv") return libplan::PlanConv(node).ok() ? "cudnn:Conv" : "";
  return "";
}

absl::StatusOr<std::unique_ptr<LibraryKernel>> CreateLibraryKernel(const Node& node, const LibraryHandles& handles) {
  const std::string where = absl::StrCat(node.Describe(), " [", libplan::ShapesOf(node), "]");
  if (IsFusedGroup(node)) {
    absl::StatusOr<libplan::GemmPlan> gemm = libplan::PlanFusedMatMul(node);
    if (gemm.ok()) {
      if (handles.cublaslt == nullptr) return absl::FailedPreconditionError(absl::StrCat(where, ": no cuBLASLt handle"));
      return libplan::MakeCublasLtKernel(where, *gemm, handles.cublaslt);
    }
    absl::StatusOr<libplan::ConvPlan> conv = libplan::PlanFusedConv(node);
    if (conv.ok()) {
      if (handles.cudnn == nullptr) return absl::FailedPreconditionError(absl::StrCat(where, ": no cuDNN handle"));
      absl::StatusOr<std::unique_ptr<LibraryKernel>> kernel = libplan::MakeCudnnConvKernel(where, *conv, handles.cudnn);
      if (!kernel.ok() && kernel.status().code() != absl::StatusCode::kUnimplemented) {
        return absl::UnimplementedError(kernel.status().message());
      }
      return kernel;
    }
    absl::StatusOr<std::string> pattern = node.GetString("pattern", "");
    return pattern.ok() && *pattern == "conv+epilogue" ? conv.status() : gemm.status();
  }
  if (node.op_type() == "MatMul" || node.op_type() == "Gemm") {
    absl::StatusOr<libplan::GemmPlan> plan = node.op_type() == "MatMul" ? libplan::PlanMatMul(node) : libplan::PlanGemm(node);
    if (!plan.ok()) return plan.status();
    if (handles.cublaslt == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(where, ": no cuBLASLt handle"));
    }
    return libplan::MakeCublasLtKernel(where, *plan, handles.cublaslt);
  }
  if (node.op_type() == "Conv") {
    absl::StatusOr<libplan::ConvPlan> plan = libplan::PlanConv(node);
    if (!plan.ok()) return plan.status();
    if (handles.cudnn == nullptr) return absl::FailedPreconditionError(absl::StrCat(where, ": no cuDNN handle"));
    return libplan::MakeCudnnConvKernel(where, *plan, handles.cudnn);
  }
  return node.Unsupported("no library kernel for this op");
}

}  // namespace kiln::codegen
