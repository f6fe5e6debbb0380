// Tests for the expansion of ONNX function ops (frontend/expand_functions.h) through
// the importer: plain and context-dependent bodies, attribute references with and
// without the call's value, a body older than the model's opset, ops kiln defines
// itself (not expanded) and a body holding an op kiln lacks.
#include "frontend/expand_functions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "frontend/legacy_ops.h"
#include "frontend/onnx_importer.h"
#include "frontend/onnx_test_util.h"
#include "graph/evaluate.h"

namespace kiln {
namespace {

using namespace onnx_test;  // NOLINT: model builders
using ::testing::HasSubstr;

void AddStringAttr(onnx::NodeProto* n, const std::string& name, const std::string& value) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(value);
}

std::vector<float> Evaluate(const Graph& g, const TensorMap& feeds) {
  absl::StatusOr<std::vector<Tensor>> out = EvaluateGraph(g, feeds);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0].ToFloat() : std::vector<float>();
}

bool HasOp(const Graph& g, const std::string& op) {
  for (const Node* n : g.nodes()) {
    if (n->op_type() == op) return true;
  }
  return false;
}

TEST(ExpandFunctionsTest, CeluBecomesItsBodyWithTheCallsAlpha) {
  onnx::ModelProto m = NewModel(13);
  AddInput(m, "x", {4});
  AddOutput(m, "y", {4});
  AddFloatAttr(AddNode(m, "Celu", {"x"}, {"y"}, "celu"), "alpha", 2.f);
  auto g = ImportOnnxModel(m, ".");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(HasOp(**g, "Celu"));
  const std::vector<float> x = {-3.f, -0.5f, 0.f, 1.5f};
  const std::vector<float> y = Evaluate(**g, {{"x", Tensor::FromFloat(DType::kFloat32, {4}, x)}});
  ASSERT_EQ(y.size(), 4u);
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = std::max(0.f, x[i]) + std::min(0.f, 2.f * (std::exp(x[i] / 2.f) - 1.f));
    EXPECT_NEAR(y[i], want, 1e-6f) << i;
  }
}

// MeanVarianceNormalization's body (opset 13) in an opset-18 model: the schema's
// default axes [0, 2, 3] apply since the call sets none (over all axes, the values
// would come out otherwise).
TEST(ExpandFunctionsTest, SchemaDefaultsFillAttributesTheCallLeavesOut) {
  onnx::ModelProto m = NewModel(18);
  AddInput(m, "x", {1, 2, 1, 2});
  AddOutput(m, "y", {1, 2, 1, 2});
  AddNode(m, "MeanVarianceNormalization", {"x"}, {"y"}, "mvn");
  auto g = ImportOnnxModel(m, ".");
  ASSERT_TRUE(g.ok()) << g.status();
  const std::vector<float> y =
      Evaluate(**g, {{"x", Tensor::FromFloat(DType::kFloat32, {1, 2, 1, 2}, {1.f, 3.f, 10.f, 30.f})}});
  ASSERT_EQ(y.size(), 4u);
  // Per channel: (x - mean) / std, each channel's two values become -1 and 1.
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], i % 2 ? 1.f : -1.f, 1e-4f) << i;
}

// A body node is read at its function's opset: Unsqueeze's axes moved from an
// attribute to an input at opset 13, so an opset-12 body node in an opset-17 model
// is rewritten and a model node is not.
TEST(ExpandFunctionsTest, LegacyRewritesReadEachBodyNodeAtItsOpset) {
  Graph g;
  Value* x = g.AddValue("x");
  x->SetType(DType::kFloat32, {3});
  g.AddInput(x);
  Node* body = g.AddNode("Unsqueeze", {x}, {g.AddValue("a")}, "body");
  Node* model = g.AddNode("Unsqueeze", {x}, {g.AddValue("b")}, "model");
  body->SetAttr("axes", std::vector<int64_t>{0});
  model->SetAttr("axes", std::vector<int64_t>{0});
  ASSERT_TRUE(UpgradeLegacyNodes(g, 17, {{body, 12}}).ok());
  EXPECT_TRUE(body->has_input(1));
  EXPECT_FALSE(body->has_attr("axes"));
  EXPECT_FALSE(model->has_input(1));
  EXPECT_TRUE(model->has_attr("axes"));
}

// NegativeLogLikelihoodLoss has a context-dependent body (built from the call's
// inputs and attributes); ignore_index is unset, so no class is ignored.
TEST(ExpandFunctionsTest, ContextDependentBodyWithStringAttribute) {
  onnx::ModelProto m = NewModel(13);
  AddInput(m, "x", {2, 3});
  AddInput(m, "t", {2}, onnx::TensorProto::INT64);
  AddOutput(m, "loss", {});
  AddStringAttr(AddNode(m, "NegativeLogLikelihoodLoss", {"x", "t"}, {"loss"}, "nll"), "reduction", "mean");
  auto g = ImportOnnxModel(m, ".");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(HasOp(**g, "NegativeLogLikelihoodLoss"));
  const std::vector<float> loss =
      Evaluate(**g, {{"x", Tensor::FromFloat(DType::kFloat32, {2, 3}, {-1.f, -2.f, -3.f, -4.f, -5.f, -6.f})},
                {"t", Tensor::FromInt64(DType::kInt64, {2}, {0, 2})}});
  ASSERT_EQ(loss.size(), 1u);
  EXPECT_NEAR(loss[0], (1.f + 6.f) / 2.f, 1e-6f);
}

// A context-dependent body's input that nothing defines (a fuzzed SequenceMap's made
// ONNX's builder dereference a null pointer) is an error naming it.
TEST(ExpandFunctionsTest, UndefinedInputOfAContextDependentBodyIsAnError) {
  onnx::ModelProto m = NewModel(13);
  AddInput(m, "x", {2, 3});
  AddOutput(m, "loss", {});
  AddStringAttr(AddNode(m, "NegativeLogLikelihoodLoss", {"x", "t"}, {"loss"}, "nll"), "reduction", "mean");
  auto g = ImportOnnxModel(m, ".");
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()),
              HasSubstr("input 't' is not a graph input, an initializer or any node's output"));
}

// LayerNormalization has an ONNX function body, but kiln defines the op: it stays.
TEST(ExpandFunctionsTest, OpsKilnDefinesAreNotExpanded) {
  onnx::ModelProto m = NewModel(17);
  AddInput(m, "x", {2, 4});
  AddOutput(m, "y", {2, 4});
  AddFloatInitializer(m, "s", {4}, {1, 1, 1, 1});
  AddNode(m, "LayerNormalization", {"x", "s"}, {"y"}, "ln");
  std::map<int, int64_t> opsets;
  onnx::ModelProto copy = m;
  ASSERT_TRUE(ExpandFunctionOps(copy, [](const std::string& op) { return op == "LayerNormalization"; }, &opsets).ok());
  ASSERT_EQ(copy.graph().node_size(), 1);
  EXPECT_EQ(copy.graph().node(0).op_type(), "LayerNormalization");
  EXPECT_TRUE(opsets.empty());
  auto g = ImportOnnxModel(m, ".");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(HasOp(**g, "LayerNormalization"));
}

// Bernoulli's body draws from RandomUniformLike, which kiln lacks: the error names
// that op and, through the node's name, the call it came from.
TEST(ExpandFunctionsTest, UnsupportedOpInsideABodyIsReportedWithItsCall) {
  onnx::ModelProto m = NewModel(15);
  AddInput(m, "p", {3});
  AddOutput(m, "y", {3});
  AddNode(m, "Bernoulli", {"p"}, {"y"}, "coin");
  auto g = ImportOnnxModel(m, ".");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Msg(g.status()), HasSubstr("RandomUniformLike"));
  EXPECT_THAT(Msg(g.status()), HasSubstr("coin/"));
}

}  // namespace
}  // namespace kiln
