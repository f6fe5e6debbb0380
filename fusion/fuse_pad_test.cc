// Tests for FusePad on the input chain of an image model as kiln's passes leave it
// before fusion (cut from efficientnet.legacy at --dim batch=2, image shrunk): Cast to
// fp16, Transpose to channels-last, Pad of the channels to 8; fused == unfused on the
// CPU reference. Plus the chains that must not join.
#include "fusion/fuse_pad.h"

#include <gtest/gtest.h>

#include "fusion/fusion_test_util.h"

namespace kiln {
namespace {

using ::kiln::testing::Groups;
using ::kiln::testing::RunFusionPass;
using ::kiln::testing::Summary;

constexpr char kStem[] = R"(
graph @main {
  input %pixel_values : f32[2,3,10,12]
  const %pads : i64[8] = [0, 0, 0, 0, 0, 0, 0, 5]
  %pixel_values_f16 : f16[2,3,10,12] = Cast(%pixel_values) {to = 10} @pixel_values_f16
  %pixel_values/nhwc : f16[2,10,12,3] = Transpose(%pixel_values_f16) {perm = [0, 2, 3, 1]} @pixel_values/to_nhwc
  %padded : f16[2,10,12,8] = Pad(%pixel_values/nhwc, %pads) @pad_channels
  %y = Relu(%padded) @after
  output %y
}
)";

TEST(FusePadTest, ImageInputIsOneKernel) {
  FusionReport report;
  auto g = RunFusionPass<FusePad>(kStem, &report, 1);
  EXPECT_EQ(Summary(*g), "FusedGroup pad [pixel_values_f16, pixel_values/to_nhwc, pad_channels] anchor=\nRelu @after\n");
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
}

// Must not join: a Transpose also read elsewhere (the Pad then takes nothing, as the
// Cast is behind it), a Pad in reflect mode, two Casts in a row (only the one next to
// the views joins), a Pad of a computed value, a computed fill value, an integer Cast.
TEST(FusePadTest, SharedOrOtherChainsStayOutside) {
  std::string shared = kStem;
  const std::string out = "  output %y\n";
  shared.replace(shared.find(out), out.size(), "  output %y\n  output %pixel_values/nhwc\n");
  bool changed = true;
  auto g = RunFusionPass<FusePad>(shared, nullptr, 2, &changed);
  EXPECT_FALSE(changed);
  EXPECT_TRUE(Groups(*g).empty());

  std::string reflect = kStem;
  const std::string pad = "@pad_channels";
  reflect.replace(reflect.find(pad), pad.size(), "{mode = \"reflect\"} @pad_channels");
  changed = true;
  RunFusionPass<FusePad>(reflect, nullptr, 3, &changed);
  EXPECT_FALSE(changed);

  auto g2 = RunFusionPass<FusePad>(R"(
graph @main {
  input %x : f32[2,3,4]
  const %pads : i64[6] = [0, 0, 0, 0, 0, 4]
  %a : f16[2,3,4] = Cast(%x) {to = 10} @cast_a
  %b : f32[2,3,4] = Cast(%a) {to = 1} @cast_b
  %t : f32[2,4,3] = Transpose(%b) {perm = [0, 2, 1]} @t
  %p : f32[2,4,7] = Pad(%t, %pads) @pad
  %r = Relu(%x) @relu
  %q : f32[2,3,8] = Pad(%r, %pads) @pad_computed
  output %p
  output %q
}
)",
                                   nullptr, 4);
  EXPECT_EQ(Summary(*g2),
            "Cast @cast_a\nRelu @relu\nPad @pad_computed\nFusedGroup pad [cast_b, t, pad] anchor=\n");

  // A computed fill value and an integer Cast: no group.
  changed = true;
  RunFusionPass<FusePad>(R"(
graph @main {
  input %x : f32[2,3,4]
  input %v : f32[]
  input %i : f32[2,3,4]
  const %pads : i64[6] = [0, 0, 0, 0, 0, 4]
  %t : f32[2,4,3] = Transpose(%x) {perm = [0, 2, 1]} @t
  %p : f32[2,4,7] = Pad(%t, %pads, %v) @pad_value
  %c : i32[2,3,4] = Cast(%i) {to = 6} @cast_int
  %q : i32[2,3,8] = Pad(%c, %pads) @pad_int
  output %p
  output %q
}
)",
                         nullptr, 5, &changed);
  EXPECT_FALSE(changed);
}

}  // namespace
}  // namespace kiln
