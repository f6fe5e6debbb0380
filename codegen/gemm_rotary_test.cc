// Host tests of the rotary product on the Hopper family (codegen/ops/gemm_plan.cc's
// RotaryPartner, gemm_sm90.cc): the plan (the partner column half a head away, C as
// wide as B), the tile rules (unswapped, whole pairs of column blocks), the routing
// (the sm_80 template refuses; auto on sm_90a takes it), and every case's kernels
// compile for sm_90a with NVRTC. gemm_paired_gpu_test.cc runs them against the CPU
// reference.
#include <gtest/gtest.h>

#include "codegen/gemm_paired_test_util.h"
#include "codegen/gemm_rotary_test_cases.h"
#include "codegen/ops/gemm_sm90.h"

namespace kiln::codegen {
namespace {

using namespace rotary_test;  // NOLINT: the cases are this file's vocabulary

TEST(GemmRotaryTest, PlansThePartnerIntoTheEpilogue) {
  for (const RotaryCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    Built b;
    ASSERT_NO_FATAL_FAILURE(Build(c, 1, b));
    absl::StatusOr<ops::GemmFamilyPlan> p = ops::PlanGemmForFamily(*b.group);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_FALSE(p->gated);
    EXPECT_EQ(p->rotary_half, c.head_dim / 2);
    EXPECT_EQ(p->n, (c.q_heads + 2 * c.kv_heads) * c.head_dim);
    EXPECT_EQ(p->c_n, p->n);
    EXPECT_EQ(p->k, c.k);
    EXPECT_NE(p->epilogue_defines.find(absl::StrCat("#define GEMM_ROTARY ", c.head_dim / 2, "\n")), std::string::npos);
    EXPECT_NE(p->epilogue_function.find("kiln_epilogue_rotary(float acc, float acc_partner"), std::string::npos);
    EXPECT_EQ(p->epilogue_defines.find("KILN_EPILOGUE_AT"), std::string::npos);
    EXPECT_EQ(p->epilogue_args.size(), 2u);  // the cos and sin tables
    EXPECT_TRUE(ops::Sm90Eligible(*b.group).ok()) << ops::Sm90Eligible(*b.group);
    absl::StatusOr<ops::Sm90GemmConfig> h = ops::HeuristicSm90GemmConfig(*b.group);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(h->bn % c.head_dim, 0) << ops::Sm90GemmConfigString(*h);
    EXPECT_FALSE(h->swap_ab);
  }
}

TEST(GemmRotaryTest, TileRulesAndRouting) {
  Built b;
  ASSERT_NO_FATAL_FAILURE(Build(Cases()[2], 1, b));  // head dim 128
  const std::vector<const char*> refused = {"64x64 c1x1 s8", "128x192 c2x1 s5", "64x128 c1x1 s8 swap"};
  ASSERT_NO_FATAL_FAILURE(paired_test::ExpectTileRulesAndRouting(*b.group, refused, "rotary product", 128));
}

// The heuristic's kernel of every case and two forced forms (64-column tiles,
// split-K) compile for sm_90a.
TEST(GemmRotaryTest, KernelsCompileForSm90a) {
  std::vector<ModuleKernel> kernels;
  for (const RotaryCase& c : Cases()) {
    Built b;
    ASSERT_NO_FATAL_FAILURE(Build(c, 1, b));
    ASSERT_NO_FATAL_FAILURE(
        paired_test::AppendSm90Kernel(*b.group, nullptr, absl::StrCat("kiln_rotary_", c.name), kernels));
  }
  Built b;
  ASSERT_NO_FATAL_FAILURE(Build(Cases()[3], 1, b));
  for (const char* forced : {"64x64 p2x1 s8", "128x128 c2x1 s4 k2"}) {
    ASSERT_NO_FATAL_FAILURE(
        paired_test::AppendSm90Kernel(*b.group, forced, absl::StrCat("kiln_rotary_forced_", kernels.size()), kernels));
  }
  absl::StatusOr<std::string> cubin = CompileModule(kernels, "sm_90a");
  EXPECT_TRUE(cubin.ok()) << cubin.status();
}

}  // namespace
}  // namespace kiln::codegen
