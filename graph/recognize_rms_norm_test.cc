// Tests for RecognizeRmsNorm on the exporters' forms, cut from the zoo (shrunk):
// llama.dynamo (Pow, ReduceMean with an axes input, Add, Sqrt, Reciprocal, Mul,
// weight first), t5_encoder.legacy (Cast to f32, Div(1, Sqrt)) and an fp16 export's
// casts around the f32 math; plus the forms that must stay as they are.
#include "graph/recognize_rms_norm.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::ExpectSameOutputs;
using ::kiln::pass_test::MustParse;
using ::kiln::pass_test::Print;
using ::kiln::pass_test::RunPass;

TEST(RecognizeRmsNormTest, LlamaDynamoExport) {
  std::unique_ptr<Graph> g = MustParse(R"(
graph @main {
  input %embedding : f32[2,5,8]
  const %w : f32[8] = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, 1.0, -0.5]
  const %two : f32[] = [2.0]
  const %axes : i64[1] = [-1]
  const %eps : f32[] = [1e-06]
  %pow_1 = Pow(%embedding, %two) @node_pow_1
  %mean = ReduceMean(%pow_1, %axes) {keepdims = 1} @node_mean
  %add_3 = Add(%mean, %eps) @node_add_3
  %val_92 = Sqrt(%add_3) @node_Sqrt_92
  %rsqrt = Reciprocal(%val_92) @node_rsqrt
  %mul_2 = Mul(%embedding, %rsqrt) @node_mul_2
  %mul_3 = Mul(%w, %mul_2) @node_mul_3
  %res = Add(%embedding, %mul_3) @residual
  output %res
}
)");
  std::unique_ptr<Graph> before = g->Clone();
  absl::StatusOr<bool> changed = RecognizeRmsNorm().Run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  // x keeps its other reader (the residual); the norm takes the last node's name.
  EXPECT_EQ(Print(*g), R"(graph @main {
  input %embedding : f32[2,5,8]
  const %w : f32[8] = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, 1.0, -0.5]
  %mul_3 : f32[2,5,8] = RMSNormalization(%embedding, %w) {axis = -1, epsilon = 1e-06}
  %res : f32[2,5,8] = Add(%embedding, %mul_3)
  output %res
}
)");
  EXPECT_EQ(g->nodes()[0]->name(), "node_mul_3");
  ExpectSameOutputs(*before, *g);
}

TEST(RecognizeRmsNormTest, T5LegacyExportWithCastAndDiv) {
  EXPECT_EQ(RunPass<RecognizeRmsNorm>(R"(
graph @main {
  input %h : f32[2,5,8]
  const %w : f32[8] = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, 1.0, -0.5]
  const %two : f32[] = [2.0]
  const %axes : i64[1] = [-1]
  const %eps : f32[] = [1e-06]
  const %one : f32[] = [1.0]
  %c = Cast(%h) {to = 1} @layer_norm/Cast
  %p = Pow(%c, %two) @layer_norm/Pow
  %m = ReduceMean(%p, %axes) @layer_norm/ReduceMean
  %a = Add(%m, %eps) @layer_norm/Add
  %s = Sqrt(%a) @layer_norm/Sqrt
  %r = Div(%one, %s) @layer_norm/Div
  %y = Mul(%c, %r) @layer_norm/Mul
  %o = Mul(%w, %y) @layer_norm/Mul_1
  output %o
}
)"),
            R"(graph @main {
  input %h : f32[2,5,8]
  const %w : f32[8] = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, 1.0, -0.5]
  %o : f32[2,5,8] = RMSNormalization(%h, %w) {axis = -1, epsilon = 1e-06}
  output %o
}
)");
}

// An fp16 export: the math in f32 between two Casts, Div(x, sqrt), Mul(x, x), no
// weight: the norm reads the f16 tensor and gets a unit scale.
TEST(RecognizeRmsNormTest, HalfExportWithCastsAndNoWeight) {
  EXPECT_EQ(RunPass<RecognizeRmsNorm>(R"(
graph @main {
  input %h : f16[3,16]
  const %axes : i64[1] = [1]
  const %eps : f32[1] = [1e-05]
  %c = Cast(%h) {to = 1}
  %p = Mul(%c, %c)
  %m = ReduceMean(%p, %axes)
  %a = Add(%eps, %m)
  %s = Sqrt(%a)
  %y = Div(%c, %s)
  %o = Cast(%y) {to = 10} @norm/back
  %r = Relu(%o)
  output %r
}
)"),
            R"(graph @main {
  input %h : f16[3,16]
  const %norm/back/scale : f16[16] = splat(1.0)
  %o : f16[3,16] = RMSNormalization(%h, %norm/back/scale) {axis = -1, epsilon = 1e-05}
  %r : f16[3,16] = Relu(%o)
  output %r
}
)");
}

TEST(RecognizeRmsNormTest, WhatMustNotChange) {
  const char* kBase = R"(
graph @main {
  input %x : f32[2,8]
  const %two : f32[] = [2.0]
  const %eps : f32[] = [1e-06]
  %p = Pow(%x, %two)
  %m = ReduceMean(%p) {axes = [AXES]}
  %a = Add(%m, %eps)
  %s = Sqrt(%a)
  %r = Reciprocal(%s)
  %y = Mul(%x, %r)
  output %y
  EXTRA
}
)";
  auto form = [&](const std::string& axes, const std::string& extra) {
    std::string t = kBase;
    t.replace(t.find("AXES"), 4, axes);
    t.replace(t.find("EXTRA"), 5, extra);
    return t;
  };
  ASSERT_NE(RunPass<RecognizeRmsNorm>(form("-1", "")).find("RMSNormalization"), std::string::npos);  // base fires
  ExpectNoChange<RecognizeRmsNorm>(form("0", ""));           // the mean over the batch axis
  ExpectNoChange<RecognizeRmsNorm>(form("0, 1", ""));        // over both axes
  ExpectNoChange<RecognizeRmsNorm>(form("-1", "output %s"));  // an intermediate read outside
  // A fourth power instead of a square, and an eps computed at run time.
  std::string quartic = form("-1", "");
  quartic.replace(quartic.find("[2.0]"), 5, "[4.0]");
  ExpectNoChange<RecognizeRmsNorm>(quartic);
  std::string computed_eps = form("-1", "");
  computed_eps.replace(computed_eps.find("const %eps : f32[] = [1e-06]"), 28, "input %e : f32[]\n  %eps = Abs(%e)");
  ExpectNoChange<RecognizeRmsNorm>(computed_eps);
}

}  // namespace
}  // namespace kiln
