// Shared by codegen's GPU tests: CUDA error assertions, the device probe that
// decides whether a test runs (and for which arch) or skips with the reason, and the
// scaffolding that runs one generated launch of a single node against its CPU
// reference (buffers, kernel lookup, error measure).
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/op_kernels.h"
#include "graph/graph.h"
#include "graph/tensor.h"

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

// Uploads `t` into a new device buffer *dev (at least one byte).
inline void Upload(const Tensor& t, void** dev) {
  ASSERT_EQ(cudaMalloc(dev, std::max<size_t>(1, t.nbytes())), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(*dev, t.raw_data(), t.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
}

// A node's buffers for one launch: dev[0] is output 0 (filled with 0xA5 bytes, so
// elements the kernel leaves unwritten show), dev[1 + i] input i (its constant, else
// `feeds` by value name). `inputs` are the host tensors, for EvaluateNode. Call
// Set up through ASSERT_NO_FATAL_FAILURE; the buffers are freed on destruction.
struct NodeBuffers {
  std::vector<void*> dev;
  std::vector<Tensor> host;
  std::vector<const Tensor*> inputs;
  size_t out_bytes = 0;

  void SetUp(const Node& node, const std::map<std::string, Tensor>& feeds) {
    const Value* y = node.output(0);
    out_bytes = y->numel() * DTypeSize(y->dtype());
    dev.assign(1 + node.num_inputs(), nullptr);
    KILN_CUDA_OK(cudaMalloc(&dev[0], std::max<size_t>(1, out_bytes)));
    KILN_CUDA_OK(cudaMemset(dev[0], 0xA5, out_bytes));
    for (int i = 0; i < node.num_inputs(); ++i) {
      const Value* v = node.input(i);
      host.push_back(v->is_constant() ? v->constant() : feeds.at(v->name()));
    }
    for (int i = 0; i < node.num_inputs(); ++i) {
      inputs.push_back(&host[i]);
      ASSERT_NO_FATAL_FAILURE(Upload(host[i], &dev[1 + i]));
    }
  }
  // Output 0 as the kernel left it.
  Tensor Output(const Node& node) const {
    const Value* y = node.output(0);
    Tensor got(y->dtype(), y->shape());
    if (cudaMemcpy(got.mutable_raw_data(), dev[0], out_bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
      ADD_FAILURE() << "copying the output back: " << cudaGetErrorString(cudaGetLastError());
    }
    return got;
  }
  ~NodeBuffers() {
    for (void* p : dev) cudaFree(p);
  }
};

// Kernel `function` of `lib`, allowed `shared_bytes` of dynamic shared memory.
inline void GetKernel(cudaLibrary_t lib, const std::string& function, uint32_t shared_bytes, cudaKernel_t* kernel) {
  KILN_CUDA_OK(cudaLibraryGetKernel(kernel, lib, function.c_str()));
  if (shared_bytes > 48 * 1024) {
    KILN_CUDA_OK(cudaFuncSetAttribute(reinterpret_cast<const void*>(*kernel),
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)));
  }
}

// Launches `l` (pointer parameters only: parameter j is dev[l.args[j]]) on the
// default stream and waits for it.
inline void LaunchAndWait(cudaKernel_t kernel, const KernelLaunch& l, const std::vector<void*>& dev) {
  std::vector<void*> params(l.args.size());
  for (size_t j = 0; j < l.args.size(); ++j) params[j] = const_cast<void**>(&dev[l.args[j]]);
  KILN_CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(l.grid[0], l.grid[1], l.grid[2]),
                                dim3(l.block[0], l.block[1], l.block[2]), params.data(), l.shared_bytes, nullptr));
  KILN_CUDA_OK(cudaDeviceSynchronize());
}

// The largest |got - want| / max(1, |want|) (a NaN counts as infinite) and where.
struct ScaledError {
  float worst = 0.f;
  size_t at = 0;
};
inline ScaledError MaxScaledError(const std::vector<float>& got, const std::vector<float>& want) {
  ScaledError e;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    const float err = std::isnan(got[i]) ? INFINITY : std::fabs(got[i] - want[i]) / std::max(1.f, std::fabs(want[i]));
    if (err > e.worst) {
      e.worst = err;
      e.at = i;
    }
  }
  return e;
}

}  // namespace kiln::codegen::test

// Declares `arch` (the device's kiln arch) or skips the test with the reason.
#define KILN_ARCH_OR_SKIP(arch)                       \
  std::string arch_why_not_;                          \
  const std::string arch = ::kiln::codegen::test::DeviceArch(&arch_why_not_); \
  if (arch.empty()) GTEST_SKIP() << "skipped: " << arch_why_not_
