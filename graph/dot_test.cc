// Tests for the Graphviz DOT export: structure, styling and escaping.
#include "graph/dot.h"

#include <gtest/gtest.h>

#include "graph/text_format.h"

namespace kiln {
namespace {

bool Has(const std::string& text, const std::string& piece) { return text.find(piece) != std::string::npos; }

TEST(DotTest, DrawsNodesEdgesAndConstants) {
  std::vector<float> weights(32, 0.f);
  weights[1] = 1.f;
  Graph g;
  g.set_name("net \"v2\"");
  Value* x = g.AddValue("x");
  x->SetType(DType::kFloat32, {2, 32});
  g.AddInput(x);
  Value* w = g.AddConstant("w", Tensor::FromFloat(DType::kFloat32, {32}, weights));
  Value* b = g.AddConstant("b", Tensor::FromFloat(DType::kFloat32, {2}, {1.f, 2.f}));
  Value* m = g.AddValue("m");
  m->SetType(DType::kFloat32, {2, 32});
  g.AddNode("Mul", {x, w}, {m}, "scale \"by\" w\\");
  Value* y = g.AddValue("y");
  Node* add = g.AddNode("Add", {m, b}, {y}, "add");
  add->set_domain("com.example");
  g.AddOutput(y);

  const std::string dot = ExportDot(g);
  EXPECT_TRUE(Has(dot, "digraph \"net \\\"v2\\\"\" {\n")) << dot;
  // Input, small constant (with its data) and output styled apart.
  EXPECT_TRUE(Has(dot, "  in0 [label=\"x\\nf32[2,32]\", shape=invhouse")) << dot;
  EXPECT_TRUE(Has(dot, "  c0 [label=\"b\\nf32[2]\\n[1.0, 2.0]\", shape=note")) << dot;
  EXPECT_TRUE(Has(dot, "  out0 [label=\"y\\n?\", shape=house")) << dot;
  // The large constant is folded into its consumer's label, with escaped quotes and
  // backslashes in the node name.
  EXPECT_TRUE(Has(dot, "  n0 [label=\"Mul\\nscale \\\"by\\\" w\\\\\\nw: f32[32]\"];\n")) << dot;
  EXPECT_TRUE(Has(dot, "  n1 [label=\"com.example::Add\\nadd\"];\n")) << dot;
  EXPECT_FALSE(Has(dot, "label=\"w\\n")) << dot;
  // Edges, labelled with types; constant edges dashed.
  EXPECT_TRUE(Has(dot, "  in0 -> n0 [label=\"f32[2,32]\", tooltip=\"x\"];\n")) << dot;
  EXPECT_TRUE(Has(dot, "  n0 -> n1 [label=\"f32[2,32]\", tooltip=\"m\"];\n")) << dot;
  EXPECT_TRUE(Has(dot, "  c0 -> n1 [label=\"f32[2]\", tooltip=\"b\", style=dashed];\n")) << dot;
  EXPECT_TRUE(Has(dot, "  n1 -> out0 [label=\"?\", tooltip=\"y\"];\n")) << dot;
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
  int edges = 0;
  for (size_t p = dot.find(" -> "); p != std::string::npos; p = dot.find(" -> ", p + 1)) ++edges;
  EXPECT_EQ(edges, 4);
}

TEST(DotTest, MarksUndefinedValuesAndConstantOutputs) {
  auto g = ParseGraph(R"(graph {
    input %x : f32[2]
    const %big : f32[20] = splat(0.0)
    %y = Relu(%x)
    output %y, %big, %x
  })");
  ASSERT_TRUE(g.ok()) << g.status();
  Graph& graph = **g;
  graph.nodes()[0]->SetInput(0, graph.AddValue("ghost"));
  const std::string dot = ExportDot(graph);
  EXPECT_TRUE(Has(dot, "  u0 [label=\"ghost\\n(undefined)\"")) << dot;
  EXPECT_TRUE(Has(dot, "  u0 -> n0 [label=\"?\", tooltip=\"ghost\"];\n")) << dot;
  EXPECT_TRUE(Has(dot, "  c0 [label=\"big\\nf32[20]\", shape=note")) << dot;
  EXPECT_TRUE(Has(dot, "  c0 -> out1 [label=\"f32[20]\", tooltip=\"big\", style=dashed];\n")) << dot;
  EXPECT_TRUE(Has(dot, "  in0 -> out2 [label=\"f32[2]\", tooltip=\"x\"];\n")) << dot;
}

}  // namespace
}  // namespace kiln
