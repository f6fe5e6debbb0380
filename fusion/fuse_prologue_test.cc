// Tests for FusePrologue: groups formed, must-not-fire cases (constant weights,
// other consumers), and fused == unfused on the CPU reference.
#include "fusion/fuse_prologue.h"

#include <gtest/gtest.h>

#include "fusion/fusion_test_util.h"

namespace kiln {
namespace {

using ::kiln::testing::ExpectOneRejection;
using ::kiln::testing::Groups;
using ::kiln::testing::Summary;

// Runs FusePrologue on `text` (constants randomised with seed 11); see testing::RunFusionPass.
std::unique_ptr<Graph> FuseAndCheck(const std::string& text, FusionReport* report, bool* changed = nullptr) {
  return ::kiln::testing::RunFusionPass<FusePrologue>(text, report, 11, changed);
}

TEST(FusePrologueTest, ChainsOnBothInputs) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,8]
  input %v : f32[8,6]
  const %s : f32[] = [0.5]
  const %b : f32[8] = splat(0.1)
  %xs = Mul(%x, %s) @scale
  %xb = Add(%xs, %b) @bias
  %xr = Relu(%xb) @relu
  %vs = Sigmoid(%v) @sig
  %y = MatMul(%xr, %vs) @mm
  output %y
}
)",
                        &report);
  EXPECT_EQ(Summary(*g), "FusedGroup prologue+matmul [scale, bias, relu, sig, mm] anchor=mm\n");
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].pass, "fuse-prologue");
  EXPECT_EQ(report.groups[0].pattern, "prologue+matmul");
  EXPECT_EQ(report.groups[0].members, (std::vector<std::string>{"scale", "bias", "relu", "sig", "mm"}));
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
}

TEST(FusePrologueTest, CastOnBatchedInput) {
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f16[2,4,8]
  const %w : f32[8,6] = splat(0.5)
  %xf = Cast(%x) {to = 1} @cast
  %y = MatMul(%xf, %w) @mm
  output %y
}
)",
                        nullptr);
  EXPECT_EQ(Summary(*g), "FusedGroup prologue+matmul [cast, mm] anchor=mm\n");
}

TEST(FusePrologueTest, ConstantWeightChainIsLeftToFolding) {
  FusionReport report;
  bool changed = true;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,8]
  const %w : f16[8,6] = splat(0.5)
  const %s : f32[] = [2.0]
  %wf = Cast(%w) {to = 1} @cast
  %ws = Mul(%wf, %s) @scale
  %y = MatMul(%x, %ws) @mm
  output %y
}
)",
                        &report, &changed);
  EXPECT_FALSE(changed);
  EXPECT_TRUE(Groups(*g).empty());
  ASSERT_EQ(report.rejections.size(), 1u) << report.ToString();
  EXPECT_EQ(report.rejections[0].nodes, (std::vector<std::string>{"mm", "scale", "cast"}));
  EXPECT_EQ(report.rejections[0].reason, "constant: folded at compile time");
}

TEST(FusePrologueTest, ConstantWeightScaledByAnInputIsFused) {
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,8]
  input %s : f32[]
  const %w : f32[8,6] = splat(0.5)
  %ws = Mul(%w, %s) @scale
  %y = MatMul(%x, %ws) @mm
  output %y
}
)",
                        nullptr);
  EXPECT_EQ(Summary(*g), "FusedGroup prologue+matmul [scale, mm] anchor=mm\n");
}

TEST(FusePrologueTest, MustNotFire) {
  FusionReport report;
  bool changed = true;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,8]
  input %u : f32[4,1]
  input %c : f32[8]
  const %w : f32[8,6] = splat(0.5)
  %r = Relu(%x) @relu
  %y = MatMul(%r, %w) @mm
  %g = Add(%u, %c) @grow_input
  %z = MatMul(%g, %w) @mm2
  %t = Transpose(%x) {perm = [1, 0]} @transpose
  %q = MatMul(%t, %x) @mm3
  output %y
  output %r
  output %z
  output %q
}
)",
                        &report, &changed);
  // relu is read outside (a graph output); grow_input makes [4,8] out of [4,1] and
  // [8] (no operand is loaded as is); Transpose is not element-wise.
  EXPECT_FALSE(changed);
  EXPECT_TRUE(Groups(*g).empty());
  ASSERT_EQ(report.rejections.size(), 2u) << report.ToString();
  EXPECT_EQ(report.rejections[0].nodes, (std::vector<std::string>{"mm", "relu"}));
  EXPECT_TRUE(absl::StartsWith(report.rejections[0].reason, "other consumers: ")) << report.rejections[0].reason;
  EXPECT_EQ(report.rejections[1].nodes, (std::vector<std::string>{"mm2", "grow_input"}));
  EXPECT_TRUE(absl::StartsWith(report.rejections[1].reason, "shape: ")) << report.rejections[1].reason;
}

// EfficientNet-B0's squeeze-excitation scale before its 1x1 projection, as the legacy
// export reads after to-channels-last and conv1x1-to-matmul (zoo efficientnet.legacy,
// features.2.0): the gate [N, 1, 1, C] computed from the pooled activations scales
// them, and the product is the projection's A. The scale stays its own kernel; a
// per-channel value computed at run time that is not shared by rows still fuses.
TEST(FusePrologueTest, SqueezeExcitationScaleStaysOutside) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %ea : f32[2,6,6,16]
  input %c : f32[16]
  const %w_fc : f32[16,16] = splat(0.25)
  const %w_project : f32[16,8] = splat(0.5)
  %p = GlobalAveragePool(%ea) {channels_last = 1} @pool
  %f = MatMul(%p, %w_fc) @fc
  %s = Sigmoid(%f) @scale_activation
  %scaled = Mul(%s, %ea) @scale
  %y = MatMul(%scaled, %w_project) @project
  %shifted = Add(%ea, %c) @shift
  %z = MatMul(%shifted, %w_project) @other
  output %y
  output %z
}
)",
                        &report);
  EXPECT_EQ(Summary(*g),
            "GlobalAveragePool @pool\nMatMul @fc\nSigmoid @scale_activation\nMul @scale\nMatMul @project\n"
            "FusedGroup prologue+matmul [shift, other] anchor=other\n");
  ExpectOneRejection(report, {"project", "scale"}, "computed scale: ");
}

TEST(FusePrologueTest, LeavesAnotherMatMulsEpilogueAlone) {
  FusionReport report;
  bool changed = true;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,8]
  const %w1 : f32[8,8] = splat(0.5)
  const %w2 : f32[8,6] = splat(0.5)
  %h = MatMul(%x, %w1) @up
  %a = Gelu(%h) @gelu
  %y = MatMul(%a, %w2) @down
  output %y
}
)",
                        &report, &changed);
  EXPECT_FALSE(changed);
  EXPECT_TRUE(Groups(*g).empty());
  ExpectOneRejection(report, {"down", "gelu"}, "epilogue: ");
}

}  // namespace
}  // namespace kiln
