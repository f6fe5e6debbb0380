// Dynamic shapes on real exports: the zoo's legacy cases (whose inputs carry the
// exporter's dynamic `batch` / `seq` dims) compiled once for ranges of sizes and run
// on the CPU backend at several sizes, the ranges' ends and odd ones among them. At the
// data set's own sizes the outputs match onnxruntime's; at the others, kiln's fp32
// reference evaluator run on the model imported at those fixed sizes. Skips without
// KILN_ZOO_DATA.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "compiler/compiler.h"
#include "frontend/onnx_importer.h"
#include "graph/evaluate.h"
#include "runtime/bundle.h"
#include "runtime/cpu_executor.h"
#include "tests/zoo/zoo_runner.h"

namespace kiln::zoo {
namespace {

namespace fs = std::filesystem;

struct DynamicCase {
  std::string name;   // NAME.legacy
  bool text = false;  // batch and seq dynamic; else batch only
};

const DynamicCase kCases[] = {
    {"bert.legacy", true},      {"distilbert.legacy", true},    {"t5_encoder.legacy", true},
    {"convnext.legacy", false}, {"efficientnet.legacy", false}, {"mobilenet_v3.legacy", false},
    {"swin.legacy", false},     {"whisper_encoder.legacy", false},
};

class ZooDynamicTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* data = std::getenv("KILN_ZOO_DATA");
    if (data == nullptr || *data == '\0') {
      GTEST_SKIP() << "skipped: KILN_ZOO_DATA is not set; set it to the model zoo folder "
                      "(e.g. KILN_ZOO_DATA=../shared/data/zoo)";
    }
    dir_ = data;
    work_ = fs::path(::testing::TempDir()) / "kiln_zoo_dynamic";
    fs::create_directories(work_);
  }

  std::string dir_;
  fs::path work_;
};

TEST_F(ZooDynamicTest, LegacyCasesCompileOnceAndRunAtManySizes) {
  for (const DynamicCase& c : kCases) {
    SCOPED_TRACE(c.name);
    const fs::path model = fs::path(dir_) / c.name / "model.onnx";
    auto inputs = ReadDataSet((fs::path(dir_) / c.name / "test_data_set_0").string(), "input_");
    auto expected = ReadDataSet((fs::path(dir_) / c.name / "test_data_set_0").string(), "output_");
    ASSERT_TRUE(inputs.ok() && expected.ok()) << c.name;
    const int64_t data_batch = inputs->front().tensor.shape()[0];
    const int64_t data_seq = c.text ? inputs->front().tensor.shape()[1] : 0;

    CompileOptions options;
    options.dim_ranges.push_back({"batch", 1, 4});
    if (c.text) options.dim_ranges.push_back({"seq", 1, data_seq});
    const std::string bundle_path = (work_ / (c.name + ".kiln")).string();
    ASSERT_TRUE(CompileToFile(model.string(), bundle_path, options).ok()) << c.name;
    auto bundle = Bundle::Load(bundle_path);
    ASSERT_TRUE(bundle.ok()) << bundle.status();
    ASSERT_EQ((*bundle)->manifest().dim_symbols_size(), c.text ? 2 : 1);
    // The GPU runs it when every step has a kernel (tests/zoo/zoo_dynamic_gpu_test.cc).
    int without_gpu_kernel = 0;
    for (const bundle::Step& step : (*bundle)->manifest().steps()) without_gpu_kernel += !step.gpu_unsupported().empty();
    EXPECT_EQ(without_gpu_kernel, 0) << "steps without a GPU kernel with run-time sizes";
    // Fusion runs on dynamic graphs: every model keeps some fused groups (element-wise
    // chains, norms with their residual add, matmuls / convs with their epilogue).
    int groups = 0;
    for (const bundle::Step& step : (*bundle)->manifest().steps()) groups += step.op_type() == "FusedGroup";
    EXPECT_GT(groups, 0) << "no fused group";
    if (c.name == std::string("bert.legacy")) {
      // sm_90a: the FFN's [MatMul, bias Add, erf-Gelu] group is one kernel of the Hopper
      // family with the rows read at run time (a launch per tile config).
      int gelu_gemms = 0;
      for (const bundle::Step& step : (*bundle)->manifest().steps()) {
        // The group's output is the GELU's (legacy export: .../intermediate_act_fn/Mul_1).
        const bool erf = step.outputs_size() == 1 && absl::StrContains(step.outputs(0).value(), "intermediate_act_fn");
        const bool gemm = step.launches_size() > 0 && step.launches(0).family() == "gemm_sm90";
        gelu_gemms += erf && gemm && step.launches(0).dim_param();
      }
      EXPECT_GT(gelu_gemms, 0);
      // With --matmul-groups library that group is expanded and its MatMul + bias kept
      // as one cuBLASLt call; the report says so (the call's own note must not replace
      // it).
      CompileOptions library = options;
      library.matmul_groups = codegen::MatMulGroups::kLibrary;
      const std::string library_path = (work_ / (c.name + ".library.kiln")).string();
      ASSERT_TRUE(CompileToFile(model.string(), library_path, library).ok()) << c.name;
      auto library_bundle = Bundle::Load(library_path);
      ASSERT_TRUE(library_bundle.ok()) << library_bundle.status();
      int kept = 0;
      for (const bundle::FusionGroup& g : (*library_bundle)->manifest().fusion().groups()) {
        kept += absl::StartsWith(g.note(), "expanded") && absl::StrContains(g.note(), "as one cublaslt:FusedMatMul");
      }
      EXPECT_GT(kept, 0);
    }
    auto cpu = CpuExecutor::Create(**bundle);
    ASSERT_TRUE(cpu.ok()) << cpu.status();

    // (batch, seq): the data set's sizes, the ranges' ends and odd sizes between.
    std::vector<std::pair<int64_t, int64_t>> sizes = {{data_batch, data_seq}, {1, 1}, {1, 17}, {3, 5}, {4, data_seq}};
    if (!c.text) sizes = {{data_batch, 0}, {1, 0}, {3, 0}, {4, 0}};
    for (const auto& [batch, seq] : sizes) {
      SCOPED_TRACE(testing::Message() << "batch " << batch << ", seq " << seq);
      TensorMap feeds;
      std::map<std::string, Shape> shapes;
      for (const Named& in : *inputs) {
        Shape shape = in.tensor.shape();
        shape[0] = batch;
        if (c.text) shape[1] = seq;
        feeds[in.name] = ResizeByRepeating(in.tensor, shape);
        shapes[in.name] = shape;
      }
      auto got = (*cpu)->Run(feeds);
      ASSERT_TRUE(got.ok()) << got.status();
      std::vector<Tensor> want;
      if (batch == data_batch && seq == data_seq) {
        for (const Named& out : *expected) want.push_back(out.tensor);
      } else {
        ImportOptions import;
        import.input_shapes = shapes;
        auto graph = ImportOnnxFile(model.string(), import);
        ASSERT_TRUE(graph.ok()) << graph.status();
        auto ref = EvaluateGraph(**graph, feeds);
        ASSERT_TRUE(ref.ok()) << ref.status();
        want = *std::move(ref);
      }
      ASSERT_GE(got->size(), want.size());
      for (size_t o = 0; o < want.size(); ++o) {
        ASSERT_EQ((*got)[o].shape(), want[o].shape()) << "output " << o;
        const Comparison cmp = Compare((*got)[o], want[o]);
        EXPECT_TRUE(cmp.close()) << "output " << o << ": max |diff| " << cmp.rel_diff << " of max |ref|, cosine "
                                 << cmp.cosine;
      }
    }
    EXPECT_LE((*cpu)->cached_specializations(), CpuExecutor::kMaxSpecializations);
  }
}

// Sizes outside the ranges, or inputs that disagree on a shared dim, are errors that
// name the input, the dim and the range; and the specialisation cache stays bounded.
TEST_F(ZooDynamicTest, BertRejectsSizesOutsideItsRangesAndKeepsFewSpecializations) {
  const fs::path model = fs::path(dir_) / "bert.legacy" / "model.onnx";
  CompileOptions options;
  options.dim_ranges = {{"batch", 1, 2}, {"seq", 1, 32}};
  const std::string bundle_path = (work_ / "bert_ranges.kiln").string();
  ASSERT_TRUE(CompileToFile(model.string(), bundle_path, options).ok());
  auto bundle = Bundle::Load(bundle_path);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  auto cpu = CpuExecutor::Create(**bundle);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto feeds = [](int64_t batch, int64_t ids_seq, int64_t mask_seq) {
    TensorMap f;
    f["input_ids"] = Tensor::FromInt64(DType::kInt64, {batch, ids_seq}, std::vector<int64_t>(batch * ids_seq, 7));
    f["attention_mask"] =
        Tensor::FromInt64(DType::kInt64, {batch, mask_seq}, std::vector<int64_t>(batch * mask_seq, 1));
    return f;
  };
  absl::StatusOr<std::vector<Tensor>> r = (*cpu)->Run(feeds(1, 33, 33));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("input 'input_ids' dim 1 (seq) is 33, outside the range 1..32"),
            std::string::npos)
      << r.status();
  r = (*cpu)->Run(feeds(3, 8, 8));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("outside the range 1..2"), std::string::npos) << r.status();
  r = (*cpu)->Run(feeds(1, 8, 9));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("both are seq"), std::string::npos) << r.status();
  for (int64_t seq = 1; seq <= CpuExecutor::kMaxSpecializations + 3; ++seq) {
    r = (*cpu)->Run(feeds(1, seq, seq));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)[0].shape(), (Shape{1, seq, 64}));
  }
  EXPECT_EQ((*cpu)->cached_specializations(), CpuExecutor::kMaxSpecializations);
}

}  // namespace
}  // namespace kiln::zoo
