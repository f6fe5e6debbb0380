// Placeholder until the cuBLASLt / cuDNN kernels land.
#include "codegen/library_kernels.h"

#include "absl/strings/str_cat.h"

namespace kiln::codegen {

std::string LibraryKernelName(const Node& node) { return ""; }

absl::StatusOr<std::unique_ptr<LibraryKernel>> CreateLibraryKernel(const Node& node, const LibraryHandles& handles) {
  return absl::UnimplementedError(absl::StrCat("no library kernel for ", node.op_type()));
}

}  // namespace kiln::codegen
