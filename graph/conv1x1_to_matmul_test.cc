// Tests for Conv1x1ToMatMul: channels-last 1x1 convs at stride 1 become a MatMul over
// the pixels (outputs unchanged: the harness compares them); other convs stay.
#include "graph/conv1x1_to_matmul.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::RunPass;
using ::kiln::pass_test::DistinctValues;

// EfficientNet-B0's MBConv expansion and squeeze-excitation as the legacy exporter
// writes them (zoo efficientnet.legacy, features.2.0), after to-channels-last and
// pad-conv-channels: the expansion conv with its SiLU, the pool, fc1 with SiLU,
// fc2 (its 2 input channels padded to 8) with Sigmoid, the scale, the projection.
std::string SqueezeExcitationBlock() {
  return absl::StrCat(R"(
graph @main {
  input %x : f32[2,6,6,8]
  const %w_expand : f32[16,1,1,8] = )", DistinctValues(128), R"(
  const %b_expand : f32[16] = )", DistinctValues(16), R"(
  const %w_fc1 : f32[2,1,1,16] = )", DistinctValues(32), R"(
  const %b_fc1 : f32[2] = [0.25, -0.5]
  const %fc2_pads : i64[8] = [0, 0, 0, 0, 0, 0, 0, 6]
  const %w_fc2 : f32[16,1,1,8] = )", DistinctValues(128), R"(
  const %b_fc2 : f32[16] = )", DistinctValues(16), R"(
  const %w_project : f32[8,1,1,16] = )", DistinctValues(128), R"(
  %e = Conv(%x, %w_expand, %b_expand) {channels_last = 1, dilations = [1, 1], group = 1, kernel_shape = [1, 1], pads = [0, 0, 0, 0], strides = [1, 1]} @expand
  %es = Sigmoid(%e) @expand_sigmoid
  %ea = Mul(%e, %es) @expand_silu
  %p = GlobalAveragePool(%ea) {channels_last = 1} @pool
  %f1 = Conv(%p, %w_fc1, %b_fc1) {channels_last = 1, dilations = [1, 1], group = 1, kernel_shape = [1, 1], pads = [0, 0, 0, 0], strides = [1, 1]} @fc1
  %f1s = Sigmoid(%f1) @fc1_sigmoid
  %f1a = Mul(%f1, %f1s) @fc1_silu
  %f1p = Pad(%f1a, %fc2_pads) @fc2_pad_channels
  %f2 = Conv(%f1p, %w_fc2, %b_fc2) {channels_last = 1, dilations = [1, 1], group = 1, kernel_shape = [1, 1], pads = [0, 0, 0, 0], strides = [1, 1]} @fc2
  %s = Sigmoid(%f2) @scale_activation
  %scaled = Mul(%s, %ea) @scale
  %y = Conv(%scaled, %w_project) {channels_last = 1, kernel_shape = [1, 1]} @project
  output %y
}
)");
}

TEST(Conv1x1ToMatMulTest, SqueezeExcitationBlockConvsBecomeMatMuls) {
  const std::string out = RunPass<Conv1x1ToMatMul>(SqueezeExcitationBlock());
  EXPECT_EQ(out.find("Conv("), std::string::npos) << out;
  // The expansion: X [2, 6, 6, 8] times the weight as [C, OC], then its bias.
  EXPECT_NE(out.find("const %w_expand/matmul : f32[8,16]"), std::string::npos) << out;
  EXPECT_NE(out.find("%e/matmul : f32[2,6,6,16] = MatMul(%x, %w_expand/matmul)"), std::string::npos) << out;
  EXPECT_NE(out.find("%e : f32[2,6,6,16] = Add(%e/matmul, %b_expand)"), std::string::npos) << out;
  // The squeeze-excitation FCs on one pixel per image, the padded fc2 input as K.
  EXPECT_NE(out.find("f32[2,1,1,2] = MatMul(%p, %w_fc1/matmul)"), std::string::npos) << out;
  EXPECT_NE(out.find("f32[2,1,1,16] = MatMul(%f1p, %w_fc2/matmul)"), std::string::npos) << out;
  // Without a bias the MatMul writes the conv's output itself.
  EXPECT_NE(out.find("%y : f32[2,6,6,8] = MatMul(%scaled, %w_project/matmul)"), std::string::npos) << out;
}

TEST(Conv1x1ToMatMulTest, OtherConvsAreLeftAlone) {
  auto conv = [](const std::string& x, const std::string& w, const std::string& attrs) {
    return absl::StrCat("graph @main {\n  input %x : f32", x, "\n  const %w : f32", w, " = splat(0.25)\n",
                        "  %y = Conv(%x, %w) {", attrs, "}\n  output %y\n}\n");
  };
  ExpectNoChange<Conv1x1ToMatMul>(conv("[2,8,6,6]", "[4,8,1,1]", "kernel_shape = [1, 1]"));  // NCHW
  ExpectNoChange<Conv1x1ToMatMul>(conv("[2,6,6,8]", "[4,3,3,8]", "channels_last = 1, pads = [1, 1, 1, 1]"));
  ExpectNoChange<Conv1x1ToMatMul>(conv("[2,6,6,8]", "[4,1,1,8]", "channels_last = 1, strides = [2, 2]"));
  ExpectNoChange<Conv1x1ToMatMul>(conv("[2,6,6,8]", "[4,1,1,8]", "channels_last = 1, pads = [1, 1, 1, 1]"));
  ExpectNoChange<Conv1x1ToMatMul>(conv("[2,6,6,8]", "[8,1,1,4]", "channels_last = 1, group = 2"));
  ExpectNoChange<Conv1x1ToMatMul>(conv("[2,6,6,8]", "[4,1,1,8]", "channels_last = 1, dilations = [2, 2]"));
  // A weight computed at run time.
  ExpectNoChange<Conv1x1ToMatMul>(R"(
graph @main {
  input %x : f32[2,6,6,8]
  input %w : f32[4,1,1,8]
  %y = Conv(%x, %w) {channels_last = 1}
  output %y
}
)");
}

}  // namespace
}  // namespace kiln
