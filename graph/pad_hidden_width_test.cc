// Tests for PadHiddenWidth: squeeze-excitation's narrow fc1 product is widened to the
// 8 channels fc2 reads zero-padded (outputs unchanged: the harness compares them), and
// chains the widening could change are left alone.
#include "graph/pad_hidden_width.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::RunPass;
using ::kiln::pass_test::DistinctValues;

// EfficientNet-B0's squeeze-excitation FCs as the legacy export reads after
// to-channels-last, pad-conv-channels and conv1x1-to-matmul (zoo efficientnet.legacy,
// features.2.0 at its tiny width): fc1 to 2 channels with its bias and SiLU, the Pad
// of fc2's input to 8 channels, fc2 (weight rows 2..7 zero) with its bias and Sigmoid.
// `activation` replaces the SiLU (its input %f1, its output %a).
std::string SqueezeExcitation(const std::string& activation =
                                  "  %f1s = Sigmoid(%f1) @fc1_sigmoid\n  %a = Mul(%f1, %f1s) @fc1_silu\n",
                              const std::string& w2 = DistinctValues(32, 96)) {
  return absl::StrCat(R"(
graph @main {
  input %p : f32[2,1,1,16]
  const %w1 : f32[16,2] = )", DistinctValues(32), R"(
  const %b1 : f32[2] = [0.25, -0.5]
  const %pads : i64[8] = [0, 0, 0, 0, 0, 0, 0, 6]
  const %w2 : f32[8,16] = )", w2, R"(
  const %b2 : f32[16] = )", DistinctValues(16), R"(
  %m1 = MatMul(%p, %w1) @fc1
  %f1 = Add(%m1, %b1) @fc1_bias
)", activation, R"(  %padded = Pad(%a, %pads) @fc2_pad_channels
  %m2 = MatMul(%padded, %w2) @fc2
  %f2 = Add(%m2, %b2) @fc2_bias
  %s = Sigmoid(%f2) @scale_activation
  output %s
}
)");
}

TEST(PadHiddenWidthTest, SqueezeExcitationHiddenLayerIsWidened) {
  const std::string out = RunPass<PadHiddenWidth>(SqueezeExcitation());
  EXPECT_EQ(out.find("Pad("), std::string::npos) << out;
  EXPECT_NE(out.find("const %w1/hidden_padded : f32[16,8]"), std::string::npos) << out;
  EXPECT_NE(out.find("const %b1/hidden_padded : f32[8] = [0.25, -0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]"), std::string::npos) << out;
  EXPECT_NE(out.find("%m1 : f32[2,1,1,8] = MatMul(%p, %w1/hidden_padded)"), std::string::npos) << out;
  EXPECT_NE(out.find("%a : f32[2,1,1,8] = Mul(%f1, %f1s)"), std::string::npos) << out;
  EXPECT_NE(out.find("MatMul(%a, %w2)"), std::string::npos) << out;
  // MobileNetV3's ReLU form, and an activation that is not 0 at 0 (fc2's zero rows
  // cancel the padded columns either way).
  EXPECT_EQ(RunPass<PadHiddenWidth>(SqueezeExcitation("  %a = Relu(%f1) @fc1_relu\n")).find("Pad("),
            std::string::npos);
  EXPECT_EQ(RunPass<PadHiddenWidth>(SqueezeExcitation("  %a = Sigmoid(%f1) @fc1_sigmoid\n")).find("Pad("),
            std::string::npos);
}

TEST(PadHiddenWidthTest, LeavesChainsTheWideningWouldChange) {
  // fc2's padded rows are not zero: the padded columns would count.
  ExpectNoChange<PadHiddenWidth>(SqueezeExcitation(
      "  %f1s = Sigmoid(%f1) @fc1_sigmoid\n  %a = Mul(%f1, %f1s) @fc1_silu\n", DistinctValues(128)));
  // A division by an [N] constant would divide the padded zeros by zero.
  ExpectNoChange<PadHiddenWidth>(absl::StrReplaceAll(
      SqueezeExcitation("  %a = Div(%f1, %b1) @fc1_div\n"), {{"[0.25, -0.5]", "[0.25, 0.5]"}}));
  // A chain value read outside the chain.
  std::string outside = SqueezeExcitation();
  outside = absl::StrReplaceAll(outside, {{"  output %s\n", "  output %s\n  output %f1s\n"}});
  ExpectNoChange<PadHiddenWidth>(outside);
  // A Pad of another axis.
  ExpectNoChange<PadHiddenWidth>(
      absl::StrReplaceAll(SqueezeExcitation(), {{"[0, 0, 0, 0, 0, 0, 0, 6]", "[0, 0, 0, 0, 0, 6, 0, 0]"},
                                                {"f32[8,16] =", "f32[2,16] ="},
                                                {DistinctValues(32, 96), DistinctValues(32)}}));
}

}  // namespace
}  // namespace kiln
