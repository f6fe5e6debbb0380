// Tests for FuseSiblings: the shared-input rewrite (expected text), dual-matmul
// groups, must-not-fire cases, and fused == unfused on the CPU reference.
#include "fusion/fuse_siblings.h"

#include <gtest/gtest.h>

#include "fusion/fuse_epilogue.h"
#include "fusion/fusion_test_util.h"

namespace kiln {
namespace {

using ::kiln::testing::ExpectOneRejection;
using ::kiln::testing::ExpectSameResults;
using ::kiln::testing::ExpectValid;
using ::kiln::testing::Groups;
using ::kiln::testing::ParseTyped;
using ::kiln::testing::RandomizeConstants;
using ::kiln::testing::Summary;

// Runs FuseSiblings on `text` (constants randomised with seed 5); see testing::RunFusionPass.
std::unique_ptr<Graph> FuseAndCheck(const std::string& text, FusionReport* report, bool* changed = nullptr) {
  return ::kiln::testing::RunFusionPass<FuseSiblings>(text, report, 5, changed);
}

TEST(FuseSiblingsTest, ConcatenatesWeightsOfSharedInput) {
  std::unique_ptr<Graph> g = ParseTyped(R"(
graph @main {
  input %x : f32[3,2]
  const %wq : f32[2,1] = [1.0, 2.0]
  const %wk : f32[2,2] = [3.0, 4.0, 5.0, 6.0]
  %q = MatMul(%x, %wq) @q
  %k = MatMul(%x, %wk) @k
  %r = Relu(%k) @relu
  output %q
  output %r
}
)");
  FusionReport report;
  ASSERT_TRUE(*FuseSiblings(&report).Run(*g));
  ExpectValid(*g);
  // Column block i of the new weight is W_i: rows [1 | 3 4] and [2 | 5 6].
  EXPECT_EQ(PrintGraph(*g), R"(graph @main {
  input %x : f32[3,2]
  const %q/siblings_weight : f32[2,3] = [1.0, 3.0, 4.0, 2.0, 5.0, 6.0]
  const %q/split_sizes : i64[2] = [1, 2]
  %q/siblings_out : f32[3,3] = MatMul(%x, %q/siblings_weight) @q/siblings
  %q : f32[3,1], %k : f32[3,2] = Split(%q/siblings_out, %q/split_sizes) {axis = -1} @q/split
  %r : f32[3,2] = Relu(%k) @relu
  output %q
  output %r
}
)");
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].pass, "fuse-siblings");
  EXPECT_EQ(report.groups[0].name, "q/siblings");
  EXPECT_EQ(report.groups[0].pattern, "siblings");
  EXPECT_EQ(report.groups[0].members, (std::vector<std::string>{"q", "k"}));
}

TEST(FuseSiblingsTest, QkvOnBatchedInputMatchesReference) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[2,5,16]
  const %wq : f32[16,8] = splat(0.5)
  const %wk : f32[16,8] = splat(0.5)
  const %wv : f32[16,12] = splat(0.5)
  %q = MatMul(%x, %wq) @q
  %k = MatMul(%x, %wk) @k
  %v = MatMul(%x, %wv) @v
  %kt = Transpose(%k) {perm = [0, 2, 1]} @kt
  %s = MatMul(%q, %kt) @scores
  %o = MatMul(%s, %v) @out
  output %o
}
)",
                        &report);
  EXPECT_EQ(Summary(*g), "MatMul @q/siblings\nSplit @q/split\nTranspose @kt\nMatMul @scores\nMatMul @out\n");
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].members, (std::vector<std::string>{"q", "k", "v"}));
}

// Each sibling's bias Add is pulled above the Split as one concatenated bias, so the
// merged MatMul can take it as an epilogue; results are unchanged (RunFusionPass
// compares with the unfused graph on random inputs and constants).
TEST(FuseSiblingsTest, ConcatenatesBiasesWhenEverySiblingHasOne) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[2,5,16]
  const %wq : f32[16,8] = splat(0.5)
  const %wk : f32[16,8] = splat(0.5)
  const %wv : f32[16,12] = splat(0.5)
  const %bq : f32[8] = splat(0.1)
  const %bk : f32[1,8] = splat(0.2)
  const %bv : f32[12] = splat(0.3)
  %q0 = MatMul(%x, %wq) @q
  %k0 = MatMul(%x, %wk) @k
  %v0 = MatMul(%x, %wv) @v
  %q = Add(%q0, %bq) @q_bias
  %k = Add(%bk, %k0) @k_bias
  %v = Add(%v0, %bv) @v_bias
  %s = Add(%q, %k) @sum
  output %s
  output %v
}
)",
                        &report);
  EXPECT_EQ(Summary(*g), "MatMul @q/siblings\nAdd @q/siblings_bias_add\nSplit @q/split\nAdd @sum\n");
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].members,
            (std::vector<std::string>{"q", "q_bias", "k", "k_bias", "v", "v_bias"}));
  const Value* bias = g->FindValue("q/siblings_bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->shape(), (Shape{28}));

  // One sibling without a bias: the biases stay below the Split.
  FusionReport partial;
  auto h = FuseAndCheck(R"(
graph @main {
  input %x : f32[3,4]
  const %wq : f32[4,2] = splat(0.5)
  const %wk : f32[4,2] = splat(0.5)
  const %bq : f32[2] = splat(0.1)
  %q0 = MatMul(%x, %wq) @q
  %k = MatMul(%x, %wk) @k
  %q = Add(%q0, %bq) @q_bias
  %s = Mul(%q, %k) @prod
  output %s
}
)",
                        &partial);
  EXPECT_EQ(Summary(*h), "MatMul @q/siblings\nSplit @q/split\nAdd @q_bias\nMul @prod\n");
}

TEST(FuseSiblingsTest, SharedInputMustNotFire) {
  // A computed weight, and x read as the second MatMul input (not a sibling).
  FusionReport report;
  bool changed = true;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,4]
  input %wc : f32[4,6]
  const %w : f32[4,6] = splat(0.5)
  const %l : f32[3,4] = splat(0.5)
  %a = MatMul(%x, %w) @a
  %b = MatMul(%x, %wc) @b
  %c = MatMul(%l, %x) @c
  output %a
  output %b
  output %c
}
)",
                        &report, &changed);
  EXPECT_FALSE(changed);
  EXPECT_EQ(Summary(*g), "MatMul @a\nMatMul @b\nMatMul @c\n");
  ExpectOneRejection(report, {"a", "b"}, "unsupported op: ");
}

TEST(FuseSiblingsTest, DualMatMul) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,8]
  input %h : f32[4,16]
  const %w1 : f32[8,6] = splat(0.5)
  const %w2 : f32[16,6] = splat(0.5)
  %p = MatMul(%x, %w1) @mm1
  %q = MatMul(%h, %w2) @mm2
  %y = Add(%q, %p) @sum
  output %y
}
)",
                        &report);
  EXPECT_EQ(Summary(*g), "FusedGroup dual-matmul [mm1, mm2, sum] anchor=mm1\n");
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].pattern, "dual-matmul");
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
}

TEST(FuseSiblingsTest, DualMatMulTakesAnEpilogue) {
  std::unique_ptr<Graph> g = ParseTyped(R"(
graph @main {
  input %x : f32[4,8]
  input %h : f32[4,16]
  const %w1 : f32[8,6] = splat(0.5)
  const %w2 : f32[16,6] = splat(0.5)
  const %b : f32[6] = splat(0.5)
  %p = MatMul(%x, %w1) @mm1
  %q = MatMul(%h, %w2) @mm2
  %s = Add(%p, %q) @sum
  %a = Add(%s, %b) @bias
  %y = Relu(%a) @relu
  output %y
}
)");
  RandomizeConstants(*g, 2);
  std::unique_ptr<Graph> original = g->Clone();
  ASSERT_TRUE(*FuseSiblings().Run(*g));
  ASSERT_TRUE(*FuseEpilogue().Run(*g));
  ExpectValid(*g);
  EXPECT_EQ(Summary(*g), "FusedGroup dual-matmul+epilogue [mm1, mm2, sum, bias, relu] anchor=mm1\n");
  ExpectSameResults(*original, *g);
}

TEST(FuseSiblingsTest, DualMatMulMustNotFireOnDifferentShapes) {
  FusionReport report;
  bool changed = true;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,8]
  input %v : f32[1,8]
  const %w1 : f32[8,6] = splat(0.5)
  const %w2 : f32[8,6] = splat(0.25)
  %p = MatMul(%x, %w1) @mm1
  %q = MatMul(%v, %w2) @mm2
  %y = Add(%p, %q) @broadcast_sum
  output %y
}
)",
                        &report, &changed);
  EXPECT_FALSE(changed);
  EXPECT_TRUE(Groups(*g).empty());
  ExpectOneRejection(report, {"mm1", "mm2", "broadcast_sum"}, "shape: ");
}

TEST(FuseSiblingsTest, DualMatMulOtherConsumers) {
  FusionReport report;
  bool changed = true;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,8]
  input %h : f32[4,8]
  const %w1 : f32[8,6] = splat(0.5)
  const %w2 : f32[8,6] = splat(0.25)
  %p = MatMul(%x, %w1) @mm1
  %q = MatMul(%h, %w2) @mm2
  %y = Add(%p, %q) @sum
  output %y
  output %q
}
)",
                        &report, &changed);
  EXPECT_FALSE(changed);
  EXPECT_TRUE(Groups(*g).empty());
  ExpectOneRejection(report, {"mm1", "mm2", "sum"}, "other consumers: ");
}

}  // namespace
}  // namespace kiln
