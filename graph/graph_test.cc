// Tests for the graph IR core: def-use bookkeeping, ordering, attributes, evaluation.
#include "graph/graph.h"

#include <gtest/gtest.h>

#include "graph/evaluate.h"
#include "graph/infer_shapes.h"

namespace kiln {
namespace {

TEST(GraphTest, AddNodeTracksUsesAndProducers) {
  Graph g;
  Value* x = g.AddValue("x");
  x->SetType(DType::kFloat32, {2, 3});
  g.AddInput(x);
  Value* y = g.AddValue("y");
  Node* relu = g.AddNode("Relu", {x}, {y});
  g.AddOutput(y);
  ASSERT_EQ(x->uses().size(), 1u);
  EXPECT_EQ(x->uses()[0].node, relu);
  EXPECT_EQ(y->producer(), relu);
  EXPECT_EQ(relu->name(), "Relu_0");
  // Names are made unique.
  EXPECT_EQ(g.AddValue("x")->name(), "x_1");
}

TEST(GraphTest, TopologicalSortReordersAndDetectsCycles) {
  Graph g;
  Value* x = g.AddValue("x");
  x->SetType(DType::kFloat32, {4});
  g.AddInput(x);
  Value* a = g.AddValue("a");
  Value* b = g.AddValue("b");
  g.AddNode("Relu", {a}, {b}, "second");
  g.AddNode("Relu", {x}, {a}, "first");
  g.AddOutput(b);
  ASSERT_TRUE(g.TopologicalSort().ok());
  EXPECT_EQ(g.nodes()[0]->name(), "first");

  Graph cyc;
  Value* p = cyc.AddValue("p");
  Value* q = cyc.AddValue("q");
  cyc.AddNode("Relu", {p}, {q}, "n1");
  cyc.AddNode("Relu", {q}, {p}, "n2");
  absl::Status s = cyc.TopologicalSort();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cycle"), std::string::npos);
  EXPECT_NE(s.message().find("n1"), std::string::npos);
}

// A pass's rewrites: typed new values, then FinishRewrites sorts the nodes and drops
// the values nothing refers to any more; a cycle is its error.
TEST(GraphTest, FinishRewritesSortsAndDropsUnusedValues) {
  Graph g;
  Value* x = g.AddValue("x", DType::kFloat16, {2, 3});
  EXPECT_EQ(x->dtype(), DType::kFloat16);
  EXPECT_EQ(x->shape(), (Shape{2, 3}));
  g.AddInput(x);
  Value* a = g.AddValue("a", DType::kFloat16, {2, 3});
  Value* b = g.AddValue("b", DType::kFloat16, {2, 3});
  g.AddValue("orphan", DType::kFloat16, {1});
  g.AddNode("Relu", {a}, {b}, "second");
  g.AddNode("Relu", {x}, {a}, "first");
  g.AddOutput(b);
  ASSERT_TRUE(g.FinishRewrites().ok());
  EXPECT_EQ(g.nodes()[0]->name(), "first");
  EXPECT_EQ(g.values().size(), 3u);  // x, a, b

  Graph cyc;
  Value* p = cyc.AddValue("p");
  Value* q = cyc.AddValue("q");
  cyc.AddNode("Relu", {p}, {q}, "n1");
  cyc.AddNode("Relu", {q}, {p}, "n2");
  EXPECT_NE(cyc.FinishRewrites().message().find("cycle"), std::string::npos);
}

TEST(GraphTest, AttributeTypeMismatchIsAnError) {
  Graph g;
  Value* x = g.AddValue("x");
  Node* n = g.AddNode("Conv", {x}, {g.AddValue("y")}, "conv1");
  n->SetAttr("strides", 2.0f);
  auto r = n->GetInts("strides", {1, 1});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "node 'conv1' (Conv): attribute 'strides' must be of type ints, got float");
  EXPECT_EQ(*n->GetInt("group", 1), 1);
}

TEST(GraphTest, InferAndEvaluateSmallGraph) {
  Graph g;
  Value* x = g.AddValue("x");
  x->SetType(DType::kFloat32, {2, 2});
  g.AddInput(x);
  Value* bias = g.AddConstant("bias", Tensor::FromFloat(DType::kFloat32, {2}, {1.f, -10.f}));
  Value* s = g.AddValue("s");
  Value* y = g.AddValue("y");
  g.AddNode("Add", {x, bias}, {s});
  g.AddNode("Relu", {s}, {y});
  g.AddOutput(y);
  ASSERT_TRUE(InferShapes(g).ok());
  EXPECT_EQ(y->TypeString(), "f32[2,2]");
  TensorMap feeds;
  feeds["x"] = Tensor::FromFloat(DType::kFloat32, {2, 2}, {1.f, 2.f, 3.f, 4.f});
  auto out = EvaluateGraph(g, feeds);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].ToFloat(), (std::vector<float>{2.f, 0.f, 4.f, 0.f}));

  feeds["x"] = Tensor::FromFloat(DType::kFloat32, {4}, {1.f, 2.f, 3.f, 4.f});
  auto bad = EvaluateGraph(g, feeds);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "input 'x' is f32[4], expected f32[2,2]");
}

TEST(GraphTest, ConstantSubgraphsFold) {
  Graph g;
  Value* shape = g.AddConstant("shape", Tensor::FromInt64(DType::kInt64, {2}, {3, -1}));
  Value* two = g.AddConstant("two", Tensor::FromInt64(DType::kInt64, {}, {2}));
  Value* doubled = g.AddValue("doubled");
  g.AddNode("Add", {shape, two}, {doubled});  // {5, 1}: folded to a constant
  Value* x = g.AddValue("x");
  x->SetType(DType::kFloat32, {5});
  g.AddInput(x);
  Value* y = g.AddValue("y");
  g.AddNode("Reshape", {x, doubled}, {y});
  g.AddOutput(y);
  ASSERT_TRUE(InferShapes(g).ok());
  EXPECT_EQ(g.num_nodes(), 1);
  ASSERT_TRUE(doubled->is_constant());
  EXPECT_EQ(y->TypeString(), "f32[5,1]");
}

}  // namespace
}  // namespace kiln
