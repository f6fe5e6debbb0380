// Tests for RemoveIdentity: text graph in, expected text out, outputs unchanged.
#include "graph/remove_identity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

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

TEST(RemoveIdentityTest, RemovesIdentityAndInferenceDropout) {
  const std::string out = RunPass<RemoveIdentity>(R"(
graph @main {
  input %x : f32[2,3]
  const %ratio : f32[] = [0.1]
  const %train : bool[] = [false]
  %a = Identity(%x)
  %b = Relu(%a)
  %c = Identity(%b)
  %d = Dropout(%c, %ratio)
  %e, %mask = Dropout(%d, %ratio, %train)
  %y = Tanh(%e)
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[2,3]
  %b : f32[2,3] = Relu(%x)
  %y : f32[2,3] = Tanh(%b)
  output %y
}
)");
}

TEST(RemoveIdentityTest, KeepsGraphOutputsUsedMasksAndTrainingMode) {
  // %i is a graph output (its name must stay); %m is read; %t is computed.
  const std::string in = R"(
graph @main {
  input %x : f32[4]
  %i = Identity(%x)
  %r = Relu(%i)
  %d, %m = Dropout(%r)
  %n = Not(%m)
  output %i
  output %d
  output %n
}
)";
  EXPECT_EQ(RunPass<RemoveIdentity>(in, /*fires=*/false), Print(*MustParse(in)));
}

TEST(RemoveIdentityTest, KeepsDropoutWithNonConstantTrainingMode) {
  std::unique_ptr<Graph> g = MustParse(R"(
graph @main {
  input %x : f32[4]
  input %t : bool[]
  %d = Dropout(%x, _, %t)
  %y = Relu(%d)
  output %y
}
)");
  const std::string before = Print(*g);
  auto changed = RemoveIdentity().Run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(Print(*g), before);
}

TEST(RemoveIdentityTest, OnlyTheOutputIdentityOfAChainStays) {
  const std::string out = RunPass<RemoveIdentity>(R"(
graph @main {
  input %x : f32[3]
  %a = Identity(%x)
  %b = Identity(%a)
  %y = Identity(%b)
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[3]
  %y : f32[3] = Identity(%x)
  output %y
}
)");
}

}  // namespace
}  // namespace kiln
