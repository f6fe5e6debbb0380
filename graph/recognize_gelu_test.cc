// Tests for RecognizeGelu: text graph in, expected text out, outputs unchanged.
#include "graph/recognize_gelu.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::ExpectSameOutputs;
using ::kiln::pass_test::MustParse;
using ::kiln::pass_test::Print;
using ::kiln::pass_test::RunPass;

// Expected text for a graph whose only node is y = Gelu(x).
std::string GeluGraph(absl::string_view approximate) {
  return absl::StrCat(R"(graph @main {
  input %x : f32[2,8]
  %y : f32[2,8] = Gelu(%x) {approximate = ")",
                      approximate, R"("}
  output %y
}
)");
}

// The erf GELU as kiln's models emit it, without node names, with each `{from, to}`
// of `edits` applied (each `from` stands once): the variants the pass must not fire on.
std::string ErfGelu(std::initializer_list<std::pair<absl::string_view, absl::string_view>> edits) {
  std::string text = R"(
graph @main {
  input %x : f32[2,8]
  const %sqrt2 : f32[] = [1.4142135]
  const %one : f32[] = [1.0]
  const %half : f32[] = [0.5]
  %s = Div(%x, %sqrt2)
  %e = Erf(%s)
  %p = Add(%e, %one)
  %m = Mul(%x, %p)
  %y = Mul(%m, %half)
  output %y
}
)";
  for (const auto& [from, to] : edits) text = absl::StrReplaceAll(text, {{from, to}});
  return text;
}

TEST(RecognizeGeluTest, ErfFormAsKilnModelsEmitIt) {
  // models/model_builder.cc GeluErf (opset < 20): Div, Erf, Add(·, 1), Mul(x, ·), Mul(·, 0.5).
  std::unique_ptr<Graph> g = MustParse(R"(
graph @main {
  input %x : f32[2,8]
  const %sqrt2 : f32[] = [1.4142135]
  const %one : f32[] = [1.0]
  const %half : f32[] = [0.5]
  %s = Div(%x, %sqrt2) @act/Div
  %e = Erf(%s) @act/Erf
  %p = Add(%e, %one) @act/Add
  %m = Mul(%x, %p) @act/Mul
  %y = Mul(%m, %half) @act/Mul_1
  output %y
}
)");
  std::unique_ptr<Graph> before = g->Clone();
  auto changed = RecognizeGelu().Run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(Print(*g), GeluGraph("none"));
  ASSERT_EQ(g->num_nodes(), 1);
  EXPECT_EQ(g->nodes()[0]->name(), "act/Mul_1");
  ExpectSameOutputs(*before, *g);
}

TEST(RecognizeGeluTest, ErfFormOtherArrangements) {
  // Mul(Mul(x, 0.5), Add(1, Erf(Div(x, sqrt2)))).
  EXPECT_EQ(RunPass<RecognizeGelu>(R"(
graph @main {
  input %x : f32[2,8]
  const %sqrt2 : f32[] = [1.41421]
  const %one : f32[] = [1.0]
  const %half : f32[] = [0.5]
  %h = Mul(%x, %half)
  %s = Div(%x, %sqrt2)
  %e = Erf(%s)
  %p = Add(%one, %e)
  %y = Mul(%h, %p)
  output %y
}
)"),
            GeluGraph("none"));
  // Mul(x, Mul(0.5, Add(Erf(Mul(x, 0.7071)), 1))).
  EXPECT_EQ(RunPass<RecognizeGelu>(R"(
graph @main {
  input %x : f32[2,8]
  const %inv_sqrt2 : f32[] = [0.70710677]
  const %one : f32[1] = [1.0]
  const %half : f32[] = [0.5]
  %s = Mul(%inv_sqrt2, %x)
  %e = Erf(%s)
  %p = Add(%e, %one)
  %q = Mul(%half, %p)
  %y = Mul(%x, %q)
  output %y
}
)"),
            GeluGraph("none"));
}

TEST(RecognizeGeluTest, TanhFormAsKilnModelsEmitIt) {
  // models/model_builder.cc GeluTanh (GPT-2's NewGELUActivation).
  EXPECT_EQ(RunPass<RecognizeGelu>(R"(
graph @main {
  input %x : f32[2,8]
  const %half : f32[] = [0.5]
  const %three : f32[] = [3.0]
  const %coeff : f32[] = [0.044715]
  const %k : f32[] = [0.7978846]
  const %one : f32[] = [1.0]
  %hx = Mul(%x, %half)
  %cube = Pow(%x, %three)
  %cs = Mul(%cube, %coeff)
  %inner = Add(%x, %cs)
  %arg = Mul(%inner, %k)
  %t = Tanh(%arg)
  %p = Add(%t, %one)
  %y = Mul(%hx, %p)
  output %y
}
)"),
            GeluGraph("tanh"));
}

TEST(RecognizeGeluTest, TanhFormWithExplicitCube) {
  // 0.5 * x * (1 + tanh(k * (x + 0.044715 * (x * x) * x))), constants first.
  EXPECT_EQ(RunPass<RecognizeGelu>(R"(
graph @main {
  input %x : f32[2,8]
  const %half : f32[] = [0.5]
  const %coeff : f32[] = [0.044715]
  const %k : f32[] = [0.79788]
  const %one : f32[] = [1.0]
  %sq = Mul(%x, %x)
  %cube = Mul(%sq, %x)
  %cs = Mul(%coeff, %cube)
  %inner = Add(%cs, %x)
  %arg = Mul(%k, %inner)
  %t = Tanh(%arg)
  %p = Add(%one, %t)
  %hx = Mul(%half, %x)
  %y = Mul(%p, %hx)
  output %y
}
)"),
            GeluGraph("tanh"));
}

TEST(RecognizeGeluTest, DoesNotFireWhenAnIntermediateIsReadElsewhere) {
  const std::string in = ErfGelu({{"  output %y\n", "  %z = Add(%y, %e)\n  output %z\n"}});
  ExpectNoChange<RecognizeGelu>(in);
}

TEST(RecognizeGeluTest, DoesNotFireWhenAnIntermediateIsAGraphOutput) {
  const std::string in = ErfGelu({{"  output %y\n", "  output %y\n  output %p\n"}});
  ExpectNoChange<RecognizeGelu>(in);
}

TEST(RecognizeGeluTest, DoesNotFireOnWrongConstantsOrOtherInput) {
  // 0.6 instead of 0.5.
  const std::string wrong_half =
      ErfGelu({{"const %half : f32[] = [0.5]", "const %c : f32[] = [0.6]"}, {"Mul(%m, %half)", "Mul(%m, %c)"}});
  ExpectNoChange<RecognizeGelu>(wrong_half);
  // The erf reads another tensor than the one multiplied.
  const std::string other = ErfGelu({{"  input %x : f32[2,8]\n", "  input %x : f32[2,8]\n  input %w : f32[2,8]\n"},
                                     {"Div(%x, %sqrt2)", "Div(%w, %sqrt2)"}});
  ExpectNoChange<RecognizeGelu>(other);
  // The cube coefficient is off (0.05 instead of 0.044715).
  const std::string wrong_coeff = R"(
graph @main {
  input %x : f32[2,8]
  const %half : f32[] = [0.5]
  const %three : f32[] = [3.0]
  const %coeff : f32[] = [0.05]
  const %k : f32[] = [0.7978846]
  const %one : f32[] = [1.0]
  %hx = Mul(%x, %half)
  %cube = Pow(%x, %three)
  %cs = Mul(%cube, %coeff)
  %inner = Add(%x, %cs)
  %arg = Mul(%inner, %k)
  %t = Tanh(%arg)
  %p = Add(%t, %one)
  %y = Mul(%hx, %p)
  output %y
}
)";
  ExpectNoChange<RecognizeGelu>(wrong_coeff);
}

TEST(RecognizeGeluTest, DoesNotFireWhenAConstantBroadcastsTheOutput) {
  // 0.5 as f32[1,1,1]: y is [1,2,8], not x's shape, so one Gelu(x) cannot produce it.
  const std::string in = ErfGelu({{"const %half : f32[] = [0.5]", "const %half : f32[1,1,1] = [0.5]"}});
  ExpectNoChange<RecognizeGelu>(in);
}

}  // namespace
}  // namespace kiln
