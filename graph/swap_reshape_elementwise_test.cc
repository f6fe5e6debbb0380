// Tests for SwapReshapeElementwise: element-wise ops move before the Reshape they
// read; shared, output, and broadcast-changing Reshapes stay.
#include "graph/swap_reshape_elementwise.h"

#include <gtest/gtest.h>

#include <string>

#include "graph/infer_shapes.h"
#include "graph/pass_test_util.h"
#include "graph/specialize.h"

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

// GPT-2's FFN as the dynamo exporter writes it for dynamic batch and seq: the Gemm over
// [batch*seq, 8], its output reshaped to [batch, seq, 16] by a shape built from the
// sizes, then the tanh gelu (recognize-gelu's form). The gelu moves before the
// Reshape and the graph is right at every size.
TEST(SwapReshapeElementwiseTest, OnADynamicGraph) {
  std::unique_ptr<Graph> before = pass_test::MustParse(R"(
graph @main {
  dim batch in [1, 4]
  dim seq in [1, 8]
  input %x : f32[32,8] dims "batch*seq, 8"
  const %w : f32[8,16] = splat(0.25)
  const %b : f32[16] = splat(0.5)
  const %s : i64[3] = [4, 8, 16] symbolic "batch, seq, 16"
  %y = Gemm(%x, %w, %b) @addmm
  %r = Reshape(%y, %s) @view
  %g = Gelu(%r) {approximate = "tanh"} @gelu
  output %g
}
)");
  std::unique_ptr<Graph> g = before->Clone();
  auto changed = SwapReshapeElementwise().Run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  ASSERT_TRUE(InferShapes(*g, {.fold_constants = false}).ok());
  const Value* pre = g->FindValue("g/before_reshape");
  ASSERT_NE(pre, nullptr);
  EXPECT_EQ(pre->producer()->input(0)->name(), "y");
  EXPECT_TRUE(CheckSpecializations(*g).ok());
  for (const std::vector<int64_t>& at : {std::vector<int64_t>{1, 3}, std::vector<int64_t>{4, 5}}) {
    auto want = Specialize(*before, at);
    auto got = Specialize(*g, at);
    ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
    pass_test::ExpectSameOutputs(**want, **got);
  }
}

// A bias along a last dim that is seq before the Reshape (2 only at seq = 2): on a
// dynamic graph the Add stays after the Reshape.
TEST(SwapReshapeElementwiseTest, MustNotFireOnAVaryingLastDim) {
  ExpectNoChange<SwapReshapeElementwise>(R"(
graph @main {
  dim seq in [1, 2]
  input %x : f32[2,2] dims "2, seq"
  const %s : i64[2] = [2, 2] symbolic "seq, 2"
  const %b : f32[2] = splat(0.5)
  %r = Reshape(%x, %s)
  %a = Add(%r, %b)
  output %a
}
)");
}

}  // namespace
}  // namespace kiln
