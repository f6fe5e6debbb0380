// TMA tensor maps for generated kernels (codegen::TensorMapSpec, the source contract
// in codegen/kernel_launch.h) and the one place that turns a KernelLaunch plus device
// addresses into cudaLaunchKernel's argument list: the pointer parameters, then one
// encoded CUtensorMap per spec, then the workspace pointers of a launch that has one.
// The GPU executor, the GEMM tuner, the GEMM GPU tests and the GEMM benchmark all
// launch through LaunchArgs. cuTensorMapEncodeTiled comes from the driver entry point
// cudart hands out (libcuda is never linked).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/kernel_launch.h"

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

// The two workspace areas a runner gives its launches (codegen/kernel_launch.h,
// "Workspace"): `semaphore_count` uint32 counters, zero between launches, and
// `scratch_bytes` bytes of scratch.
struct LaunchWorkspace {
  void* semaphores = nullptr;
  uint32_t semaphore_count = 0;
  void* scratch = nullptr;
  uint64_t scratch_bytes = 0;
};

// The kernel parameters of one launch. `pointer_of(v)` is the device address of
// value v as `args` and TensorMapSpec::tensor number them (output v, or input v -
// num_outputs). A launch with a workspace (KernelLaunch::semaphores or
// scratch_bytes non-zero) gets `workspace`'s two pointers as its last parameters;
// FailedPrecondition, naming both sizes, when `workspace` is smaller than it asks.
// A launch with `dim_param` takes `dims` last, read when the kernel is launched (the
// caller keeps it alive and sets it before each launch); FailedPrecondition when it is
// null. Movable; params() stays valid across moves.
class LaunchArgs {
 public:
  static absl::StatusOr<LaunchArgs> Build(const codegen::KernelLaunch& launch,
                                          const std::function<void*(int)>& pointer_of,
                                          const LaunchWorkspace& workspace = {},
                                          const codegen::KernelDims* dims = nullptr);
  // cudaLaunchKernel's `args`.
  void** params() { return params_.data(); }
  const std::vector<void*>& pointers() const { return pointers_; }

 private:
  std::vector<void*> pointers_;  // the tensors', then the workspace's (when taken)
  std::vector<EncodedTensorMap> maps_;
  std::vector<void*> params_;
};

// Device memory for LaunchWorkspace: Reserve() grows the areas to at least the given
// sizes (the semaphores zeroed with cudaMemset, synchronously); view() describes them.
// For runners of a few launches (the tuner, tests, benchmarks); the GPU executor sizes
// its areas once per session. Growing frees the old areas: no launch may be in flight
// then, and LaunchArgs built before hold the old addresses.
class DeviceWorkspace {
 public:
  DeviceWorkspace() = default;
  ~DeviceWorkspace();
  DeviceWorkspace(const DeviceWorkspace&) = delete;
  DeviceWorkspace& operator=(const DeviceWorkspace&) = delete;
  absl::Status Reserve(uint32_t semaphores, uint64_t scratch_bytes);
  // Reserve() for what `launch` asks.
  absl::Status ReserveFor(const codegen::KernelLaunch& launch);
  LaunchWorkspace view() const { return view_; }

 private:
  LaunchWorkspace view_;
};

}  // namespace kiln
