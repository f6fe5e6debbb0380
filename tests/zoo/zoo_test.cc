// Every case of the model zoo ($KILN_ZOO_DATA: real transformers / torchvision exports
// by both torch exporters) compiles for sm_90a with a GPU kernel for every step, and
// its bundle matches onnxruntime's outputs on the CPU backend (this binary) or on the
// GPU (kiln_zoo_gpu_tests, label gpu). Skips with a message without the data (or,
// for the GPU, without a GPU).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "tests/zoo/zoo_runner.h"
#ifdef KILN_ZOO_GPU
#include "runtime/cuda_util.h"
#endif

namespace kiln::zoo {
namespace {

TEST(ZooTest, EveryCaseCompilesRunsAndMatches) {
  const char* data = std::getenv("KILN_ZOO_DATA");
  if (data == nullptr || *data == '\0') {
    GTEST_SKIP() << "skipped: KILN_ZOO_DATA is not set; set it to the model zoo folder "
                    "(e.g. KILN_ZOO_DATA=../shared/data/zoo)";
  }
  ZooOptions options;
#ifdef KILN_ZOO_GPU
  auto gpu = LocalGpu();
  if (!gpu.ok()) GTEST_SKIP() << "skipped: " << gpu.status().message();
  options.device = ZooDevice::kGpu;
#endif
  options.work_dir = (std::filesystem::path(::testing::TempDir()) / "kiln_zoo").string();
  const std::vector<std::string> cases = ListZooCases(data);
  ASSERT_FALSE(cases.empty()) << "no zoo cases (folders holding a model.onnx) under " << data;
  std::vector<ZooResult> results;
  for (const std::string& name : cases) {
    results.push_back(RunZooCase(data, name, options));
    const ZooResult& r = results.back();
    EXPECT_TRUE(r.compiled) << name << ": " << r.detail;
    EXPECT_TRUE(r.gpu_runnable) << name << ": " << r.detail;
    EXPECT_EQ(r.launches_without_wait, 0) << name << ": kernels whose entry the module builder did not find";
    EXPECT_TRUE(r.correct) << name << ": max |diff| " << r.max_rel_diff << " of max |ref|, cosine " << r.min_cosine
                           << ": " << r.detail;
  }
  std::cout << FormatZooTable(results, options.device);
}

}  // namespace
}  // namespace kiln::zoo
