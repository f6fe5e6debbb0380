// Shared by codegen's GPU tests: CUDA error assertions and the device probe that
// decides whether a test runs (and for which arch) or skips with the reason.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"

// ASSERT that a CUDA runtime call succeeded, naming the call and the error.
#define KILN_CUDA_OK(expr)                                                     \
  do {                                                                         \
    const cudaError_t kiln_cuda_e_ = (expr);                                   \
    ASSERT_EQ(kiln_cuda_e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(kiln_cuda_e_); \
  } while (0)

namespace kiln::codegen::test {

// The kiln arch of device 0 ("sm_90a", "sm_89", "sm_86", "sm_80"), or "" with
// `why_not` set when there is no usable GPU (tests then GTEST_SKIP with it).
inline std::string DeviceArch(std::string* why_not) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    *why_not = absl::StrCat("no CUDA GPU (", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices", ")");
    return "";
  }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    *why_not = "cudaGetDeviceProperties failed";
    return "";
  }
  if (prop.major == 9 && prop.minor == 0) return "sm_90a";
  if (prop.major == 8 && (prop.minor == 0 || prop.minor == 6 || prop.minor == 9)) {
    return absl::StrCat("sm_8", prop.minor);
  }
  *why_not = absl::StrCat("no kiln arch for compute capability ", prop.major, ".", prop.minor);
  return "";
}

// Device 0's name, for test logs.
inline std::string DeviceName() {
  cudaDeviceProp prop;
  return cudaGetDeviceProperties(&prop, 0) == cudaSuccess ? std::string(prop.name) : std::string("?");
}

}  // namespace kiln::codegen::test

// Declares `arch` (the device's kiln arch) or skips the test with the reason.
#define KILN_ARCH_OR_SKIP(arch)                       \
  std::string arch_why_not_;                          \
  const std::string arch = ::kiln::codegen::test::DeviceArch(&arch_why_not_); \
  if (arch.empty()) GTEST_SKIP() << "skipped: " << arch_why_not_
