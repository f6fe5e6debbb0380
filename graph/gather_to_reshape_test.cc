// Tests for GatherToReshape: text graph in, expected text out, outputs unchanged.
#include "graph/gather_to_reshape.h"

#include <gtest/gtest.h>

#include <string>

#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::RunPass;

// The padding mask of bert.legacy in the zoo (batch 2, 8 tokens) as the legacy exporter
// writes it: Flatten to [16, 1], then a Gather of arange(16) shaped [2, 1, 1, 8].
TEST(GatherToReshapeTest, LegacyMaskGatherIsAReshape) {
  const std::string out = RunPass<GatherToReshape>(R"(
graph @main {
  input %attention_mask : i64[2,8]
  const %idx : i64[2,1,1,8] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
  %cast = Cast(%attention_mask) {to = 9} @/m/Cast
  %flat = Flatten(%cast) {axis = 2} @/m/Flatten
  %g = Gather(%flat, %idx) {axis = 0} @/m/Gather_4
  %f = Cast(%g) {to = 1}
  output %f
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %attention_mask : i64[2,8]
  const %/m/Gather_4/shape : i64[5] = [2, 1, 1, 8, 1]
  %cast : bool[2,8] = Cast(%attention_mask) {to = 9}
  %flat : bool[16,1] = Flatten(%cast) {axis = 2}
  %g : bool[2,1,1,8,1] = Reshape(%flat, %/m/Gather_4/shape)
  %f : f32[2,1,1,8,1] = Cast(%g) {to = 1}
  output %f
}
)");
}

// Negative indices count from the end; an inner axis works the same.
TEST(GatherToReshapeTest, NegativeIndicesAndInnerAxis) {
  const std::string out = RunPass<GatherToReshape>(R"(
graph @main {
  input %x : f32[3,4]
  const %idx : i64[2,2] = [0, -3, 2, -1]
  %y = Gather(%x, %idx) {axis = 1}
  output %y
}
)");
  EXPECT_NE(out.find("%y : f32[3,2,2] = Reshape(%x, %Gather_0/shape)"), std::string::npos) << out;
}

// Indices out of order, repeated, a subset, computed: kept.
TEST(GatherToReshapeTest, MustNotFire) {
  ExpectNoChange<GatherToReshape>(R"(
graph @main {
  input %x : f32[4,3]
  input %i : i64[4]
  const %perm : i64[4] = [1, 0, 2, 3]
  const %rep : i64[4] = [0, 1, 1, 3]
  const %sub : i64[3] = [0, 1, 2]
  %a = Gather(%x, %perm) {axis = 0}
  %b = Gather(%x, %rep) {axis = 0}
  %c = Gather(%x, %sub) {axis = 0}
  %d = Gather(%x, %i) {axis = 0}
  output %a
  output %b
  output %c
  output %d
}
)");
}

}  // namespace
}  // namespace kiln
