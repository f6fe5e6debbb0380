// Tests for PadConvChannels: a channels-last stem conv with C = 3 reads its input
// padded to 8 channels with a zero-padded weight; other convs are left alone.
#include "graph/pad_conv_channels.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::RunPass;

std::string Stem(int64_t c, const std::string& attrs = "channels_last = 1") {
  return absl::StrCat(R"(
graph @main {
  input %x : f32[2,9,9,)", c, R"(]
  const %w : f32[4,3,3,)", c, R"(] = splat(0.25)
  const %b : f32[4] = splat(0.5)
  %y = Conv(%x, %w, %b) {)", attrs, R"(, pads = [1, 1, 1, 1], strides = [2, 2]} @stem
  output %y
}
)");
}

TEST(PadConvChannelsTest, StemReadsEightChannels) {
  // The harness checks the outputs against the unpadded graph.
  const std::string out = RunPass<PadConvChannels>(Stem(3));
  EXPECT_NE(out.find("const %w/padded : f32[4,3,3,8]"), std::string::npos) << out;
  EXPECT_NE(out.find("%stem/pad_channels : f32[2,9,9,8] = Pad(%x, %stem/pad_channels_pads)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("Conv(%stem/pad_channels, %w/padded, %b)"), std::string::npos) << out;
  // C = 13 pads to 16.
  EXPECT_NE(RunPass<PadConvChannels>(Stem(13)).find("f32[4,3,3,16]"), std::string::npos);
}

TEST(PadConvChannelsTest, LeavesAlignedNchwAndGroupedConvs) {
  ExpectNoChange<PadConvChannels>(Stem(8));
  ExpectNoChange<PadConvChannels>(R"(
graph @main {
  input %x : f32[2,3,9,9]
  const %w : f32[4,3,3,3] = splat(0.25)
  %y = Conv(%x, %w) @nchw
  output %y
}
)");
  ExpectNoChange<PadConvChannels>(R"(
graph @main {
  input %x : f32[2,9,9,6]
  const %w : f32[6,3,3,2] = splat(0.25)
  %y = Conv(%x, %w) {channels_last = 1, group = 3} @grouped
  output %y
}
)");
}

}  // namespace
}  // namespace kiln
