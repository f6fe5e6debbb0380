// Tests for FusePointwise: element-wise DAGs, Softmax with
// scale and mask, must-not-fire cases, and fused == unfused on the CPU reference.
#include "fusion/fuse_pointwise.h"

#include <gtest/gtest.h>

#include "fusion/fusion_test_util.h"

namespace kiln {
namespace {

using ::kiln::testing::ExpectOneRejection;
using ::kiln::testing::Groups;
using ::kiln::testing::Summary;

// Runs FusePointwise on `text` (constants randomised with seed 13); see testing::RunFusionPass.
std::unique_ptr<Graph> FuseAndCheck(const std::string& text, FusionReport* report, bool* changed = nullptr) {
  return ::kiln::testing::RunFusionPass<FusePointwise>(text, report, 13, changed);
}

TEST(FusePointwiseTest, ChainWithBroadcastInputsAndResidual) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,8]
  const %s : f32[] = [0.5]
  const %b : f32[8] = splat(0.1)
  %a = Mul(%x, %s) @scale
  %c = Add(%a, %b) @bias
  %t = Tanh(%c) @tanh
  %y = Add(%t, %x) @residual
  output %y
}
)",
                        &report);
  EXPECT_EQ(Summary(*g), "FusedGroup pointwise [scale, bias, tanh, residual] anchor=\n");
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].pass, "fuse-pointwise");
  EXPECT_EQ(report.groups[0].pattern, "pointwise");
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
}

TEST(FusePointwiseTest, DiamondWithExtraOutput) {
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[2,3,4]
  %e = Exp(%x) @exp
  %n = Neg(%x) @neg
  %s = Add(%e, %n) @sum
  %y = Sigmoid(%s) @sig
  output %y
  output %e
}
)",
                        nullptr);
  EXPECT_EQ(Summary(*g), "FusedGroup pointwise [exp, neg, sum, sig] anchor=\n");
  EXPECT_EQ(Groups(*g)[0]->num_outputs(), 2);
}

TEST(FusePointwiseTest, DifferentShapesMakeSeparateGroups) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %v : f32[8]
  input %x : f32[4,8]
  %a = Relu(%v) @relu
  %b = Exp(%a) @exp
  %c = Add(%x, %b) @add
  %d = Tanh(%c) @tanh
  output %d
}
)",
                        &report);
  EXPECT_EQ(Summary(*g),
            "FusedGroup pointwise [relu, exp] anchor=\nFusedGroup pointwise [add, tanh] anchor=\n");
  ExpectOneRejection(report, {"exp", "add"}, "shape: ");
}

TEST(FusePointwiseTest, TakesStridedViewsItIsTheOnlyReaderOf) {
  // GPT-2's padded logits: Cast(Slice(x)) is one kernel; a Transpose and an Expand
  // feeding a chain join it; the Slice of %x read by the group and outside does not.
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f16[4,24]
  input %p : f32[2,3,5]
  input %q : f32[2,1,3]
  const %st : i64[1] = [0]
  const %en : i64[1] = [21]
  const %ax : i64[1] = [1]
  const %shape : i64[3] = [2,5,3]
  %s = Slice(%x, %st, %en, %ax) @slice
  %y = Cast(%s) {to = 1} @cast
  %t = Transpose(%p) {perm = [0, 2, 1]} @transpose
  %e = Expand(%q, %shape) @expand
  %a = Add(%t, %e) @add
  %r = Relu(%a) @relu
  %s2 = Slice(%x, %st, %en, %ax) @slice2
  %n = Neg(%s2) @neg
  %m = Exp(%n) @exp
  output %y
  output %r
  output %m
  output %s2
}
)",
                        &report);
  EXPECT_EQ(Summary(*g),
            "Slice @slice2\n"
            "FusedGroup pointwise [slice, cast] anchor=\n"
            "FusedGroup pointwise [transpose, expand, add, relu] anchor=\n"
            "FusedGroup pointwise [neg, exp] anchor=\n");
}

TEST(FusePointwiseTest, TakesAChainOfViews) {
  // Llama's rotary embedding after recognize-rope: the head split's Transpose of the
  // [B,S,H,2,D/2] projection, read directly and through a Slice of step -1 (the halves
  // swapped): one kernel reads x0 through Transpose and Transpose-then-Slice.
  auto g = FuseAndCheck(R"(
graph @main {
  input %x0 : f16[2,5,3,2,4]
  input %c : f16[1,1,5,2,4]
  input %sign : f16[2,1]
  const %st : i64[1] = [1]
  const %en : i64[1] = [-9223372036854775808]
  const %ax : i64[1] = [3]
  const %sp : i64[1] = [-1]
  %t = Transpose(%x0) {perm = [0, 2, 1, 3, 4]} @heads
  %s = Slice(%t, %st, %en, %ax, %sp) @swap
  %r = Mul(%s, %sign) @rotate_half
  %a = Mul(%t, %c) @x_cos
  %y = Add(%a, %r) @add
  output %y
}
)",
                        nullptr);
  EXPECT_EQ(Summary(*g), "FusedGroup pointwise [heads, swap, rotate_half, x_cos, add] anchor=\n");
}

TEST(FusePointwiseTest, DoesNotTakeAViewOfAValueComputedInTheGroup) {
  // The kernel reads group inputs through views, never a member's registers: relu ->
  // transpose -> add cannot be one group (not convex without the Transpose), and the
  // Transpose joins add's group reading relu's stored output.
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,4]
  %a = Relu(%x) @relu
  %t = Transpose(%a) {perm = [1, 0]} @transpose
  %y = Add(%a, %t) @add
  output %y
}
)",
                        nullptr);
  EXPECT_EQ(Summary(*g), "Relu @relu\nFusedGroup pointwise [transpose, add] anchor=\n");
}

TEST(FusePointwiseTest, MustNotFire) {
  // One element-wise op alone; a merge that would not be convex (Softmax sits
  // between exp and add); integer arithmetic.
  FusionReport report;
  bool changed = true;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,8]
  input %i : i64[4]
  %r = Relu(%x) @lone
  %s = Softmax(%r) @softmax
  %e = Exp(%s) @exp
  %t = Softmax(%e) @softmax2
  %y = Add(%e, %t) @add
  %j = Add(%i, %i) @int_add
  output %y
  output %j
}
)",
                        &report, &changed);
  EXPECT_FALSE(changed);
  EXPECT_TRUE(Groups(*g).empty());
  ASSERT_EQ(report.rejections.size(), 2u) << report.ToString();
  EXPECT_EQ(report.rejections[0].nodes, (std::vector<std::string>{"exp", "add"}));
  EXPECT_TRUE(absl::StartsWith(report.rejections[0].reason, "not convex: ")) << report.rejections[0].reason;
  EXPECT_EQ(report.rejections[1].nodes, (std::vector<std::string>{"int_add"}));
  EXPECT_TRUE(absl::StartsWith(report.rejections[1].reason, "dtype: ")) << report.rejections[1].reason;
}

TEST(FusePointwiseTest, SoftmaxTakesScaleAndMask) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %scores : f32[2,4,6,6]
  input %mask : f32[2,1,1,6]
  const %scale : f32[] = [0.125]
  %s = Mul(%scores, %scale) @scale
  %m = Add(%s, %mask) @mask
  %p = Softmax(%m) {axis = -1} @softmax
  output %p
}
)",
                        &report);
  EXPECT_EQ(Summary(*g), "FusedGroup softmax [scale, mask, softmax] anchor=\n");
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].pattern, "softmax");
}

TEST(FusePointwiseTest, SoftmaxTakesDivScaleOnly) {
  auto g = FuseAndCheck(R"(
graph @main {
  input %scores : f32[4,6,6]
  const %d : f32[] = [8.0]
  %s = Div(%scores, %d) @scale
  %p = Softmax(%s) @softmax
  output %p
}
)",
                        nullptr);
  EXPECT_EQ(Summary(*g), "FusedGroup softmax [scale, softmax] anchor=\n");
}

TEST(FusePointwiseTest, SoftmaxMustNotFire) {
  // Softmax over a non-last axis; masked scores read elsewhere.
  FusionReport report;
  bool changed = true;
  auto g = FuseAndCheck(R"(
graph @main {
  input %a : f32[4,6]
  input %b : f32[4,6]
  const %s : f32[] = [0.5]
  %x = Mul(%a, %s) @scale0
  %p = Softmax(%x) {axis = 0} @softmax0
  %m = Add(%b, %b) @mask1
  %q = Softmax(%m) @softmax1
  output %p
  output %q
  output %m
}
)",
                        &report, &changed);
  EXPECT_FALSE(changed);
  EXPECT_TRUE(Groups(*g).empty());
  ASSERT_EQ(report.rejections.size(), 2u) << report.ToString();
  EXPECT_TRUE(absl::StartsWith(report.rejections[0].reason, "unsupported op: ")) << report.rejections[0].reason;
  EXPECT_TRUE(absl::StartsWith(report.rejections[1].reason, "other consumers: ")) << report.rejections[1].reason;
}

}  // namespace
}  // namespace kiln
