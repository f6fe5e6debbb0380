// Tests for PadMatMulWidth: odd-width weights are zero-padded to a multiple of 8 and
// the product sliced back; aligned, small, shared and flagged weights are left alone.
#include "graph/pad_matmul_width.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::RunPass;

std::string Model(int64_t n, const std::string& extra = "") {
  return absl::StrCat(R"(
graph @main {
  input %x : f32[2,3,8]
  const %w : f32[8,)", n, R"(] = splat(0.25)
  %y = MatMul(%x, %w)", extra, R"() @head
  output %y
}
)");
}

TEST(PadMatMulWidthTest, OddWidthIsPaddedAndSlicedBack) {
  // N = 257: W becomes [8, 264]; the Slice writes %y (the graph output) again. The
  // harness checks outputs against the unpadded graph.
  const std::string out = RunPass<PadMatMulWidth>(Model(257));
  EXPECT_NE(out.find("const %w/padded : f32[8,264]"), std::string::npos) << out;
  EXPECT_NE(out.find("%y/padded : f32[2,3,264] = MatMul(%x, %w/padded)"), std::string::npos) << out;
  EXPECT_NE(out.find("%y : f32[2,3,257] = Slice(%y/padded, %y/starts, %y/ends, %y/axes)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("output %y"), std::string::npos) << out;
}

TEST(PadMatMulWidthTest, LeavesAlignedSmallAndFlaggedWeights) {
  ExpectNoChange<PadMatMulWidth>(Model(256));  // already a multiple of 8
  ExpectNoChange<PadMatMulWidth>(Model(7));  // N = 7: below kMinPaddedWidth
  // A weight read twice keeps its one copy.
  ExpectNoChange<PadMatMulWidth>(R"(
graph @main {
  input %x : f32[2,8]
  const %w : f32[8,257] = splat(0.25)
  %y = MatMul(%x, %w)
  %z = MatMul(%x, %w)
  %s = Add(%y, %z)
  output %s
}
)");
  // A computed weight, or a flagged MatMul, is not padded.
  ExpectNoChange<PadMatMulWidth>(R"(
graph @main {
  input %x : f32[2,8]
  input %w : f32[8,257]
  %y = MatMul(%x, %w)
  output %y
}
)");
  ExpectNoChange<PadMatMulWidth>(R"(
graph @main {
  input %x : f32[8,2]
  const %w : f32[8,257] = splat(0.25)
  %y = MatMul(%x, %w) {trans_a = 1}
  output %y
}
)");
}

}  // namespace
}  // namespace kiln
