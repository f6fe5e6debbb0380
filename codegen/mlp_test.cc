// Tests of the one-kernel MLP (codegen/ops/mlp.cc) that need no GPU: every case of
// codegen/mlp_test_cases.h generates one launch that compiles with NVRTC for sm_90a
// and sm_80, its grid covers the rows and columns, and the group is routed to it.
// codegen/mlp_gpu_test.cc runs them.
#include <gtest/gtest.h>

#include <vector>

#include "codegen/kernel_choice.h"
#include "codegen/mlp_test_cases.h"
#include "codegen/nvrtc_module.h"
#include "codegen/op_kernels.h"

namespace kiln::codegen {
namespace {

TEST(MlpCodegenTest, EveryCaseCompiles) {
  std::vector<ModuleKernel> kernels;
  uint32_t seed = 1;
  for (const test::MlpCase& c : test::MlpCases()) {
    absl::StatusOr<test::MlpBuilt> b = test::BuildMlp(c, seed += 10);
    ASSERT_TRUE(b.ok()) << c.Name() << ": " << b.status();
    EXPECT_EQ(ChooseGeneratedKernel(*b->node, KernelOptions{}).kind, KernelKind::kGenerated) << c.Name();
    absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*b->node, KernelOptions{});
    ASSERT_TRUE(l.ok()) << c.Name() << ": " << l.status();
    ASSERT_EQ(l->size(), 1u);
    const KernelLaunch& k = (*l)[0];
    const int64_t rows_per_cta = (c.n + k.grid[0] - 1) / k.grid[0];
    EXPECT_GE(static_cast<int64_t>(k.grid[0]) * rows_per_cta, c.n) << c.Name();
    EXPECT_GE(static_cast<int64_t>(k.grid[1]) * k.block[0], c.c) << c.Name();
    // Output, x, w1, w2, then the two biases.
    EXPECT_EQ(k.args.size(), 6u) << c.Name();
    kernels.push_back({absl::StrCat("kiln_mlp_", c.Name()), k.source});
  }
  for (const char* arch : {"sm_90a", "sm_80"}) {
    absl::StatusOr<std::vector<std::string>> cubins = CompileModules(kernels, arch, 8);
    EXPECT_TRUE(cubins.ok()) << arch << ": " << cubins.status();
  }
}

// Too many rows or too wide a weight: no kernel (fuse-mlp does not form such groups).
TEST(MlpCodegenTest, RefusesLargeShapes) {
  test::MlpCase wide{DType::kFloat16, 1, 4096, 64, false};
  absl::StatusOr<test::MlpBuilt> b = test::BuildMlp(wide, 3);
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*b->node, KernelOptions{});
  EXPECT_EQ(l.status().code(), absl::StatusCode::kUnimplemented) << l.status();
}

}  // namespace
}  // namespace kiln::codegen
