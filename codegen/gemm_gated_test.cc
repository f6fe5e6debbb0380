// Host tests of the gated product on the Hopper family (codegen/ops/gemm.cc's
// GatedHalves, gemm_sm90.cc): the plan (B twice C's width, the epilogue from both
// accumulators), the tile rules (unswapped, at least 128 columns), the routing (the
// sm_80 template refuses; auto on sm_90a takes it), and every case's kernels compile
// for sm_90a with NVRTC. gemm_paired_gpu_test.cc runs them against the CPU reference.
#include <gtest/gtest.h>

#include "codegen/gemm_gated_test_cases.h"
#include "codegen/gemm_paired_test_util.h"
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
  const std::vector<const char*> refused = {"64x64 c1x1 s8", "128x192 c2x1 s5", "64x64 c1x1 s8 swap"};
  ASSERT_NO_FATAL_FAILURE(paired_test::ExpectTileRulesAndRouting(*b.group, refused, "gated product", 128));
}

// The heuristic's kernel of every case and two forced forms (C in chunks, split-K)
// compile for sm_90a.
TEST(GemmGatedTest, KernelsCompileForSm90a) {
  std::vector<ModuleKernel> kernels;
  for (const GatedCase& c : Cases()) {
    Built b;
    ASSERT_NO_FATAL_FAILURE(Build(c, 1, b));
    ASSERT_NO_FATAL_FAILURE(
        paired_test::AppendSm90Kernel(*b.group, nullptr, absl::StrCat("kiln_gated_", c.name), kernels));
  }
  Built b;
  ASSERT_NO_FATAL_FAILURE(Build(Cases()[3], 1, b));
  for (const char* forced : {"128x256 c2x1 s4", "128x128 c2x1 s4 k2"}) {
    ASSERT_NO_FATAL_FAILURE(
        paired_test::AppendSm90Kernel(*b.group, forced, absl::StrCat("kiln_gated_forced_", kernels.size()), kernels));
  }
  absl::StatusOr<std::string> cubin = CompileModule(kernels, "sm_90a");
  EXPECT_TRUE(cubin.ok()) << cubin.status();
}

}  // namespace
}  // namespace kiln::codegen
