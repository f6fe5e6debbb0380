// Tests for fused-group formation and the FusedGroup op's reference evaluation.
#include "graph/fused_group.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "graph/evaluate.h"
#include "graph/infer_shapes.h"
#include "graph/specialize.h"
#include "graph/symbolic_shapes.h"
#include "graph/text_format.h"
#include "graph/verifier.h"

namespace kiln {
namespace {

constexpr char kMlp[] = R"(
graph @main {
  input %x : f32[2,3]
  const %w : f32[3,4] = [0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8, -0.9, 1.0, 1.1, 1.2]
  const %b : f32[4] = [0.5, -0.5, 0.25, 0.0]
  %m = MatMul(%x, %w)
  %a = Add(%m, %b)
  %y = Relu(%a)
  %z = Sigmoid(%m)
  output %y
  output %z
}
)";

std::unique_ptr<Graph> Parse(const char* text) {
  auto g = ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(InferShapes(**g, {.fold_constants = false}).ok());
  return std::move(*g);
}

Node* NodeWriting(const Graph& g, const std::string& value) { return g.FindValue(value)->producer(); }

// A body that does not parse or type-check is an error naming the group, at its line.
TEST(FusedGroupTest, TextWithABadBodyIsAnError) {
  struct Case {
    const char* body;
    const char* error;
  };
  for (const Case& c : {Case{"graph @b { input %x : f32[2] %y = Relu(", "its body does not parse"},
                        Case{"graph @b { input %x : f32[2] %y = MatMul(%x) output %y }",
                             "its body does not type-check"}}) {
    auto g = ParseGraph(absl::StrCat("graph @g {\n  input %x : f32[2]\n", "  %y : f32[2] = kiln::FusedGroup(%x) ",
                                     "{anchor = \"\", body = \"", c.body,
                                     "\", members = [\"r\"], pattern = \"pointwise\"} @grp\n  output %y\n}"));
    ASSERT_FALSE(g.ok()) << c.body;
    EXPECT_NE(g.status().message().find("3:"), std::string::npos) << g.status();
    EXPECT_NE(g.status().message().find(absl::StrCat("node 'grp' (FusedGroup): ", c.error)), std::string::npos)
        << g.status();
  }
}

// Inlining returns the members in body order; a small constant the body copied is
// read from outside again when asked and still there, else added once more.
TEST(FusedGroupTest, InliningReusesAnOuterConstantWhenAsked) {
  constexpr char kShared[] = R"(graph @g {
  input %x : f32[4]
  const %k : f32[] = [2.0]
  %a = Mul(%x, %k) @mul
  %b = Relu(%a) @relu
  %c = Add(%x, %k) @add
  output %b
  output %c
})";
  for (bool reuse : {true, false}) {
    std::unique_ptr<Graph> g = Parse(kShared);
    auto group = FormFusedGroup(*g, {NodeWriting(*g, "a"), NodeWriting(*g, "b")}, "pointwise", nullptr);
    ASSERT_TRUE(group.ok()) << group.status();
    EXPECT_EQ((*group)->num_inputs(), 1) << "the scalar is inlined into the body";
    auto nodes = InlineFusedGroupNodes(*g, *group, reuse);
    ASSERT_TRUE(nodes.ok()) << nodes.status();
    ASSERT_EQ(nodes->size(), 2u);
    EXPECT_EQ((*nodes)[0]->name(), "mul");
    EXPECT_EQ((*nodes)[1]->name(), "relu");
    EXPECT_EQ((*nodes)[0]->input(1) == g->FindValue("k"), reuse);
    EXPECT_EQ(g->constants().size(), reuse ? 1u : 2u);
  }
}

TEST(FusedGroupTest, FormsGroupThatEvaluatesLikeItsMembers) {
  std::unique_ptr<Graph> g = Parse(kMlp);
  std::unique_ptr<Graph> original = Parse(kMlp);
  Node* mm = NodeWriting(*g, "m");
  const std::string mm_name = mm->name();
  auto group = FormFusedGroup(*g, {mm, NodeWriting(*g, "a"), NodeWriting(*g, "y")}, "matmul+epilogue", mm);
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_TRUE(VerifyGraph(*g, {.require_types = true, .require_known_ops = true}).ok());
  EXPECT_EQ(g->num_nodes(), 2);  // the group and Sigmoid
  // Inputs: x, the weight and the bias (only single elements are inlined); outputs:
  // y, and m (Sigmoid reads it).
  EXPECT_EQ((*group)->num_inputs(), 3);
  ASSERT_EQ((*group)->num_outputs(), 2);
  EXPECT_EQ((*group)->output(0)->name(), "m");
  EXPECT_EQ((*group)->output(1)->name(), "y");
  EXPECT_EQ(*(*group)->GetString("pattern"), "matmul+epilogue");
  EXPECT_EQ(*(*group)->GetString("anchor"), mm_name);
  auto body = FusedGroupBody(**group);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ((*body)->num_nodes(), 3);

  TensorMap feeds{{"x", Tensor::FromFloat(DType::kFloat32, {2, 3}, {1, -2, 3, -4, 5, -6})}};
  auto fused = EvaluateGraph(*g, feeds);
  auto unfused = EvaluateGraph(*original, feeds);
  ASSERT_TRUE(fused.ok() && unfused.ok()) << fused.status() << unfused.status();
  for (int i = 0; i < 2; ++i) EXPECT_EQ((*fused)[i].ToFloat(), (*unfused)[i].ToFloat()) << i;

  // The body is a typed graph attribute (no text to parse), shared by copies of the
  // graph; the text format prints it as its text in a string literal and reads it back
  // as a graph.
  const Attribute& body_attr = (*group)->attributes().at("body");
  ASSERT_EQ(body_attr.kind(), AttrKind::kGraph);
  EXPECT_EQ(body_attr.g().get(), body->get());
  EXPECT_EQ((*body)->FindValue("m")->TypeString(), "f32[2,4]");
  EXPECT_EQ(g->Clone()->FindValue("y")->producer()->attributes().at("body").g().get(), body->get());
  const std::string text = PrintGraph(*g);
  EXPECT_NE(text.find("body = \"graph @main {"), std::string::npos) << text;
  auto reparsed = ParseGraph(text);
  ASSERT_TRUE(reparsed.ok()) << reparsed.status();
  EXPECT_EQ(PrintGraph(**reparsed), text);
  const Attribute& reread = (*reparsed)->FindValue("y")->producer()->attributes().at("body");
  ASSERT_EQ(reread.kind(), AttrKind::kGraph);
  EXPECT_EQ(PrintGraph(*reread.g()), PrintGraph(**body));

  // Inlining the group back gives the original graph (up to a legal node order).
  ASSERT_TRUE(InlineFusedGroup(*g, *group).ok());
  auto sorted_lines = [](const Graph& graph) {
    std::vector<std::string> lines = absl::StrSplit(PrintGraph(graph), '\n');
    std::sort(lines.begin(), lines.end());
    return lines;
  };
  EXPECT_EQ(sorted_lines(*g), sorted_lines(*original));
}

// A dynamic graph's group (issue 34): BERT's head split (a Reshape to a target folded
// from the sizes) and a scale by the sequence length, grouped. The body carries the
// graph's dim symbols, its values their dims and its inlined constants their
// expressions; the group's outputs get their dims from it; the text format keeps them;
// Specialize binds the body with the graph; inlining gives the dims back.
TEST(FusedGroupTest, GroupOfADynamicGraphKeepsItsDims) {
  constexpr char kText[] = R"(graph @main {
  dim batch in [1, 4]
  dim seq in [1, 64]
  input %x : f32[4,64,32] dims "batch, seq, 32"
  const %i0 : i64[] = [0]
  const %i1 : i64[] = [1]
  const %axes : i64[1] = [0]
  const %heads : i64[1] = [2]
  const %size : i64[1] = [16]
  %shape = Shape(%x)
  %b = Gather(%shape, %i0) {axis = 0}
  %s = Gather(%shape, %i1) {axis = 0}
  %bu = Unsqueeze(%b, %axes)
  %su = Unsqueeze(%s, %axes)
  %target = Concat(%bu, %su, %heads, %size) {axis = 0}
  %sf = Cast(%s) {to = 1}
  %r = Reshape(%x, %target)
  %y = Div(%r, %sf)
  output %y
})";
  auto parsed = ParseGraph(kText);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  Graph& g = **parsed;
  ASSERT_TRUE(InferShapes(g).ok());  // folds the shape arithmetic symbolically
  ASSERT_EQ(g.num_nodes(), 3) << PrintGraph(g);  // the Cast of seq stays
  auto group =
      FormFusedGroup(g, {NodeWriting(g, "sf"), NodeWriting(g, "r"), NodeWriting(g, "y")}, "pointwise", nullptr);
  ASSERT_TRUE(group.ok()) << group.status();
  auto body = FusedGroupBody(**group);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ((*body)->dim_symbols().size(), 2u);
  auto dims = [](const Graph& graph, const std::string& value) {
    return DimsToString(SymbolicShape(*graph.FindValue(value)), graph.dim_symbols());
  };
  EXPECT_EQ(dims(**body, "x"), "[batch, seq, 32]");
  EXPECT_EQ(dims(**body, "r"), "[batch, seq, 2, 16]");
  EXPECT_TRUE((*body)->FindValue("target")->has_symbolic_data());
  EXPECT_TRUE((*body)->FindValue("s")->has_symbolic_data());
  ASSERT_TRUE(InferShapes(g, {.fold_constants = false}).ok());
  EXPECT_EQ(dims(g, "y"), "[batch, seq, 2, 16]");
  EXPECT_TRUE(CheckSpecializations(g).ok());

  // The text format keeps the body's symbols, dims and expressions.
  const std::string text = PrintGraph(g);
  auto reparsed = ParseGraph(text);
  ASSERT_TRUE(reparsed.ok()) << reparsed.status();
  EXPECT_EQ(PrintGraph(**reparsed), text);
  EXPECT_EQ(dims(**reparsed, "y"), "[batch, seq, 2, 16]");

  // Bound to batch=2, seq=5, the group computes what the unfused graph does there.
  auto unfused = ParseGraph(kText);
  ASSERT_TRUE(unfused.ok() && InferShapes(**unfused).ok());
  std::vector<float> data(2 * 5 * 32);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 7) - 3.f;
  TensorMap feeds{{"x", Tensor::FromFloat(DType::kFloat32, {2, 5, 32}, data)}};
  for (const Graph* graph : {static_cast<const Graph*>(&g), static_cast<const Graph*>(unfused->get())}) {
    auto bound = Specialize(*graph, {2, 5});
    ASSERT_TRUE(bound.ok()) << bound.status();
    EXPECT_EQ((*bound)->FindValue("y")->TypeString(), "f32[2,5,2,16]");
    auto out = EvaluateGraph(**bound, feeds);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ((*out)[0].shape(), (Shape{2, 5, 2, 16}));
    EXPECT_FLOAT_EQ((*out)[0].ToFloat()[33], (static_cast<float>(33 % 7) - 3.f) / 5.f);
  }

  // Inlined again, the members' outputs and the copied constants keep their dims.
  ASSERT_TRUE(InlineFusedGroup(g, *group).ok());
  EXPECT_EQ(dims(g, "r"), "[batch, seq, 2, 16]");
  EXPECT_TRUE(CheckSpecializations(g).ok());
}

TEST(FusedGroupTest, RefusesNonConvexSets) {
  // m -> z (Sigmoid, outside) -> q reads z and a: {m, a, q} leaves through z and returns.
  std::unique_ptr<Graph> g = Parse(R"(
graph @main {
  input %x : f32[2,3]
  const %w : f32[3,4] = splat(0.5)
  %m = MatMul(%x, %w)
  %a = Relu(%m)
  %z = Sigmoid(%m)
  %q = Add(%a, %z)
  output %q
}
)");
  const std::string before = PrintGraph(*g);
  auto group = FormFusedGroup(*g, {NodeWriting(*g, "m"), NodeWriting(*g, "a"), NodeWriting(*g, "q")}, "x", nullptr);
  EXPECT_EQ(group.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(PrintGraph(*g), before);  // unchanged
  EXPECT_FALSE(FormFusedGroup(*g, {}, "x", nullptr).ok());
}

}  // namespace
}  // namespace kiln
