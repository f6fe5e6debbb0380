// Shared helpers for the fusion pass tests: parse + type a text graph, randomise its
// constants, random feeds, compare fused vs unfused reference results, run a fusion
// pass with those checks, summarise the groups of a graph and the report.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "fusion/fusion_report.h"
#include "graph/evaluate.h"
#include "graph/fused_group.h"
#include "graph/infer_shapes.h"
#include "graph/pass_test_util.h"
#include "graph/text_format.h"
#include "graph/verifier.h"

namespace kiln::testing {

// BERT's attention after canonicalisation:
// Add(Div(MatMul(q, k, trans_b), sqrt(D)), mask[B,1,1,S]) -> Softmax -> MatMul(., v).
inline constexpr char kBertAttention[] = R"(
graph @main {
  input %q : f16[2,4,16,32]
  input %k : f16[2,4,16,32]
  input %v : f16[2,4,16,32]
  input %mask : f16[2,1,1,16]
  const %scale : f16[] = [5.65625]
  %s = MatMul(%q, %k) {trans_b = 1} @scores
  %d = Div(%s, %scale) @div
  %a = Add(%d, %mask) @add
  %p = Softmax(%a) {axis = -1} @softmax
  %y = MatMul(%p, %v) @context
  output %y
}
)";

// `text` with the first occurrence of `from` replaced by `to` (a variant of a test
// graph); a failure when `from` is absent.
inline std::string ReplaceOnce(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// Parses and types `text` (no constant folding, so chains on constants survive).
inline std::unique_ptr<Graph> ParseTyped(const std::string& text) { return pass_test::MustParse(text); }

inline Tensor RandomTensor(DType dtype, const Shape& shape, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(NumElements(shape));
  for (float& v : values) v = dist(rng);
  return Tensor::FromFloat(dtype, shape, values);
}

// Replaces every float constant by uniform random data in [-1, 1] (text graphs
// write weights as splat(...); equal weights would hide column mix-ups).
inline void RandomizeConstants(Graph& graph, uint32_t seed) {
  std::mt19937 rng(seed);
  for (Value* c : graph.constants()) {
    if (IsFloating(c->dtype())) graph.SetConstant(c, RandomTensor(c->dtype(), c->shape(), rng));
  }
}

inline TensorMap RandomFeeds(const Graph& graph, uint32_t seed) {
  std::mt19937 rng(seed);
  TensorMap feeds;
  for (const Value* in : graph.inputs()) feeds[in->name()] = RandomTensor(in->dtype(), in->shape(), rng);
  return feeds;
}

// Both graphs evaluate to the same outputs (within `rtol` relative plus `atol`, in
// f32) on random feeds for a few seeds.
inline void ExpectSameResults(const Graph& original, const Graph& fused, float rtol = 1e-5f, float atol = 1e-6f) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    TensorMap feeds = RandomFeeds(original, seed);
    auto want = EvaluateGraph(original, feeds);
    auto got = EvaluateGraph(fused, feeds);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(want->size(), got->size());
    for (size_t i = 0; i < want->size(); ++i) {
      ASSERT_EQ((*want)[i].shape(), (*got)[i].shape()) << "output " << i;
      ASSERT_EQ((*want)[i].dtype(), (*got)[i].dtype()) << "output " << i;
      std::vector<float> w = (*want)[i].ToFloat(), g = (*got)[i].ToFloat();
      int bad = 0;
      for (size_t j = 0; j < w.size(); ++j) {
        if (std::fabs(w[j] - g[j]) > rtol * std::fabs(w[j]) + atol && ++bad <= 5) {
          ADD_FAILURE() << "output " << i << " element " << j << ": unfused " << w[j] << ", fused " << g[j];
        }
      }
      EXPECT_EQ(bad, 0) << "output " << i << " seed " << seed;
    }
  }
}

inline void ExpectValid(const Graph& graph) {
  absl::Status st = VerifyGraph(graph, {.require_types = true, .require_known_ops = true});
  EXPECT_TRUE(st.ok()) << st << "\n" << PrintGraph(graph);
}

inline std::vector<const Node*> Groups(const Graph& graph) {
  std::vector<const Node*> out;
  for (const Node* n : graph.nodes()) {
    if (IsFusedGroup(*n)) out.push_back(n);
  }
  return out;
}

inline std::vector<std::string> Members(const Node& group) {
  auto it = group.attributes().find("members");
  return it == group.attributes().end() ? std::vector<std::string>{} : it->second.strings();
}

// One line per node: "Op" or "FusedGroup pattern [member, ...] anchor=a", in order.
inline std::string Summary(const Graph& graph) {
  std::string out;
  for (const Node* n : graph.nodes()) {
    if (IsFusedGroup(*n)) {
      absl::StrAppend(&out, "FusedGroup ", n->GetString("pattern", "").value_or("?"), " [",
                      absl::StrJoin(Members(*n), ", "), "] anchor=", n->GetString("anchor", "").value_or("?"), "\n");
    } else {
      absl::StrAppend(&out, n->op_type(), " @", n->name(), "\n");
    }
  }
  return out;
}

// Runs `Pass` (reporting to `report`) on `text` with its constants randomised by
// `seed`, checks validity and numerics against the unfused graph, and returns the
// fused graph; `changed`, if given, receives what the pass returned.
template <typename Pass>
std::unique_ptr<Graph> RunFusionPass(const std::string& text, FusionReport* report, uint32_t seed,
                                     bool* changed = nullptr) {
  std::unique_ptr<Graph> g = ParseTyped(text);
  RandomizeConstants(*g, seed);
  std::unique_ptr<Graph> original = g->Clone();
  Pass pass(report);
  auto result = pass.Run(*g);
  EXPECT_TRUE(result.ok()) << result.status();
  if (changed != nullptr) *changed = result.value_or(false);
  ExpectValid(*g);
  ExpectSameResults(*original, *g);
  return g;
}

// `report` holds exactly one rejection, whose reason starts with `reason_prefix`.
inline void ExpectOneRejection(const FusionReport& report, absl::string_view reason_prefix) {
  ASSERT_EQ(report.rejections.size(), 1u) << report.ToString();
  EXPECT_TRUE(absl::StartsWith(report.rejections[0].reason, reason_prefix)) << report.rejections[0].reason;
}

// As above, and the rejected candidate's nodes are `nodes`.
inline void ExpectOneRejection(const FusionReport& report, const std::vector<std::string>& nodes,
                               absl::string_view reason_prefix) {
  ASSERT_EQ(report.rejections.size(), 1u) << report.ToString();
  EXPECT_EQ(report.rejections[0].nodes, nodes);
  EXPECT_TRUE(absl::StartsWith(report.rejections[0].reason, reason_prefix)) << report.rejections[0].reason;
}

}  // namespace kiln::testing
