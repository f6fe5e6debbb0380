// The ONNX backend test data on the GPU (ctest label gpu): every case kiln's CPU
// reference passes also passes as a bundle compiled for the local GPU (fp32 storage)
// and run there. Needs KILN_ONNX_DATA and a GPU; skips with a message without either.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "runtime/cuda_util.h"
#include "tests/conformance/conformance.h"

namespace kiln::conformance {
namespace {

void RunOnGpu(const std::string& suite) {
  const char* data = std::getenv("KILN_ONNX_DATA");
  if (data == nullptr || *data == '\0') GTEST_SKIP() << "skipped: KILN_ONNX_DATA is not set";
  if (!std::filesystem::is_directory(std::filesystem::path(data) / suite)) {
    GTEST_SKIP() << "skipped: no suite folder '" << suite << "' under " << data;
  }
  auto gpu = LocalGpu();
  if (!gpu.ok()) GTEST_SKIP() << "skipped: " << gpu.status().message();
  const std::vector<CaseResult> reference = RunSuite(data, suite);
  const std::vector<CaseResult> on_gpu = RunSuite(data, suite, "", false, Device::kGpu);
  ASSERT_EQ(reference.size(), on_gpu.size());
  int ref_passed = 0, gpu_passed = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    ref_passed += reference[i].outcome == Outcome::kPassed;
    gpu_passed += on_gpu[i].outcome == Outcome::kPassed;
    if (reference[i].outcome == Outcome::kPassed && on_gpu[i].outcome != Outcome::kPassed) {
      ADD_FAILURE() << suite << "/" << on_gpu[i].name << " passes on the reference but not on the GPU: "
                    << on_gpu[i].detail;
    }
  }
  std::cout << suite << " on " << gpu->name << " (" << gpu->arch << "): " << gpu_passed << " passed on the GPU, "
            << ref_passed << " on the CPU reference, of " << reference.size() << " cases\n"
            << FormatReport(on_gpu, /*per_op=*/false);
  EXPECT_EQ(gpu_passed, ref_passed);
}

TEST(ConformanceGpuTest, Node) { RunOnGpu("node"); }
TEST(ConformanceGpuTest, Light) { RunOnGpu("light"); }
TEST(ConformanceGpuTest, PytorchConverted) { RunOnGpu("pytorch-converted"); }
TEST(ConformanceGpuTest, PytorchOperator) { RunOnGpu("pytorch-operator"); }
TEST(ConformanceGpuTest, Simple) { RunOnGpu("simple"); }

}  // namespace
}  // namespace kiln::conformance
