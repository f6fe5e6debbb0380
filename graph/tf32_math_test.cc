// Tests for Tf32Math: f32 MatMul, Gemm and Conv nodes are marked `tf32 = 1`, constant
// B operands read [K, N] are stored [N, K] (trans_b) once per constant, and nothing
// else changes: f16 graphs, computed operands, weights already K-major.
#include "graph/tf32_math.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::DistinctValues;
using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::RunPass;

// A Linear layer as the exporters leave it after canonicalisation: MatMul with the
// weight stored [K, N] (the legacy exporter's transposed initializer; gemm-to-matmul's
// form of the dynamo exporter's Gemm(transB = 1)), then the bias Add.
TEST(Tf32MathTest, LinearWeightIsStoredKMajorAndMarked) {
  const std::string out = RunPass<Tf32Math>(absl::StrCat(R"(
graph @main {
  input %x : f32[2,3,4]
  const %w : f32[4,5] = )", DistinctValues(20), R"(
  const %b : f32[5] = splat(0.5)
  %y = MatMul(%x, %w)
  %z = Add(%y, %b)
  output %z
}
)"));
  EXPECT_NE(out.find("const %w/k_major : f32[5,4]"), std::string::npos) << out;
  EXPECT_NE(out.find("MatMul(%x, %w/k_major) {tf32 = 1, trans_b = 1}"), std::string::npos) << out;
  EXPECT_EQ(out.find("const %w :"), std::string::npos) << out;  // the [K, N] copy is gone
  EXPECT_EQ(out.find("Add(%y, %b) {"), std::string::npos) << out;
}

TEST(Tf32MathTest, SharedWeightGetsOneCopyAndKeepsItsOtherReaders) {
  const std::string out = RunPass<Tf32Math>(absl::StrCat(R"(
graph @main {
  input %x : f32[4,4]
  const %w : f32[4,4] = )", DistinctValues(16), R"(
  %y = MatMul(%x, %w)
  %z = MatMul(%y, %w)
  %s = Add(%z, %w)
  output %s
}
)"));
  EXPECT_NE(out.find("%y : f32[4,4] = MatMul(%x, %w/k_major) {tf32 = 1, trans_b = 1}"), std::string::npos) << out;
  EXPECT_NE(out.find("%z : f32[4,4] = MatMul(%y, %w/k_major) {tf32 = 1, trans_b = 1}"), std::string::npos) << out;
  EXPECT_NE(out.find("Add(%z, %w)"), std::string::npos) << out;  // the original stays for the Add
  EXPECT_EQ(out.find("k_major_"), std::string::npos) << out;
}

TEST(Tf32MathTest, ComputedAndKMajorOperandsAreOnlyMarked) {
  const std::string out = RunPass<Tf32Math>(absl::StrCat(R"(
graph @main {
  input %q : f32[2,8,16]
  input %k : f32[2,8,16]
  const %w : f32[16,16] = )", DistinctValues(256), R"(
  %s = MatMul(%q, %k) {trans_b = 1}
  %v = MatMul(%s, %q)
  %o = MatMul(%v, %w) {trans_b = 1}
  output %o
}
)"));
  EXPECT_NE(out.find("MatMul(%q, %k) {tf32 = 1, trans_b = 1}"), std::string::npos) << out;
  EXPECT_NE(out.find("MatMul(%s, %q) {tf32 = 1}"), std::string::npos) << out;  // computed B keeps [K, N]
  EXPECT_NE(out.find("MatMul(%v, %w) {tf32 = 1, trans_b = 1}"), std::string::npos) << out;
  EXPECT_EQ(out.find("k_major"), std::string::npos) << out;
}

TEST(Tf32MathTest, ConvIsMarked) {
  const std::string out = RunPass<Tf32Math>(R"(
graph @main {
  input %x : f32[1,3,8,8]
  const %w : f32[4,3,3,3] = splat(0.1)
  %y = Conv(%x, %w) {pads = [1, 1, 1, 1]}
  output %y
}
)");
  EXPECT_NE(out.find("Conv(%x, %w) {pads = [1, 1, 1, 1], tf32 = 1}"), std::string::npos) << out;
}

TEST(Tf32MathTest, LeavesHalfPrecisionAndMarkedGraphsAlone) {
  ExpectNoChange<Tf32Math>(R"(
graph @main {
  input %x : f16[2,4]
  const %w : f16[4,8] = splat(0.25)
  %y = MatMul(%x, %w)
  output %y
}
)");
  ExpectNoChange<Tf32Math>(R"(
graph @main {
  input %x : f32[2,4]
  const %w : f32[8,4] = splat(0.25)
  %y = MatMul(%x, %w) {tf32 = 1, trans_b = 1}
  output %y
}
)");
}

}  // namespace
}  // namespace kiln
