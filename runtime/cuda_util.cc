// CUDA runtime helpers: status conversion and device discovery.
#include "runtime/cuda_util.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"

namespace kiln {

absl::Status CudaStatus(int cuda_error, absl::string_view what) {
  const auto e = static_cast<cudaError_t>(cuda_error);
  if (e == cudaSuccess) return absl::OkStatus();
  const std::string message = absl::StrCat(what, ": ", cudaGetErrorName(e), ": ", cudaGetErrorString(e));
  if (e == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

std::string ArchForComputeCapability(int major, int minor) {
  if (major == 9 && minor == 0) return "sm_90a";
  if (major == 8 && (minor == 0 || minor == 6 || minor == 9)) return absl::StrCat("sm_8", minor);
  return "";
}

absl::StatusOr<GpuInfo> LocalGpu() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA GPU (cudaGetDeviceCount: ", e != cudaSuccess ? cudaGetErrorString(e) : "no device", ")"));
  }
  GpuInfo info;
  if (absl::Status s = CudaStatus(cudaGetDevice(&info.device), "cudaGetDevice"); !s.ok()) return s;
  cudaDeviceProp prop;
  if (absl::Status s = CudaStatus(cudaGetDeviceProperties(&prop, info.device), "cudaGetDeviceProperties"); !s.ok()) {
    return s;
  }
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  info.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  info.sm_count = prop.multiProcessorCount;
  info.arch = ArchForComputeCapability(prop.major, prop.minor);
  return info;
}

bool HasGpu() { return LocalGpu().ok(); }

absl::StatusOr<int64_t> DeviceMemoryInUse() {
  size_t free_bytes = 0, total_bytes = 0;
  if (absl::Status s = CudaStatus(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"); !s.ok()) return s;
  return static_cast<int64_t>(total_bytes - free_bytes);
}

}  // namespace kiln
