// Dynamic shapes on the GPU (issue 34): the zoo's legacy exports whose every step has a
// kernel with run-time sizes, compiled once for a range of batch sizes, run on the GPU
// at the range's ends and odd sizes between against the CPU backend running the same
// bundle; and the per-size state (plans, grids, CUDA graph) stays bounded when a
// session sees more sizes than it keeps. Skips without KILN_ZOO_DATA or a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "compiler/compiler.h"
#include "runtime/bundle.h"
#include "runtime/cpu_executor.h"
#include "runtime/cuda_util.h"
#include "runtime/gpu_executor.h"
#include "tests/zoo/zoo_runner.h"

namespace kiln::zoo {
namespace {

namespace fs = std::filesystem;

class ZooDynamicGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* data = std::getenv("KILN_ZOO_DATA");
    if (data == nullptr || *data == '\0') {
      GTEST_SKIP() << "skipped: KILN_ZOO_DATA is not set; set it to the model zoo folder "
                      "(e.g. KILN_ZOO_DATA=../shared/data/zoo)";
    }
    auto gpu = LocalGpu();
    if (!gpu.ok()) GTEST_SKIP() << "skipped: " << gpu.status().message();
    arch_ = gpu->arch;
    dir_ = data;
    work_ = fs::path(::testing::TempDir()) / "kiln_zoo_dynamic_gpu";
    fs::create_directories(work_);
  }

  // The case compiled for batch 1..max_batch, loaded, with its CPU program.
  std::unique_ptr<Bundle> CompileCase(const std::string& name, int64_t max_batch) {
    CompileOptions options;
    options.arch = arch_;
    options.dim_ranges.push_back({"batch", 1, max_batch});
    const std::string path = (work_ / (name + ".kiln")).string();
    absl::Status st = CompileToFile((fs::path(dir_) / name / "model.onnx").string(), path, options);
    EXPECT_TRUE(st.ok()) << st;
    auto bundle = Bundle::Load(path);
    EXPECT_TRUE(bundle.ok()) << bundle.status();
    return bundle.ok() ? *std::move(bundle) : nullptr;
  }

  // The data set's inputs with their batch dim resized to `batch` (rows repeated).
  TensorMap Feeds(const std::string& name, int64_t batch) {
    auto inputs = ReadDataSet((fs::path(dir_) / name / "test_data_set_0").string(), "input_");
    EXPECT_TRUE(inputs.ok()) << inputs.status();
    TensorMap feeds;
    if (!inputs.ok()) return feeds;
    for (const Named& in : *inputs) {
      Shape shape = in.tensor.shape();
      const int64_t row = NumElements(shape) / shape[0];
      shape[0] = batch;
      const std::vector<float> src = in.tensor.ToFloat();
      std::vector<float> data(NumElements(shape));
      for (size_t i = 0; i < data.size(); ++i) data[i] = src[i % (row * in.tensor.shape()[0])];
      feeds[in.name] = Tensor::FromFloat(in.tensor.dtype(), shape, data);
    }
    return feeds;
  }

  std::string arch_, dir_;
  fs::path work_;
};

TEST_F(ZooDynamicGpuTest, BatchRangesMatchTheCpuBackendAtEverySize) {
  for (const char* name : {"whisper_encoder.legacy", "convnext.legacy", "efficientnet.legacy", "mobilenet_v3.legacy"}) {
    SCOPED_TRACE(name);
    std::unique_ptr<Bundle> bundle = CompileCase(name, 4);
    ASSERT_NE(bundle, nullptr);
    auto program = CpuProgram::Create(*bundle);
    ASSERT_TRUE(program.ok()) << program.status();
    auto gpu_program = GpuProgram::Create(*program);
    ASSERT_TRUE(gpu_program.ok()) << gpu_program.status();
    auto gpu = GpuExecutor::Create(*gpu_program);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    auto cpu = CpuExecutor::Create(*program);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    for (int64_t batch : {4, 1, 3, 2, 1}) {  // 1 twice: a size whose state is cached
      SCOPED_TRACE(testing::Message() << "batch " << batch);
      const TensorMap feeds = Feeds(name, batch);
      auto got = (*gpu)->Run(feeds);
      ASSERT_TRUE(got.ok()) << got.status();
      auto want = (*cpu)->Run(feeds);
      ASSERT_TRUE(want.ok()) << want.status();
      ASSERT_EQ(got->size(), want->size());
      for (size_t o = 0; o < want->size(); ++o) {
        ASSERT_EQ((*got)[o].shape(), (*want)[o].shape()) << "output " << o;
        EXPECT_EQ((*got)[o].shape()[0], batch);
        const Comparison cmp = Compare((*got)[o], (*want)[o]);
        EXPECT_TRUE(cmp.close()) << "output " << o << ": max |diff| " << cmp.rel_diff << " of max |ref|, cosine "
                                 << cmp.cosine;
        std::cout << "[ gpu ] " << name << " batch " << batch << " output " << o << ": max |diff| " << cmp.rel_diff
                  << " of max |ref| vs the CPU backend\n";
      }
      EXPECT_TRUE((*gpu)->using_cuda_graph()) << (*gpu)->cuda_graph_note();
    }
    EXPECT_EQ((*gpu)->cached_sizes(), 4);
  }
}

// More sizes than a session keeps: the oldest states go, the count stays at the bound,
// and a size run again after its state was dropped gives the same outputs.
TEST_F(ZooDynamicGpuTest, PerSizeStateStaysBounded) {
  const std::string name = "whisper_encoder.legacy";
  const int64_t sizes = GpuExecutor::kMaxCachedSizes + 3;
  std::unique_ptr<Bundle> bundle = CompileCase(name, sizes);
  ASSERT_NE(bundle, nullptr);
  auto program = CpuProgram::Create(*bundle);
  ASSERT_TRUE(program.ok()) << program.status();
  auto gpu_program = GpuProgram::Create(*program);
  ASSERT_TRUE(gpu_program.ok()) << gpu_program.status();
  auto gpu = GpuExecutor::Create(*gpu_program);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto first = (*gpu)->Run(Feeds(name, 1));
  ASSERT_TRUE(first.ok()) << first.status();
  for (int64_t batch = 2; batch <= sizes; ++batch) {
    auto r = (*gpu)->Run(Feeds(name, batch));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_LE((*gpu)->cached_sizes(), GpuExecutor::kMaxCachedSizes);
  }
  EXPECT_EQ((*gpu)->cached_sizes(), GpuExecutor::kMaxCachedSizes);
  auto again = (*gpu)->Run(Feeds(name, 1));  // planned and captured anew
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->size(), first->size());
  for (size_t o = 0; o < first->size(); ++o) {
    const Comparison cmp = Compare((*again)[o], (*first)[o]);
    EXPECT_EQ(cmp.rel_diff, 0) << "output " << o;
  }
  // A size outside the range is an error naming it; device pointers carry no sizes.
  auto outside = (*gpu)->Run(Feeds(name, sizes + 1));
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("outside the range"), std::string::npos) << outside.status();
  absl::Status device = (*gpu)->RunDevice({nullptr}, {nullptr});
  EXPECT_NE(device.message().find("device pointers carry no sizes"), std::string::npos) << device;
}

}  // namespace
}  // namespace kiln::zoo
