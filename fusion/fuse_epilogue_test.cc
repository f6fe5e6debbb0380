// Tests for FuseEpilogue: structure of the groups formed, must-not-fire cases, and
// fused == unfused on the CPU reference for every group kind.
#include "fusion/fuse_epilogue.h"

#include <gtest/gtest.h>

#include "fusion/fuse_prologue.h"
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

// Runs FuseEpilogue on `text` (constants randomised with seed 7); see testing::RunFusionPass.
std::unique_ptr<Graph> FuseAndCheck(const std::string& text, FusionReport* report, bool* changed = nullptr) {
  return ::kiln::testing::RunFusionPass<FuseEpilogue>(text, report, 7, changed);
}

TEST(FuseEpilogueTest, MatMulBiasGelu) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,8]
  const %w : f32[8,16] = splat(0.5)
  const %b : f32[16] = splat(0.1)
  %m = MatMul(%x, %w) @mm
  %a = Add(%m, %b) @bias
  %y = Gelu(%a) @gelu
  output %y
}
)",
                        &report);
  EXPECT_EQ(Summary(*g), "FusedGroup matmul+epilogue [mm, bias, gelu] anchor=mm\n");
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].pass, "fuse-epilogue");
  EXPECT_EQ(report.groups[0].pattern, "matmul+epilogue");
  EXPECT_EQ(report.groups[0].members, (std::vector<std::string>{"mm", "bias", "gelu"}));
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
}

// Weights and biases stay outside the body as group inputs (bundle weights); only
// constants of at most kMaxInlinedConstantElements elements are copied in.
TEST(FuseEpilogueTest, PrintsTheFusedGraph) {
  std::unique_ptr<Graph> g = ParseTyped(R"(
graph @main {
  input %x : f32[2,2]
  const %w : f32[2,2] = [1.0, 2.0, 3.0, 4.0]
  const %b : f32[2] = [0.5, -0.5]
  %m = MatMul(%x, %w) @mm
  %a = Add(%m, %b) @bias
  %y = Relu(%a) @relu
  output %y
}
)");
  ASSERT_TRUE(*FuseEpilogue().Run(*g));
  EXPECT_EQ(PrintGraph(*g), R"(graph @main {
  input %x : f32[2,2]
  const %w : f32[2,2] = [1.0, 2.0, 3.0, 4.0]
  const %b : f32[2] = [0.5, -0.5]
  %y : f32[2,2] = kiln::FusedGroup(%x, %w, %b) {anchor = "mm", body = "graph @main {\n  input %x : f32[2,2]\n  input %w : f32[2,2]\n  input %b : f32[2]\n  %m : f32[2,2] = MatMul(%x, %w) @mm\n  %a : f32[2,2] = Add(%m, %b) @bias\n  %y : f32[2,2] = Relu(%a) @relu\n  output %y\n}\n", members = ["mm", "bias", "relu"], pattern = "matmul+epilogue"} @group_mm
  output %y
}
)");
}

TEST(FuseEpilogueTest, BatchedMatMulSiluResidualScaleCast) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[2,3,8]
  input %r : f32[2,3,16]
  const %w : f32[8,16] = splat(0.5)
  const %b : f32[16] = splat(0.1)
  const %s : f32[] = [0.125]
  %m = MatMul(%x, %w) @mm
  %a = Add(%b, %m) @bias
  %sg = Sigmoid(%a) @sig
  %si = Mul(%sg, %a) @silu
  %re = Add(%si, %r) @residual
  %sc = Mul(%re, %s) @scale
  %y = Cast(%sc) {to = 10} @cast
  output %y
}
)",
                        &report);
  EXPECT_EQ(Summary(*g),
            "FusedGroup matmul+epilogue [mm, bias, sig, silu, residual, scale, cast] anchor=mm\n");
  ASSERT_EQ(Groups(*g).size(), 1u);
  EXPECT_EQ(Groups(*g)[0]->num_outputs(), 1);
}

TEST(FuseEpilogueTest, ConvPerChannelBiasClip) {
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[1,3,6,6]
  const %w : f32[4,3,3,3] = splat(0.5)
  const %b : f32[4,1,1] = splat(0.1)
  const %lo : f32[] = [0.0]
  const %hi : f32[] = [0.5]
  %c = Conv(%x, %w) {pads = [1, 1, 1, 1]} @conv
  %a = Add(%c, %b) @bias
  %y = Clip(%a, %lo, %hi) @clip
  output %y
}
)",
                        nullptr);
  EXPECT_EQ(Summary(*g), "FusedGroup conv+epilogue [conv, bias, clip] anchor=conv\n");
}

// MobileNetV3's inverted residual as the legacy export reads after to-channels-last
// and conv1x1-to-matmul (zoo mobilenet_v3.legacy, features.4, widths cut down): the
// expansion GEMM and the depthwise conv take their HardSwish, the squeeze-excitation
// fc2 its HardSigmoid. The excitation Mul grows the [N,1,1,C] gate to the map and
// stays outside.
TEST(FuseEpilogueTest, MobileNetV3HardSwishAndHardSigmoid) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[1,8,8,8]
  const %w_expand : f32[8,12] = splat(0.25)
  const %b_expand : f32[12] = splat(0.1)
  const %w_dw : f32[12,5,5,1] = splat(0.05)
  const %b_dw : f32[12] = splat(0.2)
  const %w_fc1 : f32[12,4] = splat(0.3)
  const %b_fc1 : f32[4] = splat(0.1)
  const %w_fc2 : f32[4,12] = splat(0.3)
  const %b_fc2 : f32[12] = splat(0.5)
  %e = MatMul(%x, %w_expand) @expand
  %eb = Add(%e, %b_expand) @expand_bias
  %eh = HardSwish(%eb) @expand_hardswish
  %d = Conv(%eh, %w_dw, %b_dw) {channels_last = 1, group = 12, kernel_shape = [5, 5], pads = [2, 2, 2, 2], strides = [2, 2]} @dw
  %dh = HardSwish(%d) @dw_hardswish
  %p = GlobalAveragePool(%dh) {channels_last = 1} @pool
  %f1 = MatMul(%p, %w_fc1) @fc1
  %f1b = Add(%f1, %b_fc1) @fc1_bias
  %r = Relu(%f1b) @relu
  %f2 = MatMul(%r, %w_fc2) @fc2
  %f2b = Add(%f2, %b_fc2) @fc2_bias
  %gate = HardSigmoid(%f2b) {alpha = 0.16666667} @hardsigmoid
  %y = Mul(%gate, %dh) @excite
  output %y
}
)",
                        &report);
  EXPECT_EQ(Summary(*g),
            "FusedGroup matmul+epilogue [expand, expand_bias, expand_hardswish] anchor=expand\n"
            "FusedGroup conv+epilogue [dw, dw_hardswish] anchor=dw\n"
            "GlobalAveragePool @pool\n"
            "FusedGroup matmul+epilogue [fc1, fc1_bias, relu] anchor=fc1\n"
            "FusedGroup matmul+epilogue [fc2, fc2_bias, hardsigmoid] anchor=fc2\n"
            "Mul @excite\n");
}

TEST(FuseEpilogueTest, IntermediateWithOutsideReaderBecomesExtraOutput) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,8]
  const %w : f32[8,16] = splat(0.5)
  const %b : f32[16] = splat(0.1)
  %m = MatMul(%x, %w) @mm
  %a = Add(%m, %b) @bias
  %y = Relu(%a) @relu
  %z = Softmax(%a) @side
  output %y
  output %z
}
)",
                        &report);
  EXPECT_EQ(Summary(*g), "FusedGroup matmul+epilogue [mm, bias, relu] anchor=mm\nSoftmax @side\n");
  const Node* group = Groups(*g)[0];
  ASSERT_EQ(group->num_outputs(), 2);
  EXPECT_EQ(group->output(0)->name(), "a");
  EXPECT_EQ(group->output(1)->name(), "y");
}

TEST(FuseEpilogueTest, TwoLegalBranchesTakeTheFirst) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,8]
  const %w : f32[8,16] = splat(0.5)
  %m = MatMul(%x, %w) @mm
  %y = Relu(%m) @relu
  %z = Tanh(%m) @tanh
  output %y
  output %z
}
)",
                        &report);
  EXPECT_EQ(Summary(*g), "FusedGroup matmul+epilogue [mm, relu] anchor=mm\nTanh @tanh\n");
  ExpectOneRejection(report, {"mm", "tanh"}, "other consumers: ");
}

TEST(FuseEpilogueTest, ResidualOfTheAnchorOutputStaysInside) {
  // y = relu(m + b) + m: m is read twice, both readers end up in the group.
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,8]
  const %w : f32[8,8] = splat(0.5)
  const %b : f32[8] = splat(0.1)
  %m = MatMul(%x, %w) @mm
  %a = Add(%m, %b) @bias
  %r = Relu(%a) @relu
  %y = Add(%r, %m) @residual
  output %y
}
)",
                        &report);
  EXPECT_EQ(Summary(*g), "FusedGroup matmul+epilogue [mm, bias, relu, residual] anchor=mm\n");
  EXPECT_EQ(Groups(*g)[0]->num_outputs(), 1);
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
}

TEST(FuseEpilogueTest, LeavesAResidualReadOnlyByALayerNormToTheNorm) {
  // BERT's post-LN form: the sum is read only by the norm, which takes the add
  // (FusePointwise); the epilogue keeps the bias.
  const std::string post_ln = R"(
graph @main {
  input %x : f32[4,8]
  input %r : f32[4,16]
  const %w : f32[8,16] = splat(0.5)
  const %b : f32[16] = splat(0.1)
  const %gamma : f32[16] = splat(1.0)
  const %beta : f32[16] = splat(0.0)
  %m = MatMul(%x, %w) @mm
  %a = Add(%m, %b) @bias
  %h = Add(%a, %r) @residual
  %y = LayerNormalization(%h, %gamma, %beta) {axis = -1, epsilon = 1e-05} @ln
  output %y
}
)";
  FusionReport report;
  auto g = FuseAndCheck(post_ln, &report);
  EXPECT_EQ(Summary(*g), "FusedGroup matmul+epilogue [mm, bias] anchor=mm\nAdd @residual\nLayerNormalization @ln\n");
  ExpectOneRejection(report, {"mm", "residual"}, "cost: 'residual' adds a full-size operand and only 'ln'");

  // GPT-2's pre-LN form: the sum is also the next residual (read by a later add), so
  // it is stored anyway and the epilogue takes the add.
  std::string pre_ln = post_ln;
  pre_ln.replace(pre_ln.find("  output %y"), 11, "  %z = Add(%h, %y) @next\n  output %z");
  FusionReport pre_report;
  g = FuseAndCheck(pre_ln, &pre_report);
  EXPECT_EQ(Summary(*g),
            "FusedGroup matmul+epilogue [mm, bias, residual] anchor=mm\nLayerNormalization @ln\nAdd @next\n");

  // A broadcast operand (a bias) before the norm stays in the epilogue.
  std::string bias_only = post_ln;
  bias_only.replace(bias_only.find("input %r : f32[4,16]"), 20, "input %r : f32[16]  ");
  FusionReport bias_report;
  g = FuseAndCheck(bias_only, &bias_report);
  EXPECT_EQ(Summary(*g), "FusedGroup matmul+epilogue [mm, bias, residual] anchor=mm\nLayerNormalization @ln\n");
}

TEST(FuseEpilogueTest, StopsWhereConvexityBreaks) {
  // q reads a and Softmax(a): taking q would leave the group through Softmax and return.
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,8]
  const %w : f32[8,8] = splat(0.5)
  const %b : f32[8] = splat(0.1)
  %m = MatMul(%x, %w) @mm
  %a = Add(%m, %b) @bias
  %s = Softmax(%a) @softmax
  %q = Add(%a, %s) @q
  output %q
}
)",
                        &report);
  EXPECT_EQ(Summary(*g), "FusedGroup matmul+epilogue [mm, bias] anchor=mm\nSoftmax @softmax\nAdd @q\n");
  ExpectOneRejection(report, {"mm", "q"}, "not convex: ");
}

TEST(FuseEpilogueTest, LimitsExtraOutputs) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,8]
  const %w : f32[8,8] = splat(0.5)
  %m = MatMul(%x, %w) @mm
  %a = Relu(%m) @a
  %b = Tanh(%a) @b
  %c = Sigmoid(%b) @c
  output %m
  output %a
  output %b
  output %c
}
)",
                        &report);
  EXPECT_EQ(Summary(*g), "FusedGroup matmul+epilogue [mm, a, b] anchor=mm\nSigmoid @c\n");
  ExpectOneRejection(report, "other consumers: ");
}

TEST(FuseEpilogueTest, MustNotFire) {
  FusionReport report;
  bool changed = true;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[2,4]
  input %big : f32[3,2,4]
  const %w : f32[4,4] = splat(0.5)
  %m = MatMul(%x, %w) @mm
  %grow = Add(%m, %big) @grow
  %e = Exp(%m) @exp
  %s = Softmax(%m) @softmax
  %n = MatMul(%x, %w) @mm2
  %i = Cast(%n) {to = 7} @to_int
  output %grow
  output %e
  output %s
  output %i
}
)",
                        &report, &changed);
  EXPECT_FALSE(changed);
  EXPECT_TRUE(Groups(*g).empty());
  ASSERT_EQ(report.rejections.size(), 3u) << report.ToString();
  EXPECT_EQ(report.rejections[0].nodes, (std::vector<std::string>{"mm", "grow"}));
  EXPECT_TRUE(absl::StartsWith(report.rejections[0].reason, "shape: ")) << report.rejections[0].reason;
  EXPECT_EQ(report.rejections[1].nodes, (std::vector<std::string>{"mm", "exp"}));
  EXPECT_TRUE(absl::StartsWith(report.rejections[1].reason, "unsupported op: ")) << report.rejections[1].reason;
  EXPECT_EQ(report.rejections[2].nodes, (std::vector<std::string>{"mm2", "to_int"}));
  EXPECT_TRUE(absl::StartsWith(report.rejections[2].reason, "dtype: ")) << report.rejections[2].reason;
}

TEST(FuseEpilogueTest, ExtendsPrologueGroup) {
  std::unique_ptr<Graph> g = ParseTyped(R"(
graph @main {
  input %x : f32[4,8]
  const %w : f32[8,16] = splat(0.5)
  const %b : f32[16] = splat(0.1)
  %rx = Relu(%x) @pre
  %m = MatMul(%rx, %w) @mm
  %a = Add(%m, %b) @bias
  %y = Tanh(%a) @tanh
  output %y
}
)");
  RandomizeConstants(*g, 3);
  std::unique_ptr<Graph> original = g->Clone();
  FusionReport report;
  ASSERT_TRUE(*FusePrologue(&report).Run(*g));
  EXPECT_EQ(Summary(*g), "FusedGroup prologue+matmul [pre, mm] anchor=mm\nAdd @bias\nTanh @tanh\n");
  ASSERT_TRUE(*FuseEpilogue(&report).Run(*g));
  EXPECT_EQ(Summary(*g), "FusedGroup prologue+matmul+epilogue [pre, mm, bias, tanh] anchor=mm\n");
  ExpectValid(*g);
  ExpectSameResults(*original, *g);
  ASSERT_EQ(report.groups.size(), 2u);
  EXPECT_EQ(report.groups[1].pattern, "prologue+matmul+epilogue");
  EXPECT_EQ(report.groups[1].members, (std::vector<std::string>{"pre", "mm", "bias", "tanh"}));
}

TEST(FuseEpilogueTest, LeavesOtherGroupsAlone) {
  // A pointwise group downstream is a fused group already: reported, not touched.
  std::unique_ptr<Graph> g = ParseTyped(R"(
graph @main {
  input %x : f32[4,8]
  const %w : f32[8,8] = splat(0.5)
  %m = MatMul(%x, %w) @mm
  %a = Relu(%m) @relu
  %b = Tanh(%a) @tanh
  output %b
}
)");
  std::vector<Node*> pw = {g->FindValue("a")->producer(), g->FindValue("b")->producer()};
  ASSERT_TRUE(FormFusedGroup(*g, pw, "pointwise", nullptr).ok());
  FusionReport report;
  EXPECT_FALSE(*FuseEpilogue(&report).Run(*g));
  ExpectOneRejection(report, "unsupported op: ");
}

}  // namespace
}  // namespace kiln
