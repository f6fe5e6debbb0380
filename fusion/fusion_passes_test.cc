// The fusion passes in pipeline order (siblings, prologue, epilogue, pointwise) on a
// small transformer block: the groups expected, and fused == unfused on the CPU
// reference.
#include <gtest/gtest.h>

#include "fusion/fuse_epilogue.h"
#include "fusion/fuse_pointwise.h"
#include "fusion/fuse_prologue.h"
#include "fusion/fuse_siblings.h"
#include "fusion/fusion_test_util.h"
#include "fusion/fusion_report.h"

namespace kiln {
namespace {

using ::kiln::testing::ExpectSameResults;
using ::kiln::testing::ExpectValid;
using ::kiln::testing::ParseTyped;
using ::kiln::testing::RandomizeConstants;
using ::kiln::testing::Summary;

constexpr char kBlock[] = R"(
graph @main {
  input %x : f32[2,4,16]
  input %mask : f32[2,1,1,4]
  const %g1 : f32[16] = splat(1.0)
  const %be1 : f32[16] = splat(0.0)
  const %wq : f32[16,16] = splat(0.1)
  const %wk : f32[16,16] = splat(0.1)
  const %wv : f32[16,16] = splat(0.1)
  const %scale : f32[] = [0.25]
  const %wo : f32[16,16] = splat(0.1)
  const %bo : f32[16] = splat(0.1)
  const %g2 : f32[16] = splat(1.0)
  const %be2 : f32[16] = splat(0.0)
  const %w1 : f32[16,32] = splat(0.1)
  const %b1 : f32[32] = splat(0.1)
  const %w2 : f32[32,16] = splat(0.1)
  const %b2 : f32[16] = splat(0.1)
  const %shape4 : i64[4] = [2, 4, 1, 16]
  const %shape3 : i64[3] = [2, 4, 16]
  %ln1 = LayerNormalization(%x, %g1, %be1) @ln1
  %q = MatMul(%ln1, %wq) @q
  %k = MatMul(%ln1, %wk) @k
  %v = MatMul(%ln1, %wv) @v
  %q4 = Reshape(%q, %shape4) @q4
  %k4 = Reshape(%k, %shape4) @k4
  %v4 = Reshape(%v, %shape4) @v4
  %qh = Transpose(%q4) {perm = [0, 2, 1, 3]} @qh
  %kh = Transpose(%k4) {perm = [0, 2, 3, 1]} @kh
  %vh = Transpose(%v4) {perm = [0, 2, 1, 3]} @vh
  %s = MatMul(%qh, %kh) @scores
  %ss = Mul(%s, %scale) @scale
  %sm = Add(%ss, %mask) @masked
  %p = Softmax(%sm) {axis = -1} @softmax
  %o = MatMul(%p, %vh) @attn
  %ot = Transpose(%o) {perm = [0, 2, 1, 3]} @ot
  %o3 = Reshape(%ot, %shape3) @o3
  %pr = MatMul(%o3, %wo) @proj
  %pb = Add(%pr, %bo) @proj_bias
  %h = Add(%pb, %x) @residual1
  %ln2 = LayerNormalization(%h, %g2, %be2) @ln2
  %up = MatMul(%ln2, %w1) @up
  %ub = Add(%up, %b1) @up_bias
  %ge = Gelu(%ub) @gelu
  %dn = MatMul(%ge, %w2) @down
  %db = Add(%dn, %b2) @down_bias
  %y = Add(%db, %h) @residual2
  output %y
}
)";

TEST(FusionPassesTest, TransformerBlock) {
  std::unique_ptr<Graph> g = ParseTyped(kBlock);
  RandomizeConstants(*g, 21);
  std::unique_ptr<Graph> original = g->Clone();
  FusionReport report;
  ASSERT_TRUE(*FuseSiblings(&report).Run(*g));
  // The only prologue candidate (Gelu before 'down') is 'up''s epilogue.
  ASSERT_FALSE(*FusePrologue(&report).Run(*g)) << Summary(*g);
  ASSERT_TRUE(*FuseEpilogue(&report).Run(*g));
  EXPECT_FALSE(*FusePointwise(&report).Run(*g)) << Summary(*g);  // nothing left for it
  ExpectValid(*g);
  ExpectSameResults(*original, *g);
  EXPECT_EQ(Summary(*g),
            "LayerNormalization @ln1\n"
            "Reshape @q/siblings_rows\n"  // the stacked QKV layout views X as [M, K]
            "MatMul @q/siblings\n"
            "Split @q/split\n"
            "Reshape @q4\n"
            "Reshape @k4\n"
            "Reshape @v4\n"
            "Transpose @qh\n"
            "Transpose @kh\n"
            "Transpose @vh\n"
            // The scale and the mask are element-wise on the scores' output: the
            // scores' epilogue takes them before FusePointwise could give them to
            // the Softmax (either way they leave one full pass over the scores).
            "FusedGroup matmul+epilogue [scores, scale, masked] anchor=scores\n"
            "Softmax @softmax\n"
            "MatMul @attn\n"
            "Transpose @ot\n"
            "Reshape @o3\n"
            "FusedGroup matmul+epilogue [proj, proj_bias, residual1] anchor=proj\n"
            "LayerNormalization @ln2\n"
            "FusedGroup matmul+epilogue [up, up_bias, gelu] anchor=up\n"
            "FusedGroup matmul+epilogue [down, down_bias, residual2] anchor=down\n")
      << report.ToString();
}

TEST(FusionPassesTest, ReportListsEachGroupOnceWithItsOnnxNodes) {
  using G = FusionReport::Group;
  const std::vector<G> formed = {
      G{"fuse-siblings", "q/siblings", "siblings", {"q", "q_bias", "k", "k_bias"}},
      G{"fuse-prologue", "group_up", "prologue+matmul", {"up", "relu"}},
      G{"fuse-epilogue", "group_q/siblings", "matmul+epilogue", {"q/siblings", "q/siblings_bias_add"}},
      G{"fuse-epilogue", "group_up", "prologue+matmul+epilogue", {"up", "relu", "up_bias"}},
  };
  const std::vector<G> groups = FinalGroups(formed);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].name, "group_q/siblings");
  EXPECT_EQ(groups[0].pass, "fuse-siblings+fuse-epilogue");
  EXPECT_EQ(groups[0].members,
            (std::vector<std::string>{"q", "q_bias", "k", "k_bias", "q/siblings_bias_add"}));
  EXPECT_EQ(groups[1].name, "group_up");
  EXPECT_EQ(groups[1].pattern, "prologue+matmul+epilogue");
  EXPECT_EQ(groups[1].members, (std::vector<std::string>{"up", "relu", "up_bias"}));
}

}  // namespace
}  // namespace kiln
