// Tests for the model-level rewrites (frontend/proto_rewrites.h) through the importer:
// If on a constant takes its branch (and one on a run-time value is refused by name),
// Upsample becomes Resize.
#include "frontend/proto_rewrites.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "frontend/onnx_importer.h"
#include "frontend/onnx_test_util.h"
#include "graph/evaluate.h"

namespace kiln {
namespace {

using namespace onnx_test;  // NOLINT: model builders
using ::testing::HasSubstr;

// A branch graph whose one output is `out` = x * k.
onnx::GraphProto Branch(const std::string& out, float k) {
  onnx::ModelProto holder = NewModel();
  AddFloatInitializer(holder, "k", {}, {k});
  AddNode(holder, "Mul", {"x", "k"}, {out}, "mul");
  AddOutput(holder, out, {2});
  return holder.graph();
}

// y = If(cond){then: x * 2, else: x * -1}, cond from `cond_node` (a Constant) or an input.
onnx::ModelProto IfModel(bool constant, bool value) {
  onnx::ModelProto m = NewModel(13);
  AddInput(m, "x", {2});
  AddOutput(m, "y", {2});
  if (constant) {
    auto* c = AddNode(m, "Constant", {}, {"cond"}, "c");
    auto* a = c->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::BOOL);
    a->mutable_t()->add_int32_data(value ? 1 : 0);
  } else {
    AddInput(m, "cond", {}, onnx::TensorProto::BOOL);
  }
  auto* n = AddNode(m, "If", {"cond"}, {"y"}, "branchy");
  for (const auto& [name, k] : {std::pair<std::string, float>{"then_branch", 2.f}, {"else_branch", -1.f}}) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = Branch(name == "then_branch" ? "t" : "e", k);
  }
  return m;
}

std::vector<float> RunX(const Graph& g) {
  auto out = EvaluateGraph(g, {{"x", Tensor::FromFloat(DType::kFloat32, {2}, {1.f, 3.f})}});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0].ToFloat() : std::vector<float>();
}

TEST(ProtoRewritesTest, IfOnAConstantTakesItsBranch) {
  for (bool value : {true, false}) {
    auto g = ImportOnnxModel(IfModel(true, value), ".");
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(RunX(**g), value ? (std::vector<float>{2.f, 6.f}) : (std::vector<float>{-1.f, -3.f}));
  }
}

TEST(ProtoRewritesTest, IfOnABoundInputTakesItsBranch) {
  ImportOptions options;
  options.constant_inputs["cond"] = Tensor::FromInt64(DType::kBool, {}, {0});
  auto g = ImportOnnxModel(IfModel(false, false), ".", options);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(RunX(**g), (std::vector<float>{-1.f, -3.f}));
}

TEST(ProtoRewritesTest, IfOnARunTimeValueIsRefusedByName) {
  auto g = ImportOnnxModel(IfModel(false, false), ".");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Msg(g.status()), HasSubstr("node 'branchy' (If): its condition 'cond' must be a compile-time constant"));
}

// Upsample-7 (scales as an attribute), nearest: each element repeats 2 x 3 times.
TEST(ProtoRewritesTest, UpsampleBecomesResize) {
  onnx::ModelProto m = NewModel(7);
  AddInput(m, "x", {1, 1, 1, 2});
  AddOutput(m, "y", {1, 1, 2, 6});
  auto* n = AddNode(m, "Upsample", {"x"}, {"y"}, "up");
  auto* a = n->add_attribute();
  a->set_name("scales");
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float s : {1.f, 1.f, 2.f, 3.f}) a->add_floats(s);
  auto g = ImportOnnxModel(m, ".");
  ASSERT_TRUE(g.ok()) << g.status();
  auto out = EvaluateGraph(**g, {{"x", Tensor::FromFloat(DType::kFloat32, {1, 1, 1, 2}, {5.f, 7.f})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 1, 2, 6}));
  EXPECT_EQ((*out)[0].ToFloat(), (std::vector<float>{5, 5, 5, 7, 7, 7, 5, 5, 5, 7, 7, 7}));
}

}  // namespace
}  // namespace kiln
