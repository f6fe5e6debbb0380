// Small CUDA runtime helpers shared by the GPU executor, the compiler and the tools:
// error conversion to absl::Status and local GPU discovery. Only cudart is linked
// (never libcuda), so every kiln binary starts on a machine without a GPU or driver;
// these functions then report "no GPU" instead of failing to load.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln {

// OK for cudaSuccess (0); otherwise ResourceExhausted for out-of-memory and Internal
// for the rest, with "<what>: <cuda error name>: <description>".
absl::Status CudaStatus(int cuda_error, absl::string_view what);

struct GpuInfo {
  int device = 0;
  std::string name;          // "NVIDIA H100 80GB HBM3"
  int major = 0, minor = 0;  // compute capability
  int64_t memory_bytes = 0;
  int sm_count = 0;
  std::string arch;  // the --arch kiln targets on it ("sm_90a"...), "" if none
};

// The current CUDA device. FailedPrecondition ("no CUDA GPU: ...") when there is no
// driver or no device.
absl::StatusOr<GpuInfo> LocalGpu();
bool HasGpu();

// Bytes of the current device's memory in use (by every process), from
// cudaMemGetInfo: the difference across an allocation tells what it took.
absl::StatusOr<int64_t> DeviceMemoryInUse();

// The kiln arch for a compute capability: 9.0 -> sm_90a, 8.9 -> sm_89, 8.6 -> sm_86,
// 8.0 -> sm_80; "" for anything else.
std::string ArchForComputeCapability(int major, int minor);

}  // namespace kiln
