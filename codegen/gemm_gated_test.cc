// Host tests of the gated product on the Hopper family (codegen/ops/gemm.cc's
// GatedHalves, gemm_sm90.cc): the plan (B twice C's width, the epilogue from both
// accumulators), the tile rules (unswapped, at least 128 columns), the routing (the
// sm_80 template refuses; auto on sm_90a takes it), and every case's kernels compile
// for sm_90a with NVRTC. gemm_paired_gpu_test.cc runs them against the CPU reference.
#include <gtest/gtest.h>

#include "codegen/gemm_gated_test_cases.h"
#include "codegen/kernel_choice.h"
#include "codegen/nvrtc_module.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_sm90.h"

namespace kiln::codegen {
namespace {

using namespace gated_test;  // NOLINT: the cases are this file's vocabulary

TEST(GemmGatedTest, PlansBothHalvesIntoOneEpilogue) {
  for (const GatedCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    Built b;
    ASSERT_NO_FATAL_FAILURE(Build(c, 1, b));
    absl::StatusOr<ops::GemmFamilyPlan> p = ops::PlanGemmForFamily(*b.group);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_TRUE(p->gated);
    EXPECT_EQ(p->n, 2 * c.n);
    EXPECT_EQ(p->c_n, c.n);
    EXPECT_EQ(p->k, c.k);
    EXPECT_NE(p->epilogue_defines.find("#define GEMM_GATED 1"), std::string::npos);
    EXPECT_NE(p->epilogue_function.find("kiln_epilogue_gated(float acc, float acc_up"), std::string::npos);
    // The column operands of the TMA-store functor are not used with a gate.
    EXPECT_EQ(p->epilogue_defines.find("KILN_EPILOGUE_AT"), std::string::npos);
    EXPECT_EQ(p->epilogue_args.size(), c.geglu ? 1u : 0u);  // the up product's scale
    EXPECT_TRUE(ops::Sm90Eligible(*b.group).ok()) << ops::Sm90Eligible(*b.group);
    absl::StatusOr<ops::Sm90GemmConfig> h = ops::HeuristicSm90GemmConfig(*b.group);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(h->bn % 128, 0) << ops::Sm90GemmConfigString(*h);
    EXPECT_FALSE(h->swap_ab);
  }
}

TEST(GemmGatedTest, TileRulesAndRouting) {
  Built b;
  ASSERT_NO_FATAL_FAILURE(Build(Cases()[1], 1, b));
  for (const char* narrow : {"64x64 c1x1 s8", "128x192 c2x1 s5", "64x64 c1x1 s8 swap"}) {
    absl::StatusOr<ops::Sm90GemmConfig> cfg = ops::ParseSm90GemmConfig(narrow);
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    const absl::Status st = ops::Sm90ConfigFits(*b.group, *cfg);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << narrow << ": " << st;
    EXPECT_NE(st.message().find("gated product"), absl::string_view::npos) << st;
  }
  EXPECT_FALSE(ops::Sm90SwapAbEligible(*b.group).ok());
  // Every config the tuner would measure is one the generator takes.
  for (const ops::Sm90GemmConfig& cfg : ops::Sm90CandidateConfigs(*b.group)) {
    EXPECT_EQ(cfg.bn % 128, 0) << ops::Sm90GemmConfigString(cfg);
    EXPECT_FALSE(cfg.swap_ab) << ops::Sm90GemmConfigString(cfg);
  }
  // The sm_80 template has no paired epilogue: NoKernel, and the choice says so (the
  // group is then expanded into its members).
  const absl::Status sm80 = ops::GenerateMatMulGroup(*b.group).status();
  EXPECT_EQ(sm80.code(), absl::StatusCode::kUnimplemented) << sm80;
  EXPECT_NE(sm80.message().find("gated or rotary product"), absl::string_view::npos) << sm80;
  KernelOptions hopper;
  hopper.matmul_groups = MatMulGroups::kAuto;
  hopper.hopper = true;
  EXPECT_EQ(ChooseKernel(*b.group, hopper).kind, KernelKind::kGemm) << ChooseKernel(*b.group, hopper).Describe();
  KernelOptions sm80_generated;
  sm80_generated.matmul_groups = MatMulGroups::kGenerated;
  const KernelChoice none = ChooseKernel(*b.group, sm80_generated);
  ASSERT_FALSE(none.gemm.ok()) << none.Describe();
  EXPECT_NE(none.gemm.status().message().find("gated or rotary product"), absl::string_view::npos) << none.Describe();
  EXPECT_EQ(GenerateNodeKernels(*b.group, sm80_generated).status().code(), absl::StatusCode::kUnimplemented);
}

// The heuristic's kernel of every case and two forced forms (C in chunks, split-K)
// compile for sm_90a.
TEST(GemmGatedTest, KernelsCompileForSm90a) {
  std::vector<ModuleKernel> kernels;
  for (const GatedCase& c : Cases()) {
    Built b;
    ASSERT_NO_FATAL_FAILURE(Build(c, 1, b));
    absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateMatMulGroupSm90(*b.group);
    ASSERT_TRUE(l.ok()) << c.name << ": " << l.status();
    kernels.push_back({absl::StrCat("kiln_gated_", c.name), (*l)[0].source});
  }
  Built b;
  ASSERT_NO_FATAL_FAILURE(Build(Cases()[3], 1, b));
  for (const char* forced : {"128x256 c2x1 s4", "128x128 c2x1 s4 k2"}) {
    absl::StatusOr<ops::Sm90GemmConfig> cfg = ops::ParseSm90GemmConfig(forced);
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateMatMulGroupSm90(*b.group, &*cfg);
    ASSERT_TRUE(l.ok()) << forced << ": " << l.status();
    kernels.push_back({absl::StrCat("kiln_gated_forced_", kernels.size()), (*l)[0].source});
  }
  absl::StatusOr<std::string> cubin = CompileModule(kernels, "sm_90a");
  EXPECT_TRUE(cubin.ok()) << cubin.status();
}

}  // namespace
}  // namespace kiln::codegen
