// Tests for the graph verifier: one broken graph per check, with its message.
#include "graph/verifier.h"

#include <gtest/gtest.h>

#include "graph/infer_shapes.h"
#include "graph/text_format.h"

namespace kiln {
namespace {

std::unique_ptr<Graph> Parse(absl::string_view text) {
  auto g = ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? std::move(*g) : std::make_unique<Graph>();
}

std::string Problems(const Graph& g, const VerifyOptions& options = {}) {
  absl::Status s = VerifyGraph(g, options);
  EXPECT_FALSE(s.ok()) << PrintGraph(g);
  if (s.ok()) return "";
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  return std::string(s.message());
}

constexpr VerifyOptions kStrict = {.require_types = true, .require_known_ops = true};

TEST(VerifierTest, AcceptsWellFormedGraphs) {
  auto g = Parse(R"(graph {
    input %x : f32[2,4]
    const %bias : f32[4] = splat(1.0)
    %h = Add(%x, %bias)
    %y = Relu(%h)
    output %y, %x, %bias
  })");
  EXPECT_TRUE(VerifyGraph(*g).ok()) << VerifyGraph(*g);
  // Untyped outputs and unknown ops are fine until asked for.
  EXPECT_FALSE(VerifyGraph(*g, kStrict).ok());
  ASSERT_TRUE(InferShapes(*g).ok());
  EXPECT_TRUE(VerifyGraph(*g, kStrict).ok()) << VerifyGraph(*g, kStrict);
  EXPECT_TRUE(VerifyGraph(*Parse("graph { %y = Frobnicate() }")).ok());
}

TEST(VerifierTest, InputFromLaterNode) {
  auto g = Parse(R"(graph {
    input %x : f32[2]
    %b = Relu(%a) @second
    %a = Relu(%x) @first
    output %b
  })");
  EXPECT_EQ(Problems(*g),
            "node 'second' (Relu): input 0 value 'a' is produced by later node 'first' (Relu) "
            "(nodes are not in topological order)");
  ASSERT_TRUE(g->TopologicalSort().ok());
  EXPECT_TRUE(VerifyGraph(*g).ok());
}

TEST(VerifierTest, InputFromOwnOutput) {
  auto g = Parse("graph { %x = Relu(%x) @loop }");
  EXPECT_EQ(Problems(*g), "node 'loop' (Relu): input 0 value 'x' is the node's own output");
}

TEST(VerifierTest, InputDefinedNowhere) {
  Graph g;
  Value* ghost = g.AddValue("ghost");
  Value* y = g.AddValue("y");
  g.AddNode("Relu", {ghost}, {y}, "r");
  g.AddOutput(y);
  EXPECT_EQ(Problems(g), "node 'r' (Relu): input 0 value 'ghost' is not a graph input, a constant, or produced by a node");
}

TEST(VerifierTest, ValueProducedTwice) {
  Graph g;
  Value* x = g.AddValue("x");
  g.AddInput(x);
  Value* y = g.AddValue("y");
  Node* first = g.AddNode("Relu", {x}, {y}, "a");
  g.AddNode("Relu", {x}, {y}, "b");
  g.AddOutput(y);
  EXPECT_EQ(Problems(g), "value 'y' is produced twice: by node 'a' (Relu) and by node 'b' (Relu)");

  // Removing the second producer leaves the first one's output without a producer.
  g.RemoveNode(g.nodes()[1]);
  EXPECT_EQ(first->output(0), y);
  EXPECT_EQ(Problems(g), "node 'a' (Relu): output 0 value 'y' records no producer");
}

TEST(VerifierTest, ConstantWithProducer) {
  Graph g;
  Value* x = g.AddValue("x");
  g.AddInput(x);
  Value* c = g.AddConstant("c", Tensor(DType::kFloat32, {2}));
  g.AddNode("Relu", {x}, {c}, "n");
  EXPECT_EQ(Problems(g), "constant value 'c' is produced by node 'n' (Relu)");
}

TEST(VerifierTest, ConstantTypeDisagreesWithData) {
  Graph g;
  Value* c = g.AddConstant("c", Tensor(DType::kFloat32, {2}));
  c->SetType(DType::kFloat16, {3});
  g.AddOutput(c);
  EXPECT_EQ(Problems(g), "constant value 'c' has type f16[3] but its data is f32[2]");
}

TEST(VerifierTest, BadGraphInputs) {
  Graph g;
  Value* x = g.AddValue("x");
  g.AddInput(x);
  g.AddInput(x);
  Value* w = g.AddConstant("w", Tensor(DType::kFloat32, {2}));
  g.AddInput(w);
  Value* p = g.AddValue("p");
  g.AddInput(p);
  g.AddNode("Relu", {x}, {p}, "n");
  EXPECT_EQ(Problems(g),
            "graph input value 'x' is listed twice\n"
            "graph input value 'w' is a constant\n"
            "graph input value 'p' is produced by node 'n' (Relu)");
}

TEST(VerifierTest, GraphOutputNotProduced) {
  Graph g;
  g.AddOutput(g.AddValue("dangling"));
  EXPECT_EQ(Problems(g), "graph output value 'dangling' is not produced by a node, a graph input or a constant");
}

TEST(VerifierTest, ValuesFromAnotherGraphAndForeignUses) {
  Graph g1;
  Value* x = g1.AddValue("x");
  g1.AddInput(x);
  Graph g2;
  g2.set_name("other");
  Value* y = g2.AddValue("y");
  g2.AddNode("Relu", {x}, {y}, "n");  // reads a value of g1
  g2.AddOutput(y);
  EXPECT_EQ(Problems(g2), "node 'n' (Relu): input 0 value 'x' does not belong to graph 'other'");
  EXPECT_EQ(Problems(g1), "value 'x' lists a use (as input 0) by a node that is not in graph 'main'");
}

TEST(VerifierTest, RequireTypes) {
  auto g = Parse(R"(graph {
    input %x
    %y = Relu(%x) @r
    output %y
  })");
  EXPECT_TRUE(VerifyGraph(*g).ok());
  EXPECT_EQ(Problems(*g, {.require_types = true}),
            "graph input value 'x' has no type\n"
            "node 'r' (Relu): output 0 value 'y' has no type");
}

TEST(VerifierTest, ArityAgainstOpDef) {
  auto g = Parse(R"(graph {
    input %x : f32[2]
    %a : f32[2] = Relu(%x, %x) @two_inputs
    %b : f32[2] = Add(%x, _) @missing
    %c : f32[2], %d : f32[2] = Relu(%x) @two_outputs
    output %a, %b, %c
  })");
  EXPECT_TRUE(VerifyGraph(*g).ok());
  EXPECT_EQ(Problems(*g, {.require_types = true}),
            "node 'two_inputs' (Relu): has 2 inputs, but Relu takes 1\n"
            "node 'missing' (Add): required input 1 is absent\n"
            "node 'two_outputs' (Relu): has 2 outputs, but Relu produces 1");
}

TEST(VerifierTest, RequireKnownOps) {
  auto g = Parse(R"(graph {
    input %x : f32[2]
    %y : f32[2] = Frobnicate(%x) @f
    output %y
  })");
  EXPECT_TRUE(VerifyGraph(*g, {.require_types = true}).ok());
  EXPECT_EQ(Problems(*g, {.require_known_ops = true}), "node 'f' (Frobnicate): op 'Frobnicate' is not registered");
}

}  // namespace
}  // namespace kiln
