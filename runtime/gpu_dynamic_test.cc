// Dynamic bundles on the GPU (label gpu; skips without a GPU): GPT-2's position ids
// and packed-sequence mask (graph/gpt2_mask_test_graph.h) compiled once for ranges
// and run at several sizes, with these size-only steps computed once per size on the
// host (the default) and with their kernels run every time, both against the CPU
// backend on the same bundle; and that mask added to an attention's scores, which the
// kernel computes (fusion/mark_causal_masks.h), against the CPU backend's reading it;
// and a swapped GEMM with run-time rows.

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/compiler.h"
#include "graph/fused_group.h"
#include "graph/gpt2_mask_test_graph.h"
#include "graph/text_format.h"
#include "gtest/gtest.h"
#include "runtime/bundle.h"
#include "runtime/compiled_bundle_test_util.h"
#include "runtime/cpu_executor.h"
#include "runtime/cuda_util.h"
#include "runtime/gpu_executor.h"

namespace kiln {
namespace {

// Equal where the reference is not finite, within `tol` of its largest magnitude
// elsewhere.
void ExpectClose(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<float> g = got.ToFloat(), w = want.ToFloat();
  double scale = 1e-6, err = 0;
  for (float v : w) scale = std::isfinite(v) ? std::max<double>(scale, std::fabs(v)) : scale;
  for (size_t i = 0; i < g.size(); ++i) {
    if (!std::isfinite(w[i])) {
      ASSERT_EQ(g[i], w[i]) << what << " element " << i;
    } else {
      err = std::max<double>(err, std::fabs(g[i] - w[i]));
    }
  }
  EXPECT_LE(err / scale, tol) << what;
}

// Every constant of `graph` uniform in [-scale, scale).
void RandomizeConstants(Graph& graph, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> uni(-scale, scale);
  for (Value* c : graph.constants()) {
    std::vector<float> x(c->numel());
    for (float& e : x) e = uni(rng);
    graph.SetConstant(c, Tensor::FromFloat(c->dtype(), c->shape(), x));
  }
}

// The launches of `bundle` that are kiln's Hopper GEMM with run-time sizes and whose
// config holds `config_part`.
int RunTimeGemmLaunches(const Bundle& bundle, const std::string& config_part = "") {
  int n = 0;
  for (const bundle::Step& step : bundle.manifest().steps()) {
    for (const bundle::Launch& l : step.launches()) {
      n += l.family() == "gemm_sm90" && l.dim_param() && l.config().find(config_part) != std::string::npos;
    }
  }
  return n;
}

// `host`'s bundle on the GPU against the CPU backend: each run's feeds (sizes of the
// ranges, in order), every output within 1e-2 of the reference's largest magnitude.
void ExpectGpuMatchesCpu(const std::shared_ptr<const CpuProgram>& host, const std::vector<TensorMap>& runs) {
  auto program = GpuProgram::Create(host);
  ASSERT_TRUE(program.ok()) << program.status();
  auto exec = GpuExecutor::Create(*program);
  auto cpu = CpuExecutor::Create(host);
  ASSERT_TRUE(exec.ok() && cpu.ok()) << exec.status() << cpu.status();
  for (size_t r = 0; r < runs.size(); ++r) {
    SCOPED_TRACE(absl::StrCat("run ", r, ", input shape ", runs[r].begin()->second.TypeString()));
    auto got = (*exec)->Run(runs[r]);
    auto want = (*cpu)->Run(runs[r]);
    ASSERT_TRUE(got.ok() && want.ok()) << got.status() << want.status();
    ASSERT_EQ(got->size(), want->size());
    for (size_t o = 0; o < got->size(); ++o) ExpectClose((*got)[o], (*want)[o], 1e-2, absl::StrCat("output ", o));
  }
}

TEST(GpuDynamicTest, SizeOnlyStepsOncePerSizeOrEveryRun) {
  // Compiled without a GPU too: every step gets a kernel with run-time sizes.
  auto gpu = LocalGpu();
  auto graph = ParseGraph(test::Gpt2Mask());
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::unique_ptr<Bundle> bundle;
  std::shared_ptr<const CpuProgram> host =
      test::CompileAndLoad(**graph, gpu.ok() ? gpu->arch : "sm_90a", "gpt2_mask", &bundle);
  ASSERT_NE(host, nullptr);
  for (const bundle::Step& step : bundle->manifest().steps()) {
    EXPECT_TRUE(step.gpu_unsupported().empty()) << step.node() << ": " << step.gpu_unsupported();
  }
  if (!gpu.ok()) GTEST_SKIP() << "skipped: " << gpu.status().message();
  auto program = GpuProgram::Create(host);
  ASSERT_TRUE(program.ok()) << program.status();
  auto once = GpuExecutor::Create(*program);
  GpuExecutorOptions every_run_options;
  every_run_options.size_only_steps_on_host = false;
  auto every_run = GpuExecutor::Create(*program, every_run_options);
  auto cpu = CpuExecutor::Create(host);
  ASSERT_TRUE(once.ok() && every_run.ok() && cpu.ok()) << once.status() << every_run.status() << cpu.status();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  // The ranges' ends, odd sizes between, and a size again (its captured graph replayed).
  for (const auto& [batch, seq] : std::vector<std::pair<int64_t, int64_t>>{{4, 24}, {1, 1}, {1, 17}, {3, 5}, {4, 24}}) {
    SCOPED_TRACE(absl::StrCat("batch ", batch, ", seq ", seq));
    std::vector<float> ids(batch * seq), scores(batch * 2 * seq * seq);
    for (float& v : ids) v = static_cast<float>(rng() % 50);
    for (float& v : scores) v = uni(rng);
    TensorMap feeds;
    feeds["input_ids"] = Tensor::FromFloat(DType::kInt64, {batch, seq}, ids);
    feeds["scores"] = Tensor::FromFloat(DType::kFloat32, {batch, 2, seq, seq}, scores);
    auto a = (*once)->Run(feeds);
    auto b = (*every_run)->Run(feeds);
    auto want = (*cpu)->Run(feeds);
    ASSERT_TRUE(a.ok() && b.ok() && want.ok()) << a.status() << b.status() << want.status();
    ASSERT_EQ(a->size(), 2u);
    for (size_t o = 0; o < a->size(); ++o) {
      ExpectClose((*a)[o], (*want)[o], 1e-2, absl::StrCat("output ", o, ", size-only steps on the host"));
      ExpectClose((*b)[o], (*want)[o], 1e-2, absl::StrCat("output ", o, ", size-only kernels"));
    }
    EXPECT_TRUE((*once)->using_cuda_graph()) << (*once)->cuda_graph_note();
    // The mask and position rows are copies: one per value the other steps read.
    EXPECT_LT((*once)->launches_per_run(), (*every_run)->launches_per_run());
    std::cout << "[ gpu ] batch " << batch << " seq " << seq << ": " << (*once)->launches_per_run()
              << " launches and copies per run with the size-only steps on the host, "
              << (*every_run)->launches_per_run() << " with their kernels\n";
  }
}

TEST(GpuDynamicTest, ComputedCausalMaskMatchesTheCpuBackend) {
  auto gpu = LocalGpu();
  auto graph = ParseGraph(test::Gpt2MaskedAttention());
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::unique_ptr<Bundle> bundle;
  std::shared_ptr<const CpuProgram> host =
      test::CompileAndLoad(**graph, gpu.ok() ? gpu->arch : "sm_90a", "gpt2_attention", &bundle);
  ASSERT_NE(host, nullptr);
  int marked = 0;
  for (const Node* n : host->graph().nodes()) marked += IsFusedGroup(*n) && n->has_attr("causal_inputs");
  EXPECT_EQ(marked, 1);
  if (!gpu.ok()) GTEST_SKIP() << "skipped: " << gpu.status().message();
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  std::vector<TensorMap> runs;
  for (const auto& [batch, seq] : std::vector<std::pair<int64_t, int64_t>>{{4, 24}, {1, 1}, {1, 17}, {3, 5}, {2, 24}}) {
    std::vector<float> ids(batch * seq);
    for (float& v : ids) v = static_cast<float>(rng() % 50);
    TensorMap& feeds = runs.emplace_back();
    feeds["input_ids"] = Tensor::FromFloat(DType::kInt64, {batch, seq}, ids);
    for (const char* name : {"q", "k", "v"}) {
      std::vector<float> x(batch * 2 * seq * 16);
      for (float& v : x) v = uni(rng);
      feeds[name] = Tensor::FromFloat(DType::kFloat16, {batch, 2, seq, 16}, x);
    }
  }
  ASSERT_EQ(host->graph().outputs().size(), 2u);
  ExpectGpuMatchesCpu(host, runs);
}

// A projection of few tokens (at most 32 rows, N and K 768): on sm_90a kiln's GEMM with
// run-time rows takes the heuristic's swap-AB tiles (C's rows are the kernel's
// columns), one per 8 rows, against the CPU backend at the ranges' ends and sizes
// between.
TEST(GpuDynamicTest, SwappedGemmWithRunTimeRows) {
  auto gpu = LocalGpu();
  auto graph = ParseGraph(R"(graph @main {
  dim batch in [1, 4]
  dim seq in [1, 8]
  input %x : f16[4,8,768] dims "batch, seq, 768"
  const %w : f16[768,768] = splat(0.01)
  const %b : f16[768] = splat(0.5)
  %y = MatMul(%x, %w)
  %z = Add(%y, %b)
  %r = Relu(%z)
  output %r
})");
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  RandomizeConstants(**graph, rng, 0.05f);
  std::unique_ptr<Bundle> bundle;
  std::shared_ptr<const CpuProgram> host = test::CompileAndLoad(**graph, "sm_90a", "swapped", &bundle);
  ASSERT_NE(host, nullptr);
  // One swapped tile per 8 rows (as wide as them), so the run picks among variants.
  EXPECT_EQ(RunTimeGemmLaunches(*bundle, " swap"), 4);
  if (!gpu.ok() || gpu->arch != "sm_90a") GTEST_SKIP() << "skipped: needs an sm_90a GPU";
  std::vector<TensorMap> runs;
  for (const auto& [batch, seq] : std::vector<std::pair<int64_t, int64_t>>{{4, 8}, {1, 1}, {1, 7}, {3, 5}, {2, 8}}) {
    std::vector<float> x(batch * seq * 768);
    for (float& v : x) v = uni(rng);
    runs.emplace_back()["x"] = Tensor::FromFloat(DType::kFloat16, {batch, seq, 768}, x);
  }
  ExpectGpuMatchesCpu(host, runs);
}

// A ResNet bottleneck with a projection shortcut as torchvision's legacy export writes
// it (BatchNorms folded into the convs), batch 1..8: the 1x1 convs at stride 1 run as
// kiln's GEMM with the rows (batch x pixels) read at run time, against the CPU backend.
TEST(GpuDynamicTest, BottleneckOneByOneConvsWithRunTimeBatch) {
  auto gpu = LocalGpu();
  auto graph = ParseGraph(R"(graph @main {
  dim batch in [1, 8]
  input %x : f32[8,64,14,14] dims "batch, 64, 14, 14"
  const %w1 : f32[32,64,1,1] = splat(0.01)
  const %b1 : f32[32] = splat(0.1)
  const %w2 : f32[32,32,3,3] = splat(0.01)
  const %b2 : f32[32] = splat(0.1)
  const %w3 : f32[128,32,1,1] = splat(0.01)
  const %b3 : f32[128] = splat(0.1)
  const %wd : f32[128,64,1,1] = splat(0.01)
  const %bd : f32[128] = splat(0.1)
  %c1 = Conv(%x, %w1, %b1) {dilations = [1, 1], group = 1, kernel_shape = [1, 1], pads = [0, 0, 0, 0], strides = [1, 1]}
  %r1 = Relu(%c1)
  %c2 = Conv(%r1, %w2, %b2) {dilations = [1, 1], group = 1, kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [1, 1]}
  %r2 = Relu(%c2)
  %c3 = Conv(%r2, %w3, %b3) {dilations = [1, 1], group = 1, kernel_shape = [1, 1], pads = [0, 0, 0, 0], strides = [1, 1]}
  %d = Conv(%x, %wd, %bd) {dilations = [1, 1], group = 1, kernel_shape = [1, 1], pads = [0, 0, 0, 0], strides = [1, 1]}
  %s = Add(%c3, %d)
  %y = Relu(%s)
  output %y
})");
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  RandomizeConstants(**graph, rng, 0.2f);
  std::unique_ptr<Bundle> bundle;
  std::shared_ptr<const CpuProgram> host = test::CompileAndLoad(**graph, "sm_90a", "bottleneck", &bundle);
  ASSERT_NE(host, nullptr);
  EXPECT_GE(RunTimeGemmLaunches(*bundle), 3) << "the three 1x1 convs";
  if (!gpu.ok() || gpu->arch != "sm_90a") GTEST_SKIP() << "skipped: needs an sm_90a GPU";
  std::vector<TensorMap> runs;
  for (int64_t batch : {8, 1, 3, 5, 8}) {
    std::vector<float> x(batch * 64 * 14 * 14);
    for (float& v : x) v = uni(rng);
    runs.emplace_back()["x"] = Tensor::FromFloat(DType::kFloat32, {batch, 64, 14, 14}, x);
  }
  ExpectGpuMatchesCpu(host, runs);
}

}  // namespace
}  // namespace kiln
