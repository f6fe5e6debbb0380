// Tests for MarkCausalMasks: GPT-2's packed-sequence mask as the dynamo exporter
// writes it for dynamic batch and seq (graph/gpt2_mask_test_graph.h) added to an
// attention's scores is marked causal; a sliding window shorter than the longest
// sequence, a mask read from an input and a static graph's group are not marked.
#include "fusion/mark_causal_masks.h"

#include <gtest/gtest.h>

#include "fusion/fuse_attention.h"
#include "fusion/fusion_test_util.h"
#include "graph/fused_group.h"
#include "graph/gpt2_mask_test_graph.h"
#include "graph/infer_shapes.h"
#include "graph/text_format.h"

namespace kiln {
namespace {

using ::kiln::testing::Groups;
using ::kiln::testing::ReplaceOnce;

// Parsed and typed as the importer leaves a dynamic export: shape arithmetic folded
// into constants that keep their expressions.
std::unique_ptr<Graph> ParseTyped(const std::string& text) {
  auto g = ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return std::make_unique<Graph>();
  absl::Status typed = InferShapes(**g);
  EXPECT_TRUE(typed.ok()) << typed;
  return *std::move(g);
}

std::string Gpt2Attention() { return test::Gpt2MaskedAttention(); }

// Fuses the attention of `text` (one group), then runs the pass; the group.
const Node* FuseAndMark(Graph& g, bool* marked) {
  auto fused = FuseAttention().Run(g);
  EXPECT_TRUE(fused.ok() && *fused) << fused.status();
  auto run = MarkCausalMasks().Run(g);
  EXPECT_TRUE(run.ok()) << run.status();
  *marked = run.value_or(false);
  const std::vector<const Node*> groups = Groups(g);
  EXPECT_EQ(groups.size(), 1u);
  return groups.empty() ? nullptr : groups[0];
}

int InputIndex(const Node& group, const std::string& name) {
  for (int i = 0; i < group.num_inputs(); ++i) {
    if (group.input(i) != nullptr && group.input(i)->name() == name) return i;
  }
  return -1;
}

TEST(MarkCausalMasksTest, Gpt2PackedSequenceMaskIsCausal) {
  std::unique_ptr<Graph> g = ParseTyped(Gpt2Attention());
  bool marked = false;
  const Node* group = FuseAndMark(*g, &marked);
  ASSERT_NE(group, nullptr);
  EXPECT_TRUE(marked);
  const int mask = InputIndex(*group, "mask");
  ASSERT_GE(mask, 0);
  EXPECT_EQ(group->GetInts("causal_inputs").value_or(std::vector<int64_t>{}), std::vector<int64_t>{mask});
  const std::vector<float> fills = group->GetFloats("causal_fills").value_or(std::vector<float>{});
  ASSERT_EQ(fills.size(), 1u);
  EXPECT_EQ(fills[0], -std::numeric_limits<float>::infinity());
  // Marked once: a second run changes nothing.
  auto again = MarkCausalMasks().Run(*g);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
}

// The mask with a sliding window of `window` keys (Mistral's form).
std::string SlidingWindow(int window) {
  return ReplaceOnce(Gpt2Attention(), "  %allowed = And(%causal, %same)\n",
                     absl::StrCat("  const %window : i64[] = [", window,
                                  "]\n"
                                  "  %back = Sub(%q4, %k4)\n"
                                  "  %near = Less(%back, %window)\n"
                                  "  %packed = And(%causal, %same)\n"
                                  "  %allowed = And(%packed, %near)\n"));
}

// A window of 8 keys: causal up to 8 tokens, banded beyond; the longest sequence (24)
// shows it. A window longer than every sequence leaves the mask causal.
TEST(MarkCausalMasksTest, SlidingWindowMustNotMark) {
  std::unique_ptr<Graph> g = ParseTyped(SlidingWindow(8));
  bool marked = true;
  const Node* group = FuseAndMark(*g, &marked);
  ASSERT_NE(group, nullptr);
  EXPECT_FALSE(marked);
  EXPECT_FALSE(group->has_attr("causal_inputs"));

  g = ParseTyped(SlidingWindow(64));
  FuseAndMark(*g, &marked);
  EXPECT_TRUE(marked);
}

// The same attention with the mask an input (its data, not the sizes, decide it).
TEST(MarkCausalMasksTest, MaskFromAnInputMustNotMark) {
  std::string text = ReplaceOnce(Gpt2Attention(), "  %mask = Where(%allowed, %fzero, %ninf)\n", "");
  text = ReplaceOnce(text, "  input %q :", "  input %mask : f16[4,1,24,24] dims \"batch, 1, seq, seq\"\n  input %q :");
  std::unique_ptr<Graph> g = ParseTyped(text);
  bool marked = true;
  FuseAndMark(*g, &marked);
  EXPECT_FALSE(marked);
}

// A sequence range whose longest mask (5000 x 5000) is past what the pass evaluates on
// the host: not marked, and nothing evaluated.
TEST(MarkCausalMasksTest, MasksTooLargeToSampleAreNotMarked) {
  std::string text = Gpt2Attention();
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"dim seq in [1, 24]", "dim seq in [1, 5000]"},
           {"f32[24,16]", "f32[5000,16]"},
           {"i64[4,24]", "i64[4,5000]"}}) {
    text = ReplaceOnce(text, from, to);
  }
  for (int i = 0; i < 3; ++i) text = ReplaceOnce(text, "f16[4,2,24,16] dims", "f16[4,2,5000,16] dims");
  std::unique_ptr<Graph> g = ParseTyped(text);
  bool marked = true;
  FuseAndMark(*g, &marked);
  EXPECT_FALSE(marked);
}

// Static graphs keep their masks as constants (codegen computes those): nothing to do.
TEST(MarkCausalMasksTest, StaticGraphIsLeftAlone) {
  std::unique_ptr<Graph> g = ParseTyped(::kiln::testing::kBertAttention);
  bool marked = true;
  FuseAndMark(*g, &marked);
  EXPECT_FALSE(marked);
}

}  // namespace
}  // namespace kiln
