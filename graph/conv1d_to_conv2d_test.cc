// Tests for Conv1dToConv2d: text graph in, expected text out, outputs unchanged.
#include "graph/conv1d_to_conv2d.h"

#include <gtest/gtest.h>

#include <string>

#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::DistinctValues;
using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::RunPass;

// Whisper's audio stem as the legacy exporter writes it (whisper_encoder.legacy in the
// zoo, 80 mel bins -> 4 and 64 channels -> 3, 200 frames -> 10): Conv1d k3 p1, GELU,
// Conv1d k3 p1 stride 2, GELU, then the Transpose to [batch, frames, channels].
TEST(Conv1dToConv2dTest, WhisperStemBecomesHeightOneConvs) {
  const std::string out = RunPass<Conv1dToConv2d>(R"(
graph @main {
  input %input_features : f32[1,4,10]
  const %w1 : f32[3,4,3] = )" + DistinctValues(36) + R"(
  const %b1 : f32[3] = [0.1, -0.2, 0.3]
  const %w2 : f32[3,3,3] = )" + DistinctValues(27) + R"(
  const %b2 : f32[3] = [0.0, 0.5, -0.5]
  %c1 = Conv(%input_features, %w1, %b1) {dilations = [1], group = 1, kernel_shape = [3], pads = [1, 1], strides = [1]} @/m/conv1/Conv
  %g1 = Gelu(%c1) {approximate = "none"}
  %c2 = Conv(%g1, %w2, %b2) {dilations = [1], group = 1, kernel_shape = [3], pads = [1, 1], strides = [2]} @/m/conv2/Conv
  %g2 = Gelu(%c2) {approximate = "none"}
  %t = Transpose(%g2) {perm = [0, 2, 1]}
  output %t
}
)");
  EXPECT_NE(out.find("%input_features/as_2d : f32[1,4,1,10] = Reshape(%input_features, %/m/conv1/Conv/as_2d_shape)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("%c1/as_2d : f32[1,3,1,10] = Conv(%input_features/as_2d, %w1/as_2d, %b1) {dilations = [1, 1], "
                     "group = 1, kernel_shape = [1, 3], pads = [0, 1, 0, 1], strides = [1, 1]}"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("%c2/as_2d : f32[1,3,1,5] = Conv(%g1/as_2d, %w2/as_2d, %b2) {dilations = [1, 1], group = 1, "
                     "kernel_shape = [1, 3], pads = [0, 1, 0, 1], strides = [1, 2]}"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("%c2 : f32[1,3,5] = Reshape(%c2/as_2d, %/m/conv2/Conv/as_1d_shape)"), std::string::npos) << out;
  EXPECT_NE(out.find("const %w1/as_2d : f32[3,4,1,3]"), std::string::npos) << out;
}

// Attributes left to their defaults, a grouped conv, and auto_pad: the rewrite keeps
// what the node does not spell out.
TEST(Conv1dToConv2dTest, DefaultsGroupsAndAutoPad) {
  const std::string out = RunPass<Conv1dToConv2d>(R"(
graph @main {
  input %x : f32[2,4,9]
  const %w : f32[4,2,2] = )" + DistinctValues(16) + R"(
  %y = Conv(%x, %w) {group = 2, auto_pad = "SAME_UPPER"}
  output %y
}
)");
  EXPECT_NE(out.find("%y/as_2d : f32[2,4,1,9] = Conv(%x/as_2d, %w/as_2d) {auto_pad = \"SAME_UPPER\", group = 2}"),
            std::string::npos)
      << out;
}

// 2-D convs, a computed weight: left alone.
TEST(Conv1dToConv2dTest, MustNotFire) {
  ExpectNoChange<Conv1dToConv2d>(R"(
graph @main {
  input %x : f32[1,2,5,5]
  input %x1 : f32[1,2,5]
  input %w1 : f32[3,2,3]
  const %w : f32[3,2,3,3] = splat(0.5)
  %y = Conv(%x, %w) {pads = [1, 1, 1, 1]}
  %z = Conv(%x1, %w1)
  output %y
  output %z
}
)");
}

}  // namespace
}  // namespace kiln
