// Tests for graph/specialize.h's SizeOnlyNodes, on the position ids and mask that
// transformers' GPT-2 builds from the input's sizes (graph/gpt2_mask_test_graph.h).
#include "graph/specialize.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "graph/gpt2_mask_test_graph.h"
#include "graph/infer_shapes.h"
#include "graph/pass_test_util.h"
#include "graph/text_format.h"

namespace kiln {
namespace {

TEST(SizeOnlyNodesTest, Gpt2PositionIdsAndMaskDependOnTheSizesAlone) {
  // Typed as the importer leaves it: shape arithmetic folded into constants that keep
  // their expressions.
  auto parsed = ParseGraph(test::Gpt2Mask());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  std::unique_ptr<Graph> g = *std::move(parsed);
  ASSERT_TRUE(InferShapes(*g).ok());
  const std::vector<Node*> nodes = g->nodes();
  const std::vector<bool> size_only = SizeOnlyNodes(*g);
  ASSERT_EQ(size_only.size(), nodes.size());
  std::map<std::string, bool> by_output;
  for (size_t i = 0; i < nodes.size(); ++i) by_output[nodes[i]->output(0)->name()] = size_only[i];
  // The token embedding reads the input's data, and so do the sums with it.
  for (const char* name : {"embedding", "add", "masked"}) EXPECT_FALSE(by_output.at(name)) << name;
  // The position embedding, ids and mask read only constants and the sizes.
  for (const char* name : {"arange", "unsqueeze", "embedding_1", "expand", "slice_1", "sub_13", "cat", "slice_2",
                           "slice_3", "sub_24", "eq", "ne", "cast", "cumsum", "causal", "seq_q", "seq_k", "allowed",
                           "mask"}) {
    EXPECT_TRUE(by_output.at(name)) << name;
  }
}

TEST(SizeOnlyNodesTest, NoneInAStaticGraph) {
  // Unfolded, so that the Range is still a node.
  std::unique_ptr<Graph> g = pass_test::MustParse(R"(
graph @main {
  input %x : f32[2,3]
  const %zero : f32[] = [0]
  const %n : i64[] = [3]
  const %one : i64[] = [1]
  const %izero : i64[] = [0]
  %r = Range(%izero, %n, %one)
  %a = Add(%x, %zero)
  output %a
  output %r
}
)");
  for (bool b : SizeOnlyNodes(*g)) EXPECT_FALSE(b);
}

}  // namespace
}  // namespace kiln
