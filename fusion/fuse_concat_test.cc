// Tests for FuseConcat on Swin-T's forms as the legacy exporter writes them (cut
// from swin.legacy, sizes shrunk): torch.roll's Slices and Concat per axis, and the
// patch merging's step-2 Slices; each fused == unfused on the CPU reference. Plus
// the cases that must not join.
#include "fusion/fuse_concat.h"

#include <gtest/gtest.h>

#include "fusion/fusion_test_util.h"

namespace kiln {
namespace {

using ::kiln::testing::Groups;
using ::kiln::testing::RunFusionPass;
using ::kiln::testing::Summary;

// torch.roll(x, (-3, -3), (1, 2)) of the shifted windows' block (features.1.1).
constexpr char kRoll[] = R"(
graph @main {
  input %x : f16[1,8,8,16]
  const %one : i64[1] = [1]
  const %two : i64[1] = [2]
  const %zero : i64[1] = [0]
  const %three : i64[1] = [3]
  const %max : i64[1] = [9223372036854775807]
  %s1 = Slice(%x, %three, %max, %one) @Slice_1
  %s2 = Slice(%x, %zero, %three, %one) @Slice_2
  %c3 = Concat(%s1, %s2) {axis = 1} @Concat_3
  %s3 = Slice(%c3, %three, %max, %two) @Slice_3
  %s4 = Slice(%c3, %zero, %three, %two) @Slice_4
  %c4 = Concat(%s3, %s4) {axis = 2} @Concat_4
  %y = Relu(%c4) @after
  output %y
}
)";

TEST(FuseConcatTest, TorchRollIsOneCopyPerAxis) {
  FusionReport report;
  auto g = RunFusionPass<FuseConcat>(kRoll, &report, 1);
  EXPECT_EQ(Summary(*g),
            "FusedGroup concat [Slice_1, Slice_2, Concat_3] anchor=\n"
            "FusedGroup concat [Slice_3, Slice_4, Concat_4] anchor=\n"
            "Relu @after\n");
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
}

// The patch merging (features.2): x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2],
// x[:, 1::2, 1::2] as Slices of two shared row Slices, concatenated on the channels.
TEST(FuseConcatTest, PatchMergingSharesItsRowSlices) {
  FusionReport report;
  auto g = RunFusionPass<FuseConcat>(R"(
graph @main {
  input %x : f16[1,8,8,16]
  const %zero : i64[1] = [0]
  const %one : i64[1] = [1]
  const %two : i64[1] = [2]
  const %max : i64[1] = [9223372036854775807]
  %r0 = Slice(%x, %zero, %max, %one, %two) @Slice_1
  %a = Slice(%r0, %zero, %max, %two, %two) @Slice_2
  %r1 = Slice(%x, %one, %max, %one, %two) @Slice_3
  %b = Slice(%r1, %zero, %max, %two, %two) @Slice_4
  %c = Slice(%r0, %one, %max, %two, %two) @Slice_5
  %d = Slice(%r1, %one, %max, %two, %two) @Slice_6
  %y = Concat(%a, %b, %c, %d) {axis = -1} @Concat_3
  output %y
}
)",
                                     &report, 2);
  EXPECT_EQ(Summary(*g),
            "FusedGroup concat [Slice_1, Slice_2, Slice_3, Slice_4, Slice_5, Slice_6, Concat_3] anchor=\n");
}

// Must not join: a view also read outside the group (Slice_2 by a Relu; the roll's
// first axis then copies Slice_2 once and reads Slice_1 through strides), a view that
// is a graph output, and a Concat of computed values only (no change).
TEST(FuseConcatTest, ViewsReadOutsideStayOutside) {
  std::string text = kRoll;
  const std::string out = "  output %y\n";
  text.replace(text.find(out), out.size(), "  %z = Relu(%s2) @outside\n  output %y\n  output %z\n  output %s3\n");
  FusionReport report;
  auto g = RunFusionPass<FuseConcat>(text, &report, 3);
  EXPECT_EQ(Summary(*g),
            "Slice @Slice_2\nRelu @outside\nFusedGroup concat [Slice_1, Concat_3] anchor=\nSlice @Slice_3\n"
            "FusedGroup concat [Slice_4, Concat_4] anchor=\nRelu @after\n");

  // No view, or only an Expand of a one-element constant (which the group's body would
  // hold inline, leaving the copy nothing to read): no change.
  bool changed = true;
  auto g2 = RunFusionPass<FuseConcat>(R"(
graph @main {
  input %x : f16[2,4]
  input %w : f16[2,4]
  const %c : f16[1,1] = [0.5]
  const %shape : i64[2] = [2, 3]
  %a = Relu(%x) @a
  %e = Expand(%c, %shape) @expand
  %y = Concat(%a, %w, %e) {axis = 1} @concat
  output %y
}
)",
                                      nullptr, 4, &changed);
  EXPECT_FALSE(changed);
  EXPECT_TRUE(Groups(*g2).empty());
}

}  // namespace
}  // namespace kiln
