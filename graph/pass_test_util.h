// Shared harness for graph pass tests: parse + type, print without node names, compare outputs on random feeds.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "graph/evaluate.h"
#include "graph/infer_shapes.h"
#include "graph/text_format.h"
#include "graph/verifier.h"

namespace kiln::pass_test {

// Parses and types `text` (no constant folding, so chains on constants survive).
inline std::unique_ptr<Graph> MustParse(absl::string_view text) {
  auto g = ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return std::make_unique<Graph>();
  absl::Status s = InferShapes(**g, {.fold_constants = false});
  EXPECT_TRUE(s.ok()) << s;
  return std::move(*g);
}

// The graph's text without node names.
inline std::string Print(const Graph& g) {
  PrintOptions options;
  options.print_node_names = false;
  return PrintGraph(g, options);
}

// Expects `g` to verify as a typed graph of known ops.
inline void ExpectVerifies(const Graph& g) {
  absl::Status s = VerifyGraph(g, {.require_types = true, .require_known_ops = true});
  EXPECT_TRUE(s.ok()) << s;
}

// Runs both graphs on the same random inputs and expects equal outputs within
// 1e-5 relative (absolute below magnitude 1).
inline void ExpectSameOutputs(const Graph& before, const Graph& after, uint32_t seed = 7) {
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

// A constant's values in the text format: `count` distinct values in [-1, 1), then
// `zeros` zeros (a transposed or misplaced weight changes the outputs).
inline std::string DistinctValues(int count, int zeros = 0) {
  std::vector<std::string> v;
  for (int i = 0; i < count; ++i) v.push_back(absl::StrCat(((i * 37) % 101) / 50.5 - 1.0));
  for (int i = 0; i < zeros; ++i) v.push_back("0");
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
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
  ExpectVerifies(*g);
  ExpectSameOutputs(*before, *g);
  return Print(*g);
}

// RunPass for a pass that must not fire: the text after it is the text before.
template <typename Pass>
void ExpectNoChange(absl::string_view in) {
  EXPECT_EQ(RunPass<Pass>(in, /*fires=*/false), Print(*MustParse(in)));
}

}  // namespace kiln::pass_test
