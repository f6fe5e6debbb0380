// Tests for runtime/size_only_steps.h on GPT-2's position ids and packed-sequence mask
// compiled for ranges (graph/gpt2_mask_test_graph.h): which steps a run replaces
// by copies, and their outputs at one run's sizes.
#include "runtime/size_only_steps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "compiler/compiler.h"
#include "graph/fused_group.h"
#include "graph/gpt2_mask_test_graph.h"
#include "graph/specialize.h"
#include "graph/text_format.h"
#include "runtime/compiled_bundle_test_util.h"
#include "runtime/cpu_executor.h"

namespace kiln {
namespace {

// `text` compiled for sm_90a and loaded (test::CompileAndLoad).
std::shared_ptr<const CpuProgram> CompileAndLoad(const std::string& text, const std::string& name,
                                                 std::unique_ptr<Bundle>* bundle) {
  auto graph = ParseGraph(text);
  EXPECT_TRUE(graph.ok()) << graph.status();
  return graph.ok() ? test::CompileAndLoad(**graph, "sm_90a", name, bundle) : nullptr;
}

TEST(SizeOnlyStepsTest, Gpt2MaskIsCopiedInAndCausalAtTheRunSizes) {
  std::unique_ptr<Bundle> bundle;
  std::shared_ptr<const CpuProgram> program = CompileAndLoad(test::Gpt2Mask(), "size_only_mask", &bundle);
  ASSERT_NE(program, nullptr);
  const Graph& g = program->graph();
  const bundle::Manifest& m = bundle->manifest();

  const SizeOnlySteps steps = FindSizeOnlySteps(g, m);
  ASSERT_TRUE(steps.any());
  const std::vector<Node*> nodes = g.nodes();
  int size_only = 0, copied = 0;
  for (size_t s = 0; s < nodes.size(); ++s) {
    size_only += steps.size_only[s];
    // Only size-only steps are copied in, and only outputs read by a step that runs
    // on the device (or through a view of them); views are never copied.
    if (steps.copies[s].empty()) continue;
    ASSERT_TRUE(steps.size_only[s]);
    EXPECT_NE(m.steps(static_cast<int>(s)).kernel(), "view");
    for (int o : steps.copies[s]) {
      ++copied;
      const Value* v = nodes[s]->output(o);
      bool read = false;
      std::vector<const Value*> frontier = {v};
      while (!frontier.empty() && !read) {
        const Value* at = frontier.back();
        frontier.pop_back();
        for (const Use& use : at->uses()) {
          const size_t u = std::find(nodes.begin(), nodes.end(), use.node) - nodes.begin();
          if (!steps.size_only[u]) read = true;
          if (m.steps(static_cast<int>(u)).kernel() == "view") frontier.push_back(use.node->output(0));
        }
      }
      EXPECT_TRUE(read) << v->name();
    }
  }
  // The token embedding and the scores read data; everything else of the ids and the
  // mask follows from the sizes, and a few values reach the rest.
  EXPECT_GT(size_only, 10);
  EXPECT_GE(copied, 2);
  EXPECT_LE(copied, 4);

  // At batch 2, seq 5: every output has the specialised value's shape, and the mask
  // the scores are added to is causal (position ids are one packed sequence).
  auto special = Specialize(g, {2, 5});
  ASSERT_TRUE(special.ok()) << special.status();
  auto outputs = ComputeSizeOnlyOutputs(steps, **special, "test");
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(static_cast<int>(outputs->size()), copied);
  const std::vector<Node*> special_nodes = (*special)->nodes();
  bool saw_mask = false;
  for (const SizeOnlyOutput& out : *outputs) {
    EXPECT_EQ(out.tensor.shape(), special_nodes[out.step]->output(out.output)->shape());
    if (out.tensor.shape() != Shape{2, 1, 5, 5}) continue;
    saw_mask = true;
    const std::vector<float> v = out.tensor.ToFloat();
    for (int b = 0; b < 2; ++b) {
      for (int i = 0; i < 5; ++i) {
        for (int j = 0; j < 5; ++j) {
          const float x = v[(b * 5 + i) * 5 + j];
          const bool allowed = out.tensor.dtype() == DType::kBool ? x != 0 : std::isfinite(x);
          EXPECT_EQ(allowed, j <= i) << "batch " << b << " query " << i << " key " << j;
        }
      }
    }
  }
  EXPECT_TRUE(saw_mask);
}

// The same mask added to an attention's scores: the attention kernel computes it
// (fusion/mark_causal_masks.h), so no run copies it in; the position ids the embedding
// reads still are.
TEST(SizeOnlyStepsTest, AComputedCausalMaskIsNotCopied) {
  std::unique_ptr<Bundle> bundle;
  std::shared_ptr<const CpuProgram> program =
      CompileAndLoad(test::Gpt2MaskedAttention(), "size_only_attention", &bundle);
  ASSERT_NE(program, nullptr);
  const Graph& g = program->graph();
  const SizeOnlySteps steps = FindSizeOnlySteps(g, bundle->manifest());
  ASSERT_TRUE(steps.any());
  const std::vector<Node*> nodes = g.nodes();
  int copied = 0, marked = 0;
  for (size_t s = 0; s < nodes.size(); ++s) {
    marked += IsFusedGroup(*nodes[s]) && nodes[s]->has_attr("causal_inputs");
    for (int o : steps.copies[s]) {
      ++copied;
      EXPECT_NE(nodes[s]->output(o)->rank(), 4) << "the [batch, 1, seq, seq] mask is copied: "
                                                << nodes[s]->output(o)->name();
    }
  }
  EXPECT_EQ(marked, 1);
  EXPECT_GE(copied, 1) << "the position ids";
}

}  // namespace
}  // namespace kiln
