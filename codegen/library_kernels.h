// Vendor-library kernels for the unfused baseline: MatMul and Gemm through cuBLASLt,
// Conv through cuDNN. The same decision (`LibraryKernelName`) is made at compile
// time, on a machine without a GPU, and the library call is planned when a GPU
// session is created (algorithm choice is device-specific, so it is not stored in
// the bundle).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

// Opaque CUDA / library handle types, so that this header needs no CUDA headers.
typedef struct CUstream_st* cudaStream_t;
typedef struct cublasLtContext* cublasLtHandle_t;
typedef struct cudnnContext* cudnnHandle_t;

namespace kiln::codegen {

// "cublaslt:MatMul", "cublaslt:Gemm", "cudnn:Conv" when kiln runs `node` (static
// shapes, storage dtypes) through a library; "" otherwise (then GenerateNodeKernels
// is asked). Pure function of the node: no GPU needed.
std::string LibraryKernelName(const Node& node);

struct LibraryHandles {
  cublasLtHandle_t cublaslt = nullptr;
  cudnnHandle_t cudnn = nullptr;
};

// Device pointers of one launch: outputs and inputs in the node's order
// (nullptr for absent optional inputs), and scratch memory.
struct LibraryLaunchArgs {
  std::vector<void*> outputs;
  std::vector<const void*> inputs;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
};

class LibraryKernel {
 public:
  virtual ~LibraryKernel() = default;
  // Scratch bytes Launch needs (the session allocates the maximum over its steps).
  virtual size_t workspace_bytes() const = 0;
  // Enqueues the work on args.stream; no synchronisation, no allocation (so that it
  // can be captured into a CUDA graph).
  virtual absl::Status Launch(const LibraryLaunchArgs& args) const = 0;
};

// Plans the library call for `node` on the current device. Errors name the node,
// the op and the library status.
absl::StatusOr<std::unique_ptr<LibraryKernel>> CreateLibraryKernel(const Node& node, const LibraryHandles& handles);

}  // namespace kiln::codegen
