// Tests for RecognizeGelu: text graph in, expected text out, outputs unchanged.
#include "graph/recognize_gelu.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/evaluate.h"
#include "graph/infer_shapes.h"
#include "graph/text_format.h"
#include "graph/verifier.h"

namespace kiln {
namespace {

std::unique_ptr<Graph> MustParse(absl::string_view text) {
  auto g = ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return std::make_unique<Graph>();
  absl::Status s = InferShapes(**g, {.fold_constants = false});
  EXPECT_TRUE(s.ok()) << s;
  return std::move(*g);
}

std::string Print(const Graph& g) {
  PrintOptions options;
  options.print_node_names = false;
  return PrintGraph(g, options);
}

// Runs both graphs on the same random inputs and expects equal outputs within
// 1e-5 relative (absolute below magnitude 1).
void ExpectSameOutputs(const Graph& before, const Graph& after, uint32_t seed = 7) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  TensorMap feeds;
  for (const Value* in : before.inputs()) {
    std::vector<float> data(in->numel());
    for (float& v : data) v = dist(rng);
    feeds[in->name()] = Tensor::FromFloat(in->dtype(), in->shape(), data);
  }
  auto want = EvaluateGraph(before, feeds);
  auto got = EvaluateGraph(after, feeds);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(want->size(), got->size());
  for (size_t i = 0; i < want->size(); ++i) {
    ASSERT_EQ((*want)[i].shape(), (*got)[i].shape());
    const std::vector<float> w = (*want)[i].ToFloat(), g = (*got)[i].ToFloat();
    for (size_t j = 0; j < w.size(); ++j) {
      EXPECT_NEAR(g[j], w[j], 1e-5 * std::max(1.f, std::abs(w[j]))) << "output " << i << " element " << j;
    }
  }
}

// Parses `in`, runs the pass, expects it to report `fires`, a verified typed graph
// and unchanged outputs; returns the text after the pass.
template <typename Pass>
std::string RunPass(absl::string_view in, bool fires = true) {
  std::unique_ptr<Graph> before = MustParse(in);
  std::unique_ptr<Graph> g = before->Clone();
  auto changed = Pass().Run(*g);
  EXPECT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(changed.ok() && *changed, fires);
  absl::Status s = VerifyGraph(*g, {.require_types = true, .require_known_ops = true});
  EXPECT_TRUE(s.ok()) << s;
  ExpectSameOutputs(*before, *g);
  return Print(*g);
}

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
  const std::string in = R"(
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
  %z = Add(%y, %e)
  output %z
}
)";
  EXPECT_EQ(RunPass<RecognizeGelu>(in, /*fires=*/false), Print(*MustParse(in)));
}

TEST(RecognizeGeluTest, DoesNotFireWhenAnIntermediateIsAGraphOutput) {
  const std::string in = R"(
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
  output %p
}
)";
  EXPECT_EQ(RunPass<RecognizeGelu>(in, /*fires=*/false), Print(*MustParse(in)));
}

TEST(RecognizeGeluTest, DoesNotFireOnWrongConstantsOrOtherInput) {
  // 0.6 instead of 0.5.
  const std::string wrong_half = R"(
graph @main {
  input %x : f32[2,8]
  const %sqrt2 : f32[] = [1.4142135]
  const %one : f32[] = [1.0]
  const %c : f32[] = [0.6]
  %s = Div(%x, %sqrt2)
  %e = Erf(%s)
  %p = Add(%e, %one)
  %m = Mul(%x, %p)
  %y = Mul(%m, %c)
  output %y
}
)";
  EXPECT_EQ(RunPass<RecognizeGelu>(wrong_half, /*fires=*/false), Print(*MustParse(wrong_half)));
  // The erf reads another tensor than the one multiplied.
  const std::string other = R"(
graph @main {
  input %x : f32[2,8]
  input %w : f32[2,8]
  const %sqrt2 : f32[] = [1.4142135]
  const %one : f32[] = [1.0]
  const %half : f32[] = [0.5]
  %s = Div(%w, %sqrt2)
  %e = Erf(%s)
  %p = Add(%e, %one)
  %m = Mul(%x, %p)
  %y = Mul(%m, %half)
  output %y
}
)";
  EXPECT_EQ(RunPass<RecognizeGelu>(other, /*fires=*/false), Print(*MustParse(other)));
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
  EXPECT_EQ(RunPass<RecognizeGelu>(wrong_coeff, /*fires=*/false), Print(*MustParse(wrong_coeff)));
}

TEST(RecognizeGeluTest, DoesNotFireWhenAConstantBroadcastsTheOutput) {
  // 0.5 as f32[1,1,1]: y is [1,2,8], not x's shape, so one Gelu(x) cannot produce it.
  const std::string in = R"(
graph @main {
  input %x : f32[2,8]
  const %sqrt2 : f32[] = [1.4142135]
  const %one : f32[] = [1.0]
  const %half : f32[1,1,1] = [0.5]
  %s = Div(%x, %sqrt2)
  %e = Erf(%s)
  %p = Add(%e, %one)
  %m = Mul(%x, %p)
  %y = Mul(%m, %half)
  output %y
}
)";
  EXPECT_EQ(RunPass<RecognizeGelu>(in, /*fires=*/false), Print(*MustParse(in)));
}

}  // namespace
}  // namespace kiln
