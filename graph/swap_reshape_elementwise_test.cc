// Tests for SwapReshapeElementwise: element-wise ops move before the Reshape they
// read; shared, output, and broadcast-changing Reshapes stay.
#include "graph/swap_reshape_elementwise.h"

#include <gtest/gtest.h>

#include <string>

#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::RunPass;

TEST(SwapReshapeElementwiseTest, ActivationAndScaledBiasMoveBeforeTheReshape) {
  // GPT-2's Conv1D: the product of rows is reshaped, then gelu'd; a bias along the
  // shared last dim and a scalar move too. The harness checks outputs are unchanged.
  const std::string out = RunPass<SwapReshapeElementwise>(R"(
graph @main {
  input %x : f32[6,4]
  const %s : i64[3] = [2, 3, 4]
  const %b : f32[4] = splat(0.5)
  const %k : f32[] = [2.0]
  %r = Reshape(%x, %s) @reshape
  %g = Gelu(%r) {approximate = "tanh"} @gelu
  %r2 = Reshape(%x, %s) @reshape2
  %a = Add(%r2, %b) @bias
  %m = Mul(%a, %k) @scale
  output %g
  output %m
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[6,4]
  const %s : i64[3] = [2, 3, 4]
  const %b : f32[4] = splat(0.5)
  const %k : f32[] = [2.0]
  %g/before_reshape : f32[6,4] = Gelu(%x) {approximate = "tanh"}
  %g : f32[2,3,4] = Reshape(%g/before_reshape, %s)
  %a/before_reshape : f32[6,4] = Add(%x, %b)
  %m/before_reshape : f32[6,4] = Mul(%a/before_reshape, %k)
  %m : f32[2,3,4] = Reshape(%m/before_reshape, %s)
  output %g
  output %m
}
)");
}

TEST(SwapReshapeElementwiseTest, MustNotFire) {
  // The reshaped value is read twice / is a graph output; a bias along a dim the
  // reshape changes; two reshaped operands.
  ExpectNoChange<SwapReshapeElementwise>(R"(
graph @main {
  input %x : f32[6,4]
  const %s : i64[3] = [2, 3, 4]
  %r = Reshape(%x, %s)
  %g = Relu(%r)
  %h = Neg(%r)
  output %g
  output %h
}
)");
  ExpectNoChange<SwapReshapeElementwise>(R"(
graph @main {
  input %x : f32[6,4]
  const %s : i64[3] = [2, 3, 4]
  %r = Reshape(%x, %s)
  %g = Relu(%r)
  output %g
  output %r
}
)");
  ExpectNoChange<SwapReshapeElementwise>(R"(
graph @main {
  input %x : f32[6,4]
  const %s : i64[2] = [4, 6]
  const %b : f32[6] = splat(0.5)
  %r = Reshape(%x, %s)
  %a = Add(%r, %b)
  output %a
}
)");
  ExpectNoChange<SwapReshapeElementwise>(R"(
graph @main {
  input %x : f32[6,4]
  input %y : f32[6,4]
  const %s : i64[3] = [2, 3, 4]
  %r = Reshape(%x, %s)
  %q = Reshape(%y, %s)
  %a = Add(%r, %q)
  output %a
}
)");
}

}  // namespace
}  // namespace kiln
