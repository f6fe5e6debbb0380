// GPU test of the generated convolutions (codegen/ops/conv.cc): every case of
// codegen/conv_test_cases.h (implicit GEMM with both gathers and tile sizes, odd
// shapes, OC not a multiple of 8, C = 3 and 5, strides, asymmetric pads, dilation,
// 1x1 to 7x7, batch 1 and 2-4, epilogues; grouped G = 2 to 16 with C/G = 1 to 58,
// both gathers; depthwise 3x3 and 5x5, strides 1 and 2),
// implicit GEMMs with the heuristic's tiles and with 64x64 ones, against the CPU
// reference (EvaluateNode of the Conv or the group, NHWC). Skips without a device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/conv_test_cases.h"
#include "codegen/gpu_test_util.h"
#include "codegen/nvrtc_module.h"
#include "codegen/op_kernels.h"
#include "codegen/ops/families.h"
#include "graph/evaluate.h"

namespace kiln::codegen {
namespace {

constexpr int kPerModule = 8;

TEST(ConvGpuTest, MatchesCpuReference) {
  KILN_ARCH_OR_SKIP(arch);

  // Each case with the heuristic's config and, for an implicit GEMM where they differ,
  // again with 64x64 tiles (small problems get 64x32 / 32x64 / 32x32 tiles) and with
  // 128x128 tiles (in 8 warps where the scalar gather needs them).
  std::vector<test::ConvCase> cases;
  std::vector<std::string> names;
  std::vector<test::ConvBuilt> built;
  std::vector<KernelLaunch> launches;
  std::vector<ModuleKernel> kernels;
  uint32_t seed = 1;
  KernelOptions options;
  options.conv_groups = codegen::ConvGroups::kGenerated;
  const ops::GemmConfig forced_tiles[] = {{64, 64, 32, 2, 2, 4}, {128, 128, 32, 2, 2, 3}, {128, 128, 32, 2, 4, 3}};
  const char* forced_names[] = {"", "_tiles64", "_tiles128", "_tiles128w8"};
  for (const test::ConvCase& c : test::ConvCases()) {
    std::string heuristic_src;
    bool have128 = false;
    for (int forced = 0; forced < 4; ++forced) {
      if (forced == 3 && have128) continue;
      absl::StatusOr<test::ConvBuilt> b = test::BuildConv(c, seed += 10);
      ASSERT_TRUE(b.ok()) << c.Name() << ": " << b.status();
      absl::StatusOr<std::vector<KernelLaunch>> l =
          forced ? ops::GenerateConv(*b->node, &forced_tiles[forced - 1]) : GenerateNodeKernels(*b->node, options);
      if (forced >= 2 && !l.ok()) continue;  // the gather's register budget refuses this 128x128 form
      ASSERT_TRUE(l.ok()) << c.Name() << ": " << l.status();
      ASSERT_EQ(l->size(), 1u);
      const std::string& src = (*l)[0].source;
      if (forced == 0) heuristic_src = src;
      if (forced && (src.find("#define GEMM_CONV 1") == std::string::npos || src == heuristic_src)) continue;
      if (forced >= 2) have128 = true;
      const std::string name = absl::StrCat(c.Name(), forced_names[forced]);
      cases.push_back(c);
      names.push_back(name);
      kernels.push_back({absl::StrCat("kiln_conv_", name), src});
      launches.push_back((*l)[0]);
      built.push_back(*std::move(b));
    }
  }
  absl::StatusOr<std::vector<std::string>> cubins = CompileModules(kernels, arch, kPerModule);
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  std::vector<cudaLibrary_t> libs(cubins->size());
  for (size_t i = 0; i < cubins->size(); ++i) {
    KILN_CUDA_OK(cudaLibraryLoadData(&libs[i], (*cubins)[i].data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  }
  int failures = 0;
  std::map<std::string, std::pair<int, float>> per_kind;  // kind -> cases, worst error
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const std::string& name = names[ci];
    SCOPED_TRACE(name);
    const Node& node = *built[ci].node;
    const KernelLaunch& l = launches[ci];
    const Value* y = node.output(0);
    test::NodeBuffers buf;
    ASSERT_NO_FATAL_FAILURE(buf.SetUp(node, built[ci].feeds));
    cudaKernel_t kernel;
    ASSERT_NO_FATAL_FAILURE(test::GetKernel(libs[ci / kPerModule], kernels[ci].function, l.shared_bytes, &kernel));
    ASSERT_NO_FATAL_FAILURE(test::LaunchAndWait(kernel, l, buf.dev));
    absl::StatusOr<std::vector<Tensor>> ref = EvaluateNode(node, buf.inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    const std::vector<float> g = buf.Output(node).ToFloat(), w = (*ref)[0].ToFloat();
    // The reference rounds the conv output to the storage dtype before the epilogue
    // (the kernel does not), so errors of a few storage ulps of |y| are expected.
    const float tol = y->dtype() == DType::kFloat16 ? 2e-2f : y->dtype() == DType::kBFloat16 ? 6e-2f : 1e-4f;
    const auto [worst, worst_i] = test::MaxScaledError(g, w);
    const bool ok = worst <= tol;
    EXPECT_TRUE(ok) << name << ": max scaled |err| " << worst << " at " << worst_i << " (got " << g[worst_i]
                    << ", want " << w[worst_i] << ")";
    failures += !ok;
    const bool gemm = l.source.find("#define GEMM_CONV 1") != std::string::npos;
    auto& [count, kind_worst] = per_kind[absl::StrCat(gemm ? "implicit GEMM " : "depthwise ", DTypeName(y->dtype()))];
    ++count;
    kind_worst = std::max(kind_worst, worst);
    if (!ok || std::getenv("KILN_CONV_TEST_VERBOSE") != nullptr) {
      std::printf("%-80s grid %u block %u smem %u: max scaled err %.3g %s\n", name.c_str(), l.grid[0], l.block[0],
                  l.shared_bytes, worst, ok ? "ok" : "FAIL");
    }
  }
  for (cudaLibrary_t lib : libs) cudaLibraryUnload(lib);
  for (const auto& [kind, r] : per_kind) {
    std::printf("  %-28s %4d cases, worst scaled err %.3g\n", kind.c_str(), r.first, r.second);
  }
  std::printf("ran %zu conv cases on %s (%s): %d failing\n", cases.size(), test::DeviceName().c_str(), arch.c_str(),
              failures);
}

}  // namespace
}  // namespace kiln::codegen
