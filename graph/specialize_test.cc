// Tests for graph/specialize.h's SizeOnlyNodes, on the position ids and mask that
// transformers' GPT-2 builds from the input's sizes, as the dynamo exporter writes
// them with dynamic batch and seq (cut from that export, two mask terms kept).
#include "graph/specialize.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "graph/infer_shapes.h"
#include "graph/pass_test_util.h"
#include "graph/text_format.h"

namespace kiln {
namespace {

constexpr char kGpt2Embedding[] = R"(
graph @main {
  dim batch in [1, 4]
  dim seq in [1, 8]
  input %input_ids : i64[4,8] dims "batch, seq"
  const %wte : f32[16,4] = splat(0.5)
  const %wpe : f32[8,4] = splat(0.25)
  const %zero : i64[] = [0]
  const %one : i64[] = [1]
  const %ax0 : i64[1] = [0]
  const %ax1 : i64[1] = [1]
  const %one1 : i64[1] = [1]
  const %m1 : i64[1] = [-1]
  %val_0 = Shape(%input_ids) {start = 0, end = 1}
  %val_1 = Shape(%input_ids) {start = 1, end = 2}
  %seq = Squeeze(%val_1)
  %embedding = Gather(%wte, %input_ids) {axis = 0} @embedding
  %arange = Range(%zero, %seq, %one) @arange
  %unsqueeze = Unsqueeze(%arange, %ax0) @unsqueeze
  %embedding_1 = Gather(%wpe, %unsqueeze) {axis = 0} @embedding_1
  %add = Add(%embedding, %embedding_1) @add
  %val_16 = Concat(%val_0, %one1) {axis = 0} @val_16
  %expand = Expand(%unsqueeze, %val_16) @expand
  %slice_1 = Slice(%expand, %ax0, %one1, %ax1, %one1) @slice_1
  %sub_13 = Sub(%slice_1, %one) @sub_13
  %cat = Concat(%sub_13, %expand) {axis = -1} @cat
  %slice_2 = Slice(%cat, %ax0, %val_1, %m1, %one1) @slice_2
  %end = Add(%val_1, %one1) @end
  %slice_3 = Slice(%cat, %one1, %end, %m1, %one1) @slice_3
  %sub_24 = Sub(%slice_3, %slice_2) @sub_24
  %eq = Equal(%sub_24, %one) @eq
  %ne = Not(%eq) @ne
  %cast = Cast(%ne) {to = 7} @cast
  %cumsum = CumSum(%cast, %ax1) @cumsum
  %q = Unsqueeze(%arange, %m1) @q
  %causal = LessOrEqual(%arange, %q) @causal
  output %add
  output %cumsum
  output %causal
}
)";

TEST(SizeOnlyNodesTest, Gpt2PositionIdsAndMaskDependOnTheSizesAlone) {
  // Typed as the importer leaves it: shape arithmetic folded into constants that keep
  // their expressions.
  auto parsed = ParseGraph(kGpt2Embedding);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  std::unique_ptr<Graph> g = *std::move(parsed);
  ASSERT_TRUE(InferShapes(*g).ok());
  const std::vector<Node*> nodes = g->nodes();
  const std::vector<bool> size_only = SizeOnlyNodes(*g);
  ASSERT_EQ(size_only.size(), nodes.size());
  std::map<std::string, bool> by_name;
  for (size_t i = 0; i < nodes.size(); ++i) by_name[nodes[i]->name()] = size_only[i];
  // The token embedding reads the input's data, and so does the sum.
  EXPECT_FALSE(by_name.at("embedding"));
  EXPECT_FALSE(by_name.at("add"));
  // The position embedding, ids and mask read only constants and the sizes.
  for (const char* name : {"arange", "unsqueeze", "embedding_1", "expand", "slice_1", "sub_13", "cat", "slice_2",
                           "slice_3", "sub_24", "eq", "ne", "cast", "cumsum", "q", "causal"}) {
    EXPECT_TRUE(by_name.at(name)) << name;
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
