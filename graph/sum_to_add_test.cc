// Tests for SumToAdd: text graph in, expected text out, outputs unchanged.
#include "graph/sum_to_add.h"

#include <gtest/gtest.h>

#include <string>

#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::RunPass;

TEST(SumToAddTest, BinaryAndVariadicSumsBecomeAdds) {
  // A residual Sum of two, a three-input Sum with a broadcast operand, a one-input
  // Sum that goes.
  const std::string out = RunPass<SumToAdd>(R"(
graph @main {
  input %x : f32[2,3]
  input %r : f32[2,3]
  input %b : f32[3]
  %s = Sum(%x, %r) @residual
  %t = Sum(%s, %b, %x) @three
  %u = Sum(%t) @one
  %y = Relu(%u)
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[2,3]
  input %r : f32[2,3]
  input %b : f32[3]
  %s : f32[2,3] = Add(%x, %r)
  %three/add1 : f32[2,3] = Add(%s, %b)
  %t : f32[2,3] = Add(%three/add1, %x)
  %y : f32[2,3] = Relu(%t)
  output %y
}
)");
}

TEST(SumToAddTest, KeepsAOneInputSumThatIsAGraphOutput) {
  ExpectNoChange<SumToAdd>(R"(
graph @main {
  input %x : f32[4]
  %y = Sum(%x) @one
  output %y
}
)");
}

}  // namespace
}  // namespace kiln
