// TMA tensor maps for generated kernels (codegen::TensorMapSpec, the source contract
// in codegen/op_kernels.h) and the one place that turns a KernelLaunch plus device
// addresses into cudaLaunchKernel's argument list: the pointer parameters, then one
// encoded CUtensorMap per spec. The GPU executor, the GEMM tuner, the GEMM GPU tests
// and the GEMM benchmark all launch through LaunchArgs. cuTensorMapEncodeTiled comes
// from the driver entry point cudart hands out (libcuda is never linked).
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/op_kernels.h"

namespace kiln {

// The 128 opaque bytes of a CUtensorMap.
struct alignas(64) EncodedTensorMap {
  unsigned char bytes[128];
};

// Encodes `spec` over the tensor at device address `base`. FailedPrecondition when
// the driver has no cuTensorMapEncodeTiled (no GPU or a driver before CUDA 12);
// InvalidArgument, saying what to change, for a base or stride that is not 16-byte
// aligned, a box over 256 elements or a rank outside 1..5; Internal with the driver's
// error otherwise.
absl::StatusOr<EncodedTensorMap> EncodeTensorMap(const codegen::TensorMapSpec& spec, const void* base);

// The kernel parameters of one launch. `pointer_of(v)` is the device address of
// value v as `args` and TensorMapSpec::tensor number them (output v, or input v -
// num_outputs). Movable; params() stays valid across moves.
class LaunchArgs {
 public:
  static absl::StatusOr<LaunchArgs> Build(const codegen::KernelLaunch& launch,
                                          const std::function<void*(int)>& pointer_of);
  // cudaLaunchKernel's `args`.
  void** params() { return params_.data(); }
  const std::vector<void*>& pointers() const { return pointers_; }

 private:
  std::vector<void*> pointers_;
  std::vector<EncodedTensorMap> maps_;
  std::vector<void*> params_;
};

}  // namespace kiln
