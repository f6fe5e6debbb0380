// Tests for the model generators: each model at a small size is written, imported
// with kiln's ONNX importer, checked for its op pattern and output shapes, and run
// on the CPU reference. Here the MLP, the tiny CNN, seeds, option errors and the
// builder; the transformers in make_model_text_test.cc, ViT and the CNNs in
// make_model_vision_test.cc.
#include "models/make_model_test_util.h"

namespace kiln::models {
namespace {

using namespace model_test;  // NOLINT: the tests' vocabulary

TEST(MakeModelTest, Mlp) {
  ModelOptions o;
  o.batch = 3;
  auto graph = MakeAndImport("mlp", o);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(CountOps(*graph), (OpCounts{{"Gemm", 2}, {"Relu", 1}, {"Softmax", 1}}));
  ASSERT_EQ(graph->inputs().size(), 1u);
  EXPECT_EQ(graph->inputs()[0]->shape(), (Shape{3, 256}));
  ASSERT_EQ(graph->outputs().size(), 1u);
  EXPECT_EQ(graph->outputs()[0]->name(), "probs");
  EXPECT_EQ(graph->outputs()[0]->shape(), (Shape{3, 10}));

  const std::vector<Tensor> out = Evaluate(*graph, RandomFeeds(*graph, 1));
  ASSERT_EQ(out.size(), 1u);
  ExpectFinite(out[0]);
  const std::vector<float> p = out[0].ToFloat();
  for (int r = 0; r < 3; ++r) {
    double sum = 0, hi = 0;
    for (int c = 0; c < 10; ++c) {
      EXPECT_GE(p[r * 10 + c], 0.f);
      sum += p[r * 10 + c];
      hi = std::max<double>(hi, p[r * 10 + c]);
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r;
    EXPECT_LT(hi, 0.999) << "row " << r << ": weights too large, softmax saturates";
  }
}

TEST(MakeModelTest, TinyCnn) {
  ModelOptions o;
  o.batch = 2;
  auto graph = MakeAndImport("tiny_cnn", o);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(CountOps(*graph), (OpCounts{{"Conv", 2},
                                        {"BatchNormalization", 2},
                                        {"Relu", 2},
                                        {"MaxPool", 1},
                                        {"GlobalAveragePool", 1},
                                        {"Flatten", 1},
                                        {"Gemm", 1}}));
  EXPECT_EQ(graph->inputs()[0]->shape(), (Shape{2, 3, 32, 32}));
  ASSERT_EQ(graph->outputs().size(), 1u);
  EXPECT_EQ(graph->outputs()[0]->name(), "logits");
  EXPECT_EQ(graph->outputs()[0]->shape(), (Shape{2, 10}));
  const std::vector<Tensor> out = Evaluate(*graph, RandomFeeds(*graph, 2));
  ASSERT_EQ(out.size(), 1u);
  ExpectFinite(out[0]);
  const std::vector<float> v = out[0].ToFloat();
  EXPECT_NE(v[0], v[1]);
  EXPECT_NE(v[0], v[10]);  // the two batch rows differ
}

TEST(MakeModelTest, SameSeedSameBytesOtherSeedOtherWeights) {
  ModelOptions o = SmallTransformer();
  auto a = MakeModel("gpt2_block", o);
  auto b = MakeModel("gpt2_block", o);
  o.seed = 1;
  auto c = MakeModel("gpt2_block", o);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->SerializeAsString(), b->SerializeAsString());
  EXPECT_NE(a->SerializeAsString(), c->SerializeAsString());
}

TEST(MakeModelTest, BadOptionsAreErrors) {
  ModelOptions o;
  EXPECT_EQ(MakeModel("resnet", o).status().code(), absl::StatusCode::kInvalidArgument);
  o.heads = 4;
  auto s = MakeModel("mlp", o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("--heads does not apply to mlp"), std::string::npos) << s;
  ModelOptions t = SmallTransformer();
  t.heads = 5;
  s = MakeModel("bert_layer", t).status();
  EXPECT_NE(std::string(s.message()).find("not divisible"), std::string::npos) << s;
  t = SmallTransformer(9);
  EXPECT_EQ(MakeModel("bert_layer", t).status().code(), absl::StatusCode::kInvalidArgument);
  t = SmallTransformer();
  t.seq = 0;
  EXPECT_EQ(MakeModel("bert_layer", t).status().code(), absl::StatusCode::kInvalidArgument);
  t = SmallDistilBert();
  t.seq = 513;
  s = MakeModel("distilbert", t).status();
  EXPECT_NE(std::string(s.message()).find("512 position embeddings"), std::string::npos) << s;
  ModelOptions v = SmallVit();
  v.image = 40;
  s = MakeModel("vit_b16", v).status();
  EXPECT_NE(std::string(s.message()).find("not a multiple of the patch size 16"), std::string::npos) << s;
  ModelOptions c = SmallCnn();
  c.batchnorm = 2;
  s = MakeModel("resnet50", c).status();
  EXPECT_NE(std::string(s.message()).find("--batchnorm must be 0 or 1"), std::string::npos) << s;
  c = SmallCnn();
  c.width = 8;
  s = MakeModel("mobilenet_v2", c).status();
  EXPECT_NE(std::string(s.message()).find("--width does not apply to mobilenet_v2"), std::string::npos) << s;
}

TEST(ModelBuilderTest, UndefinedInputIsReportedByBuild) {
  ModelBuilder b("bad", 17, 0);
  const std::string x = b.AddInput("x", onnx::TensorProto::FLOAT, {2});
  const std::string y = b.Op("Add", "/add", {x, "nowhere"});
  b.AddOutput(y, onnx::TensorProto::FLOAT, {2});
  auto model = b.Build();
  ASSERT_FALSE(model.ok());
  EXPECT_NE(std::string(model.status().message()).find("input 'nowhere' is not defined"), std::string::npos)
      << model.status();
}

TEST(ModelBuilderTest, CheckerErrorsAreReported) {
  ModelBuilder b("bad", 17, 0);
  const std::string x = b.AddInput("x", onnx::TensorProto::FLOAT, {2});
  const std::string y = b.Op("NoSuchOp", "/bad", {x});
  b.AddOutput(y, onnx::TensorProto::FLOAT, {2});
  bool checked = false;
  auto model = b.Build(&checked);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(std::string(model.status().message()).find("ONNX checker"), std::string::npos) << model.status();
}

}  // namespace
}  // namespace kiln::models
