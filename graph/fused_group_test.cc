// Tests for fused-group formation and the FusedGroup op's reference evaluation.
#include "graph/fused_group.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "absl/strings/str_split.h"
#include "graph/evaluate.h"
#include "graph/infer_shapes.h"
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

  // The text format round-trips a graph holding a group.
  const std::string text = PrintGraph(*g);
  auto reparsed = ParseGraph(text);
  ASSERT_TRUE(reparsed.ok()) << reparsed.status();
  EXPECT_EQ(PrintGraph(**reparsed), text);

  // Inlining the group back gives the original graph (up to a legal node order).
  ASSERT_TRUE(InlineFusedGroup(*g, *group).ok());
  auto sorted_lines = [](const Graph& graph) {
    std::vector<std::string> lines = absl::StrSplit(PrintGraph(graph), '\n');
    std::sort(lines.begin(), lines.end());
    return lines;
  };
  EXPECT_EQ(sorted_lines(*g), sorted_lines(*original));
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
