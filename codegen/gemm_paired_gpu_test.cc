// GPU test of the products whose epilogue pairs accumulator columns, on the Hopper
// family: every case of codegen/gemm_gated_test_cases.h (gated products) and
// codegen/gemm_rotary_test_cases.h (rotary products) with the heuristic's tile and
// each forced config (cooperative and ping-pong, 64 to 256 columns, two m64 blocks a
// consumer, split-K, stream-K, clusters), against the CPU reference of the group's
// members (EvaluateNode: the MatMul, the Reshape / Split / Slice views that pair the
// columns and the element-wise ops in the storage dtype), twice per launch so that
// the split and stream-K semaphores are seen reset. KILN_PAIRED_CASES=a,b runs only
// the cases named (for compute-sanitizer). Skips without an sm_90a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_split.h"
#include "codegen/gemm_gated_test_cases.h"
#include "codegen/gemm_rotary_test_cases.h"
#include "codegen/gpu_test_util.h"
#include "codegen/nvrtc_module.h"
#include "codegen/ops/gemm_sm90.h"
#include "graph/evaluate.h"
#include "runtime/tensor_map.h"

namespace kiln::codegen {
namespace {

// One case of either kind, built: its group node, feeds and forced configs.
struct Prepared {
  std::string name, dtype;
  std::unique_ptr<Graph> graph;
  const Node* group = nullptr;
  std::map<std::string, Tensor> feeds;
  std::vector<std::string> configs;
};

// The cases KILN_PAIRED_CASES names (all without it), built.
void PrepareCases(std::vector<Prepared>& out) {
  const char* only = std::getenv("KILN_PAIRED_CASES");
  const std::vector<std::string> wanted = only != nullptr ? absl::StrSplit(only, ',') : std::vector<std::string>{};
  auto take = [&](const std::string& name) {
    return wanted.empty() || std::find(wanted.begin(), wanted.end(), name) != wanted.end();
  };
  uint32_t seed = 1;
  for (const gated_test::GatedCase& c : gated_test::Cases()) {
    if (!take(c.name)) continue;
    gated_test::Built b;
    ASSERT_NO_FATAL_FAILURE(gated_test::Build(c, seed++, b));
    out.push_back({c.name, c.dtype, std::move(b.graph), b.group, std::move(b.feeds), gated_test::ForcedConfigs()});
  }
  for (const rotary_test::RotaryCase& c : rotary_test::Cases()) {
    if (!take(c.name)) continue;
    rotary_test::Built b;
    ASSERT_NO_FATAL_FAILURE(rotary_test::Build(c, seed++, b));
    out.push_back({c.name, c.dtype, std::move(b.graph), b.group, std::move(b.feeds), rotary_test::ForcedConfigs()});
  }
}

TEST(GemmPairedGpuTest, MatchesCpuReference) {
  KILN_ARCH_OR_SKIP(arch);
  if (arch != "sm_90a") {
    GTEST_SKIP() << "skipped: gated and rotary products run on the sm90 GEMM family, not " << arch;
  }
  struct Run {
    size_t c;  // case
    std::string config;
    KernelLaunch launch;
  };
  std::vector<Prepared> cases;
  ASSERT_NO_FATAL_FAILURE(PrepareCases(cases));
  std::vector<Run> runs;
  std::vector<ModuleKernel> kernels;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Prepared& c = cases[ci];
    const Node& group = *c.group;
    std::vector<std::string> configs = {"heuristic"};
    for (const std::string& f : c.configs) configs.push_back(f);
    for (const std::string& text : configs) {
      absl::StatusOr<std::vector<KernelLaunch>> l;
      if (text == "heuristic") {
        l = ops::GenerateMatMulGroupSm90(group);
      } else {
        absl::StatusOr<ops::Sm90GemmConfig> cfg = ops::ParseSm90GemmConfig(text);
        ASSERT_TRUE(cfg.ok()) << cfg.status();
        // Split-K where K has too few k tiles for the split is refused; so is nothing else.
        if (!ops::Sm90ConfigFits(group, *cfg).ok()) {
          std::printf("%-12s %-22s not taken: %s\n", c.name.c_str(), text.c_str(),
                      std::string(ops::Sm90ConfigFits(group, *cfg).message()).c_str());
          continue;
        }
        l = ops::GenerateMatMulGroupSm90(group, &*cfg);
      }
      ASSERT_TRUE(l.ok()) << c.name << " " << text << ": " << l.status();
      kernels.push_back({absl::StrCat("kiln_paired_", runs.size()), (*l)[0].source});
      runs.push_back({ci, text, (*l)[0]});
    }
  }
  absl::StatusOr<std::vector<std::string>> cubins = CompileModules(kernels, arch, 8);
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  std::vector<cudaLibrary_t> libs(cubins->size());
  for (size_t i = 0; i < cubins->size(); ++i) {
    KILN_CUDA_OK(cudaLibraryLoadData(&libs[i], (*cubins)[i].data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  }
  int failures = 0;
  for (size_t ri = 0; ri < runs.size(); ++ri) {
    const Run& r = runs[ri];
    const Prepared& c = cases[r.c];
    SCOPED_TRACE(c.name + " " + r.config);
    const Node& node = *c.group;
    test::NodeBuffers buf;
    ASSERT_NO_FATAL_FAILURE(buf.SetUp(node, c.feeds));
    absl::StatusOr<std::vector<Tensor>> ref = EvaluateNode(node, buf.inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    const std::vector<float> want = (*ref)[0].ToFloat();
    double sum = 0;
    for (float w : want) sum += std::fabs(w);
    const float mean_magnitude = want.empty() ? 0.f : static_cast<float>(sum / want.size());
    cudaKernel_t kernel;
    ASSERT_NO_FATAL_FAILURE(test::GetKernel(libs[ri / 8], kernels[ri].function, r.launch.shared_bytes, &kernel));
    DeviceWorkspace workspace;
    ASSERT_TRUE(workspace.ReserveFor(r.launch).ok());
    for (int repeat = 0; repeat < 2; ++repeat) {
      KILN_CUDA_OK(cudaMemset(buf.dev[0], 0xA5, buf.out_bytes));
      absl::StatusOr<LaunchArgs> args = LaunchArgs::Build(
          r.launch, [&](int v) { return buf.dev[v]; }, workspace.view());
      ASSERT_TRUE(args.ok()) << args.status();
      const KernelLaunch& l = r.launch;
      KILN_CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(l.grid[0], l.grid[1], l.grid[2]),
                                    dim3(l.block[0], l.block[1], l.block[2]), args->params(), l.shared_bytes, nullptr));
      KILN_CUDA_OK(cudaGetLastError());
      KILN_CUDA_OK(cudaDeviceSynchronize());
      const std::vector<float> got = buf.Output(node).ToFloat();
      // Scaled by the reference's magnitude, at least 1 and at least its mean
      // magnitude: the reference rounds the products and each element-wise value to
      // the storage dtype, the kernel only its result, and where the terms of a sum
      // cancel (a rotation's x cos + partner sin) those roundings are the terms'.
      float worst = 0;
      size_t at = 0;
      const float floor = std::max(1.f, mean_magnitude);
      for (size_t i = 0; i < want.size(); ++i) {
        const float err =
            std::isnan(got[i]) ? INFINITY : std::fabs(got[i] - want[i]) / std::max(floor, std::fabs(want[i]));
        if (err > worst) worst = err, at = i;
      }
      const float tol = c.dtype == "bf16" ? 6e-2f : 2e-2f;
      const bool ok = worst <= tol;
      EXPECT_TRUE(ok) << "max scaled |err| " << worst << " at " << at << " (got " << got[at] << ", want " << want[at]
                      << "), launch " << repeat;
      failures += !ok;
      if (repeat == 0) {
        std::printf("%-12s %-22s %-28s max scaled err %.3g %s\n", c.name.c_str(), r.config.c_str(), l.config.c_str(),
                    worst, ok ? "ok" : "FAIL");
      }
    }
  }
  for (cudaLibrary_t lib : libs) cudaLibraryUnload(lib);
  std::printf("ran %zu gated and rotary GEMM launches on %s (%s): %d failing\n", runs.size(),
              test::DeviceName().c_str(), arch.c_str(), failures);
}

}  // namespace
}  // namespace kiln::codegen
