// Tests for the vision-model generators (ViT-B/16, ResNet-50, MobileNetV2) at small
// sizes: op patterns, shapes and opset / layout variants agreeing on the CPU reference.
#include "models/make_model_test_util.h"

namespace kiln::models {
namespace {

using namespace model_test;  // NOLINT: the tests' vocabulary

// ---------------------------------------------------------------------------
// vit_b16

const OpCounts kVitLayerOps = {{"LayerNormalization", 2},
                               {"MatMul", 8},
                               {"Add", 9},
                               {"Reshape", 4},
                               {"Transpose", 4},
                               {"Div", 2},
                               {"Softmax", 1},
                               {"Erf", 1},
                               {"Mul", 2}};

TEST(MakeModelTest, VitB16) {
  EXPECT_EQ(Total(kVitLayerOps), 33);
  const OpCounts outside = {{"Conv", 1},   {"Reshape", 1}, {"Transpose", 1},          {"Expand", 1},
                            {"Concat", 1}, {"Add", 1},     {"LayerNormalization", 1}, {"Gather", 1},
                            {"Gemm", 1}};
  EXPECT_EQ(CountFileOps("vit_b16", SmallVit()), Stack(kVitLayerOps, 2, outside));
  auto graph = MakeAndImport("vit_b16", SmallVit());
  ASSERT_NE(graph, nullptr);
  OpCounts imported = Stack(kVitLayerOps, 2, outside);
  imported.erase("Expand");  // cls_token.expand(B, -1, -1) reads constants only: folded on import
  EXPECT_EQ(CountOps(*graph), imported);
  ASSERT_EQ(graph->inputs().size(), 1u);
  EXPECT_EQ(graph->inputs()[0]->name(), "pixel_values");
  EXPECT_EQ(graph->inputs()[0]->shape(), (Shape{2, 3, 32, 32}));
  ASSERT_EQ(graph->outputs().size(), 1u);
  EXPECT_EQ(graph->outputs()[0]->name(), "logits");
  EXPECT_EQ(graph->outputs()[0]->shape(), (Shape{2, 10}));
  for (const Node* node : graph->nodes()) {
    if (node->op_type() == "Conv") {
      EXPECT_EQ(node->output(0)->shape(), (Shape{2, 32, 2, 2}));
      EXPECT_EQ(*node->GetInts("strides"), (std::vector<int64_t>{16, 16}));
    }
    if (node->op_type() == "Concat") {
      EXPECT_EQ(node->output(0)->shape(), (Shape{2, 5, 32}));
    }
    if (node->op_type() == "Softmax") {
      EXPECT_EQ(node->input(0)->shape(), (Shape{2, 4, 5, 5}));
    }
    if (node->op_type() == "Gather") {
      EXPECT_EQ(node->output(0)->shape(), (Shape{2, 32})) << "the class token";
    }
  }
  const std::vector<Tensor> out = Evaluate(*graph, RandomFeeds(*graph, 16));
  ASSERT_EQ(out.size(), 1u);
  ExpectFinite(out[0]);
  const std::vector<float> v = out[0].ToFloat();
  EXPECT_NE(v[0], v[10]);  // the two images give different logits
}

TEST(MakeModelTest, VitB16Opset20UsesGeluAndAgrees) {
  auto g17 = MakeAndImport("vit_b16", SmallVit(17));
  auto g20 = MakeAndImport("vit_b16", SmallVit(20));
  ASSERT_NE(g17, nullptr);
  ASSERT_NE(g20, nullptr);
  const OpCounts c20 = CountOps(*g20);
  EXPECT_EQ(c20.at("Gelu"), 2);
  EXPECT_EQ(c20.count("Erf"), 0u);
  EXPECT_EQ(g20->num_nodes(), g17->num_nodes() - 2 * 4);
  const TensorMap feeds = RandomFeeds(*g17, 17);
  const std::vector<Tensor> o17 = Evaluate(*g17, feeds), o20 = Evaluate(*g20, feeds);
  ASSERT_EQ(o17.size(), 1u);
  ASSERT_EQ(o20.size(), 1u);
  EXPECT_LT(MaxAbsDiff(o17[0], o20[0]), 1e-4f);
}

// ---------------------------------------------------------------------------
// resnet50 and mobilenet_v2

float MaxAbs(const Tensor& t) {
  float m = 0;
  for (float v : t.ToFloat()) m = std::max(m, std::abs(v));
  return m;
}

// The folded (default) and BatchNormalization forms, and opsets 17 and 20, compute the
// same function.
void ExpectCnnVariantsAgree(const std::string& name, const ModelOptions& base, uint32_t seed) {
  ModelOptions bn = base, o20 = base;
  bn.batchnorm = 1;
  o20.opset = 20;
  auto folded = MakeAndImport(name, base);
  auto kept = MakeAndImport(name, bn);
  auto g20 = MakeAndImport(name, o20);
  ASSERT_NE(folded, nullptr);
  ASSERT_NE(kept, nullptr);
  ASSERT_NE(g20, nullptr);
  const TensorMap feeds = RandomFeeds(*folded, seed);
  const std::vector<Tensor> a = Evaluate(*folded, feeds), b = Evaluate(*kept, feeds), c = Evaluate(*g20, feeds);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  ASSERT_EQ(c.size(), 1u);
  ExpectFinite(a[0]);
  const float scale = MaxAbs(a[0]);
  EXPECT_GT(scale, 1e-2f);
  EXPECT_LT(scale, 1e3f) << "activations should stay of order 1 with N(0, 1/fan_in) weights";
  EXPECT_LT(MaxAbsDiff(a[0], b[0]), 1e-4f * scale) << "BatchNorm folded vs kept";
  EXPECT_EQ(MaxAbsDiff(a[0], c[0]), 0.f) << "opset 17 vs 20";
}

TEST(MakeModelTest, ResNet50) {
  ModelOptions o = SmallCnn();
  o.width = 8;  // channels 8..256 instead of 64..2048
  const OpCounts folded = {{"Conv", 53},   {"Relu", 49}, {"Add", 16}, {"MaxPool", 1}, {"GlobalAveragePool", 1},
                           {"Flatten", 1}, {"Gemm", 1}};
  EXPECT_EQ(CountFileOps("resnet50", o), folded);
  ModelOptions bn = o;
  bn.batchnorm = 1;
  OpCounts with_bn = folded;
  with_bn["BatchNormalization"] = 53;
  EXPECT_EQ(CountFileOps("resnet50", bn), with_bn);

  auto graph = MakeAndImport("resnet50", o);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(CountOps(*graph), folded);
  EXPECT_EQ(graph->inputs()[0]->name(), "x");
  EXPECT_EQ(graph->inputs()[0]->shape(), (Shape{2, 3, 32, 32}));
  ASSERT_EQ(graph->outputs().size(), 1u);
  EXPECT_EQ(graph->outputs()[0]->name(), "logits");
  EXPECT_EQ(graph->outputs()[0]->shape(), (Shape{2, 10}));
  int downsamples = 0;
  for (const Node* node : graph->nodes()) {
    if (node->op_type() == "Conv") {
      EXPECT_TRUE(node->has_input(2)) << node->name() << ": the folded BatchNorm is the conv's bias";
      if (node->name().find("downsample") != std::string::npos) ++downsamples;
    }
    if (node->name() == "/maxpool/MaxPool") {
      EXPECT_EQ(node->output(0)->shape(), (Shape{2, 8, 8, 8}));
    }
    if (node->name() == "/layer4/layer4.2/relu/Relu_2") {
      EXPECT_EQ(node->output(0)->shape(), (Shape{2, 256, 1, 1}));
    }
  }
  EXPECT_EQ(downsamples, 4);
  ExpectCnnVariantsAgree("resnet50", o, 18);
}

TEST(MakeModelTest, MobileNetV2) {
  const ModelOptions o = SmallCnn();
  const OpCounts folded = {{"Conv", 52},   {"Clip", 35}, {"Add", 10}, {"GlobalAveragePool", 1},
                           {"Flatten", 1}, {"Gemm", 1}};
  EXPECT_EQ(CountFileOps("mobilenet_v2", o), folded);
  ModelOptions bn = o;
  bn.batchnorm = 1;
  OpCounts with_bn = folded;
  with_bn["BatchNormalization"] = 52;
  EXPECT_EQ(CountFileOps("mobilenet_v2", bn), with_bn);

  auto graph = MakeAndImport("mobilenet_v2", o);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(CountOps(*graph), folded);
  EXPECT_EQ(graph->outputs()[0]->shape(), (Shape{2, 10}));
  int depthwise = 0;
  for (const Node* node : graph->nodes()) {
    if (node->op_type() == "Conv" && *node->GetInt("group", 1) > 1) {
      ++depthwise;
      const int64_t channels = node->input(0)->shape()[1];
      EXPECT_EQ(*node->GetInt("group"), channels) << node->name();
      EXPECT_EQ(node->input(1)->shape(), (Shape{channels, 1, 3, 3})) << node->name();
    }
    if (node->op_type() == "Clip") {
      ASSERT_EQ(node->num_inputs(), 3);
      EXPECT_EQ(node->input(1)->constant().ToFloat(), std::vector<float>{0.f});
      EXPECT_EQ(node->input(2)->constant().ToFloat(), std::vector<float>{6.f});
    }
    if (node->op_type() == "GlobalAveragePool") {
      EXPECT_EQ(node->input(0)->shape(), (Shape{2, 1280, 1, 1}));
    }
  }
  EXPECT_EQ(depthwise, 17);
  ExpectCnnVariantsAgree("mobilenet_v2", o, 19);
}

}  // namespace
}  // namespace kiln::models
