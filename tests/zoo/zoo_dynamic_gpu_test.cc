// Dynamic shapes on the GPU (issue 34): the zoo's eight legacy exports compiled once
// for ranges of batch sizes (and sequence lengths, for the text models), run on the
// GPU at the ranges' ends and odd sizes between against the CPU backend running the
// same bundle; and the per-size state (plans, grids, CUDA graph) stays bounded when a
// session sees more sizes than it keeps; and the text models' MatMul groups on kiln's
// GEMM with run-time rows (the default on sm_90a) and on cuBLASLt (--matmul-groups
// library) against the CPU backend. Skips without KILN_ZOO_DATA or a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compiler/compiler.h"
#include "runtime/bundle.h"
#include "runtime/cpu_executor.h"
#include "runtime/cuda_util.h"
#include "runtime/gpu_executor.h"
#include "tests/zoo/zoo_runner.h"

namespace kiln::zoo {
namespace {

namespace fs = std::filesystem;

// A GPU session of `program`.
absl::StatusOr<std::unique_ptr<GpuExecutor>> GpuSession(std::shared_ptr<const CpuProgram> program) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const GpuProgram> gpu, GpuProgram::Create(std::move(program)));
  return GpuExecutor::Create(std::move(gpu));
}

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

  // The case compiled for batch 1..max_batch (and seq 1..max_seq when > 0), loaded.
  std::unique_ptr<Bundle> CompileCase(const std::string& name, int64_t max_batch, int64_t max_seq = 0,
                                      codegen::MatMulGroups matmul_groups = codegen::MatMulGroups::kAuto) {
    CompileOptions options;
    options.arch = arch_;
    options.matmul_groups = matmul_groups;
    options.dim_ranges.push_back({"batch", 1, max_batch});
    if (max_seq > 0) options.dim_ranges.push_back({"seq", 1, max_seq});
    const std::string path = (work_ / (name + ".kiln")).string();
    absl::Status st = CompileToFile((fs::path(dir_) / name / "model.onnx").string(), path, options);
    EXPECT_TRUE(st.ok()) << st;
    auto bundle = Bundle::Load(path);
    EXPECT_TRUE(bundle.ok()) << bundle.status();
    return bundle.ok() ? *std::move(bundle) : nullptr;
  }

  // The data set's inputs resized to `batch` (and `seq` when > 0) by repetition.
  TensorMap Feeds(const std::string& name, int64_t batch, int64_t seq = 0) {
    auto inputs = ReadDataSet((fs::path(dir_) / name / "test_data_set_0").string(), "input_");
    EXPECT_TRUE(inputs.ok()) << inputs.status();
    TensorMap feeds;
    if (!inputs.ok()) return feeds;
    for (const Named& in : *inputs) {
      Shape shape = in.tensor.shape();
      shape[0] = batch;
      if (seq > 0) shape[1] = seq;
      feeds[in.name] = ResizeByRepeating(in.tensor, shape);
    }
    return feeds;
  }

  // The data set's sequence length (its first input's dim 1).
  int64_t DataSeq(const std::string& name) {
    auto inputs = ReadDataSet((fs::path(dir_) / name / "test_data_set_0").string(), "input_");
    return inputs.ok() && !inputs->empty() ? inputs->front().tensor.shape()[1] : 1;
  }

  std::string arch_, dir_;
  fs::path work_;
};

TEST_F(ZooDynamicGpuTest, RangesMatchTheCpuBackendAtEverySize) {
  struct Case {
    const char* name;
    bool text;  // batch and seq vary; else batch
  };
  for (const Case& c : {Case{"bert.legacy", true}, Case{"distilbert.legacy", true}, Case{"t5_encoder.legacy", true},
                        Case{"convnext.legacy", false}, Case{"efficientnet.legacy", false},
                        Case{"mobilenet_v3.legacy", false}, Case{"swin.legacy", false},
                        Case{"whisper_encoder.legacy", false}}) {
    SCOPED_TRACE(c.name);
    const int64_t max_seq = c.text ? DataSeq(c.name) : 0;
    std::unique_ptr<Bundle> bundle = CompileCase(c.name, 4, max_seq);
    ASSERT_NE(bundle, nullptr);
    auto program = CpuProgram::Create(*bundle);
    ASSERT_TRUE(program.ok()) << program.status();
    auto gpu = GpuSession(*program);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    auto cpu = CpuExecutor::Create(*program);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    // The ranges' ends, odd sizes between, and one size twice (its state cached).
    std::vector<std::pair<int64_t, int64_t>> sizes = {{4, max_seq}, {1, 1}, {1, 17}, {3, 5}, {2, max_seq}, {1, 17}};
    if (!c.text) sizes = {{4, 0}, {1, 0}, {3, 0}, {2, 0}, {1, 0}};
    for (const auto& [batch, seq] : sizes) {
      SCOPED_TRACE(testing::Message() << "batch " << batch << ", seq " << seq);
      const TensorMap feeds = Feeds(c.name, batch, seq);
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
        std::cout << "[ gpu ] " << c.name << " batch " << batch << (c.text ? absl::StrCat(" seq ", seq) : "")
                  << " output " << o << ": max |diff| " << cmp.rel_diff << " of max |ref| vs the CPU backend\n";
      }
      EXPECT_TRUE((*gpu)->using_cuda_graph()) << (*gpu)->cuda_graph_note();
    }
    EXPECT_EQ((*gpu)->cached_sizes(), c.text ? 5 : 4);
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
  auto gpu = GpuSession(*program);
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

// On sm_90a the MatMul groups run on kiln's Hopper GEMM with the rows read at run
// time, a tile config per range of rows (the default), or on cuBLASLt planned per run
// size (--matmul-groups library); the text models at the ranges' ends and odd sizes
// against the CPU backend.
TEST_F(ZooDynamicGpuTest, KilnGemmsReadTheirRowsAtRunTime) {
  if (arch_ != "sm_90a")
    GTEST_SKIP() << "skipped: kiln's GEMM with run-time rows is the sm90 family's (this GPU: " << arch_ << ")";
  for (const auto& [name, mode] : std::vector<std::pair<const char*, codegen::MatMulGroups>>{
           {"bert.legacy", codegen::MatMulGroups::kAuto},
           {"t5_encoder.legacy", codegen::MatMulGroups::kAuto},
           {"bert.legacy", codegen::MatMulGroups::kLibrary}}) {
    const bool library = mode == codegen::MatMulGroups::kLibrary;
    SCOPED_TRACE(absl::StrCat(name, library ? ", --matmul-groups library" : ""));
    const int64_t max_seq = DataSeq(name);
    std::unique_ptr<Bundle> bundle = CompileCase(name, 4, max_seq, mode);
    ASSERT_NE(bundle, nullptr);
    int dynamic_gemms = 0;
    for (const bundle::Step& step : bundle->manifest().steps()) {
      for (const bundle::Launch& l : step.launches()) dynamic_gemms += l.family() == "gemm_sm90" && l.dim_param();
    }
    EXPECT_EQ(dynamic_gemms > 0, !library);
    auto program = CpuProgram::Create(*bundle);
    ASSERT_TRUE(program.ok()) << program.status();
    auto gpu = GpuSession(*program);
    auto cpu = CpuExecutor::Create(*program);
    ASSERT_TRUE(gpu.ok() && cpu.ok()) << gpu.status() << cpu.status();
    for (const auto& [batch, seq] : std::vector<std::pair<int64_t, int64_t>>{{4, max_seq}, {1, 1}, {1, 17}, {3, 5}}) {
      SCOPED_TRACE(testing::Message() << "batch " << batch << ", seq " << seq);
      const TensorMap feeds = Feeds(name, batch, seq);
      auto got = (*gpu)->Run(feeds);
      auto want = (*cpu)->Run(feeds);
      ASSERT_TRUE(got.ok() && want.ok()) << got.status() << want.status();
      for (size_t o = 0; o < want->size(); ++o) {
        const Comparison cmp = Compare((*got)[o], (*want)[o]);
        EXPECT_TRUE(cmp.close()) << "output " << o << ": max |diff| " << cmp.rel_diff << " of max |ref|";
      }
    }
  }
}

}  // namespace
}  // namespace kiln::zoo
