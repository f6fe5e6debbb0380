// Tests for EliminateCommonSubexpressions: text graph in, expected text out, outputs unchanged.
#include "graph/eliminate_common_subexpressions.h"

#include <gtest/gtest.h>

#include <string>

#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::RunPass;

// The padding mask of bert.legacy in the zoo (batch 2, 8 tokens, two layers) as the
// legacy exporter writes it: the boolean mask is built once, then every layer's SDPA
// decomposition turns it into an additive mask with its own 0 and -inf constants.
// The scores' consumer is Softmax in the export; Exp here, so that masked entries
// compare as 0 rather than as NaN rows.
TEST(EliminateCommonSubexpressionsTest, MergesTheLegacyExportersPerLayerMasks) {
  const std::string out = RunPass<EliminateCommonSubexpressions>(R"(
graph @main {
  input %attention_mask : i64[2,8]
  input %scores0 : f32[2,2,8,8]
  input %scores1 : f32[2,2,8,8]
  const %shape : i64[4] = [2, 1, 1, 8]
  const %expand_shape : i64[4] = [2, 1, 8, 8]
  const %all : bool[1,1,8,1] = splat(true)
  const %zero0 : f32[1] = [0.0]
  const %ninf0 : f32[1] = [-inf]
  const %zero1 : f32[1] = [0.0]
  const %ninf1 : f32[1] = [-inf]
  %cast = Cast(%attention_mask) {to = 9}
  %mask = Reshape(%cast, %shape)
  %and = And(%all, %mask)
  %expanded = Expand(%and, %expand_shape)
  %add_mask0 = Where(%expanded, %zero0, %ninf0)
  %add0 = Add(%scores0, %add_mask0)
  %p0 = Exp(%add0)
  %add_mask1 = Where(%expanded, %zero1, %ninf1)
  %add1 = Add(%scores1, %add_mask1)
  %p1 = Exp(%add1)
  output %p0
  output %p1
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %attention_mask : i64[2,8]
  input %scores0 : f32[2,2,8,8]
  input %scores1 : f32[2,2,8,8]
  const %shape : i64[4] = [2, 1, 1, 8]
  const %expand_shape : i64[4] = [2, 1, 8, 8]
  const %all : bool[1,1,8,1] = splat(true)
  const %zero0 : f32[1] = [0.0]
  const %ninf0 : f32[1] = [-inf]
  %cast : bool[2,8] = Cast(%attention_mask) {to = 9}
  %mask : bool[2,1,1,8] = Reshape(%cast, %shape)
  %and : bool[2,1,8,8] = And(%all, %mask)
  %expanded : bool[2,1,8,8] = Expand(%and, %expand_shape)
  %add_mask0 : f32[2,1,8,8] = Where(%expanded, %zero0, %ninf0)
  %add0 : f32[2,2,8,8] = Add(%scores0, %add_mask0)
  %p0 : f32[2,2,8,8] = Exp(%add0)
  %add1 : f32[2,2,8,8] = Add(%scores1, %add_mask0)
  %p1 : f32[2,2,8,8] = Exp(%add1)
  output %p0
  output %p1
}
)");
}

// A duplicated chain goes in one run: once the second Cast reads as the first, the
// second Relu is a duplicate too. Multi-output nodes merge output by output.
TEST(EliminateCommonSubexpressionsTest, CollapsesChainsAndMultiOutputNodes) {
  const std::string out = RunPass<EliminateCommonSubexpressions>(R"(
graph @main {
  input %x : f32[4,6]
  const %sizes : i64[2] = [2, 4]
  %a = Cast(%x) {to = 10}
  %b = Cast(%x) {to = 10}
  %ra = Relu(%a)
  %rb = Relu(%b)
  %s0, %s1 = Split(%x, %sizes) {axis = 1}
  %t0, %t1 = Split(%x, %sizes) {axis = 1}
  %y = Sub(%ra, %rb)
  %z = Concat(%s1, %t1, %s0, %t0) {axis = 1}
  output %y
  output %z
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[4,6]
  const %sizes : i64[2] = [2, 4]
  %a : f16[4,6] = Cast(%x) {to = 10}
  %ra : f16[4,6] = Relu(%a)
  %s0 : f32[4,2], %s1 : f32[4,4] = Split(%x, %sizes) {axis = 1}
  %y : f16[4,6] = Sub(%ra, %ra)
  %z : f32[4,12] = Concat(%s1, %s1, %s0, %s0) {axis = 1}
  output %y
  output %z
}
)");
}

// Different attributes, different constant values, different inputs, a later node
// whose output is a graph output: nothing merges.
TEST(EliminateCommonSubexpressionsTest, KeepsWhatDiffers) {
  ExpectNoChange<EliminateCommonSubexpressions>(R"(
graph @main {
  input %x : f32[2,3]
  input %w : f32[2,3]
  const %one : f32[] = [1.0]
  const %two : f32[] = [2.0]
  %a = Softmax(%x) {axis = 0}
  %b = Softmax(%x) {axis = 1}
  %c = Add(%x, %one)
  %d = Add(%x, %two)
  %e = Add(%w, %one)
  %f = Relu(%x)
  %g = Relu(%x)
  %s = Sum(%a, %b, %c, %d, %e, %f)
  output %s
  output %g
}
)");
}

// Constants past kMaxComparedConstantBytes are compared by identity only: two equal
// large weights stay two MatMuls (a weight is never hashed); the same weight value
// read twice merges.
TEST(EliminateCommonSubexpressionsTest, ComparesLargeConstantsByIdentity) {
  const std::string in = R"(
graph @main {
  input %x : f32[2,256]
  const %w0 : f32[256,4] = splat(0.5)
  const %w1 : f32[256,4] = splat(0.5)
  %a = MatMul(%x, %w0)
  %b = MatMul(%x, %w1)
  %c = MatMul(%x, %w0)
  %y = Sum(%a, %b, %c)
  output %y
}
)";
  const std::string out = RunPass<EliminateCommonSubexpressions>(in);
  EXPECT_NE(out.find("%b : f32[2,4] = MatMul(%x, %w1)"), std::string::npos) << out;
  EXPECT_NE(out.find("Sum(%a, %b, %a)"), std::string::npos) << out;
}

// A dynamic graph's shape constants (graph/symbolic_shapes.h) are equal when their
// expressions are, not when only their values at the largest sizes agree.
TEST(EliminateCommonSubexpressionsTest, ComparesShapeConstantsByTheirExpressions) {
  const std::string out = RunPass<EliminateCommonSubexpressions>(R"(
graph @main {
  dim seq in [1, 8]
  input %x : f32[8,4] dims "seq, 4"
  const %t1 : i64[2] = [4, 8] symbolic "4, seq"
  const %t2 : i64[2] = [4, 8] symbolic "4, seq"
  const %t3 : i64[2] = [4, 8]
  %a = Reshape(%x, %t1)
  %b = Reshape(%x, %t2)
  %c = Reshape(%x, %t3)
  %y = Concat(%a, %b, %c) {axis = 0}
  output %y
}
)");
  EXPECT_EQ(out.find("= Reshape(%x, %t2)"), std::string::npos) << out;
  EXPECT_NE(out.find("%c : f32[4,8] = Reshape(%x, %t3)"), std::string::npos) << out;
  EXPECT_NE(out.find("Concat(%a, %a, %c)"), std::string::npos) << out;
}

}  // namespace
}  // namespace kiln
