// Tests for PatchifyConv: non-overlapping convs become a MatMul over patches with the
// same outputs; every other conv is left alone.
#include "graph/patchify_conv.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::RunPass;
using ::kiln::pass_test::DistinctValues;

// Conv(x [2, 3, 8, 12], w [5, 3, KH, KW]) {ATTRS} [+ bias] -> Relu.
std::string ConvGraph(int kh, int kw, const std::string& attrs, bool bias = true) {
  return absl::StrCat("graph @main {\n  input %x : f32[2,3,8,12]\n  const %w : f32[5,3,", kh, ",", kw,
                      "] = ", DistinctValues(5 * 3 * kh * kw), "\n",
                      bias ? "  const %b : f32[5] = [0.5, -0.25, 0.125, 1.0, -1.0]\n" : "",
                      "  %y = Conv(%x, %w", bias ? ", %b" : "", ") {", attrs, "}\n  %r = Relu(%y)\n  output %r\n}\n");
}

TEST(PatchifyConvTest, PatchEmbeddingBecomesAMatMulOverPatches) {
  // 4x4 patches, stride 4: the ViT patch embedding's form.
  const std::string out = RunPass<PatchifyConv>(ConvGraph(4, 4, "kernel_shape = [4, 4], strides = [4, 4]"));
  EXPECT_NE(out.find("Reshape(%x"), std::string::npos) << out;
  EXPECT_NE(out.find("f32[2,2,3,3,4,4] = Transpose("), std::string::npos) << out;
  EXPECT_NE(out.find("%w/patches : f32[48,5]"), std::string::npos) << out;
  EXPECT_NE(out.find("f32[12,5] = MatMul("), std::string::npos) << out;
  EXPECT_NE(out.find("f32[12,5] = Add("), std::string::npos) << out;
  EXPECT_NE(out.find("%y : f32[2,5,2,3] = Transpose("), std::string::npos) << out;
  EXPECT_EQ(out.find("Conv("), std::string::npos) << out;
}

TEST(PatchifyConvTest, RectangularPatchesWithoutBiasAndValidPadding) {
  const std::string out =
      RunPass<PatchifyConv>(ConvGraph(2, 3, "auto_pad = \"VALID\", strides = [2, 3]", /*bias=*/false));
  EXPECT_NE(out.find("f32[32,5] = MatMul("), std::string::npos) << out;  // 2 x 4 x 4 patches of 3 x 2 x 3
  EXPECT_EQ(out.find("Add("), std::string::npos) << out;
}

TEST(PatchifyConvTest, OtherConvsAreLeftAlone) {
  ExpectNoChange<PatchifyConv>(ConvGraph(1, 1, "strides = [1, 1]"));                      // 1x1: a channel mix
  ExpectNoChange<PatchifyConv>(ConvGraph(4, 4, "strides = [2, 2]"));                      // overlapping
  ExpectNoChange<PatchifyConv>(ConvGraph(4, 4, "strides = [4, 4], pads = [1, 1, 1, 1]"));  // padded
  ExpectNoChange<PatchifyConv>(ConvGraph(4, 4, "strides = [4, 4], dilations = [2, 2]"));
  ExpectNoChange<PatchifyConv>(ConvGraph(3, 3, "strides = [3, 3]"));  // 8 rows: not a whole number of patches
  ExpectNoChange<PatchifyConv>(ConvGraph(4, 4, "strides = [4, 4], auto_pad = \"SAME_UPPER\""));
}

}  // namespace
}  // namespace kiln
