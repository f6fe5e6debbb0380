// Tests for the text-model generators (BERT layer and base, DistilBERT, GPT-2 block
// and model) at small sizes: op patterns, shapes, masks, opset variants agreeing, on
// the CPU reference.
#include "models/make_model_test_util.h"

namespace kiln::models {
namespace {

using namespace model_test;  // NOLINT: the tests' vocabulary

const OpCounts kBertLayerOps = {
    {"MatMul", 8}, {"Add", 10}, {"Reshape", 4}, {"Transpose", 4}, {"Div", 2}, {"Softmax", 1}, {"LayerNormalization", 2},
    {"Erf", 1},    {"Mul", 2}};

TEST(MakeModelTest, BertLayer) {
  auto graph = MakeAndImport("bert_layer", SmallTransformer());
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(graph->num_nodes(), 34);
  EXPECT_EQ(CountOps(*graph), kBertLayerOps);
  ASSERT_EQ(graph->inputs().size(), 2u);
  EXPECT_EQ(graph->inputs()[0]->name(), "hidden_states");
  EXPECT_EQ(graph->inputs()[0]->shape(), (Shape{2, 8, 32}));
  EXPECT_EQ(graph->inputs()[1]->name(), "attention_mask");
  EXPECT_EQ(graph->inputs()[1]->shape(), (Shape{2, 1, 1, 8}));
  ASSERT_EQ(graph->outputs().size(), 1u);
  EXPECT_EQ(graph->outputs()[0]->name(), "last_hidden_state");
  EXPECT_EQ(graph->outputs()[0]->shape(), (Shape{2, 8, 32}));

  // The attention softmax is over keys: scores [B,A,S,S], axis -1.
  for (const Node* node : graph->nodes()) {
    if (node->op_type() == "Softmax") {
      EXPECT_EQ(node->input(0)->shape(), (Shape{2, 4, 8, 8}));
      EXPECT_EQ(*node->GetInt("axis"), -1);
    }
    if (node->op_type() == "Transpose" && node->name() == "/encoder/layer.0/attention/self/Transpose_1") {
      EXPECT_EQ(*node->GetInts("perm"), (std::vector<int64_t>{0, 2, 3, 1}));
    }
  }
  const std::vector<Tensor> out = Evaluate(*graph, RandomFeeds(*graph, 3));
  ASSERT_EQ(out.size(), 1u);
  ExpectFinite(out[0]);
  ExpectRowsVary(out[0]);
}

// A masked key position must not influence the other positions' outputs.
TEST(MakeModelTest, BertLayerAttentionMaskHidesKeys) {
  auto graph = MakeAndImport("bert_layer", SmallTransformer());
  ASSERT_NE(graph, nullptr);
  std::vector<float> mask(2 * 8, 0.f);
  mask[5] = mask[8 + 5] = -10000.f;  // hide position 5 in both batch rows
  TensorMap feeds =
      RandomFeeds(*graph, 4, {{"attention_mask", Tensor::FromFloat(DType::kFloat32, {2, 1, 1, 8}, mask)}});
  const std::vector<Tensor> base = Evaluate(*graph, feeds);
  Tensor changed = feeds["hidden_states"];
  float* x = changed.mutable_data<float>();
  for (int b = 0; b < 2; ++b) {
    for (int i = 0; i < 32; ++i) x[(b * 8 + 5) * 32 + i] += 3.f;
  }
  feeds["hidden_states"] = changed;
  const std::vector<Tensor> after = Evaluate(*graph, feeds);
  ASSERT_NO_FATAL_FAILURE(ExpectOnlyPositionChanged(base, after, 5));
}

// Opset 20 uses the Gelu op, opset 16 decomposes LayerNormalization; with the same
// seed the weights are the same, so all three compute the same function.
TEST(MakeModelTest, BertLayerOpsetVariantsAgree) {
  auto g17 = MakeAndImport("bert_layer", SmallTransformer(17));
  auto g20 = MakeAndImport("bert_layer", SmallTransformer(20));
  auto g16 = MakeAndImport("bert_layer", SmallTransformer(16));
  ASSERT_NE(g17, nullptr);
  ASSERT_NE(g20, nullptr);
  ASSERT_NE(g16, nullptr);
  EXPECT_EQ(CountOps(*g20), (OpCounts{{"MatMul", 8},
                                      {"Add", 9},
                                      {"Reshape", 4},
                                      {"Transpose", 4},
                                      {"Div", 1},
                                      {"Softmax", 1},
                                      {"LayerNormalization", 2},
                                      {"Gelu", 1}}));
  EXPECT_EQ(g20->num_nodes(), 30);
  EXPECT_EQ(CountOps(*g16), (OpCounts{{"MatMul", 8},
                                      {"Add", 14},
                                      {"Reshape", 4},
                                      {"Transpose", 4},
                                      {"Div", 4},
                                      {"Softmax", 1},
                                      {"Erf", 1},
                                      {"Mul", 4},
                                      {"ReduceMean", 4},
                                      {"Sub", 2},
                                      {"Pow", 2},
                                      {"Sqrt", 2}}));
  EXPECT_EQ(g16->num_nodes(), 50);
  const TensorMap feeds = RandomFeeds(*g17, 5);
  const std::vector<Tensor> o17 = Evaluate(*g17, feeds), o20 = Evaluate(*g20, feeds), o16 = Evaluate(*g16, feeds);
  ASSERT_EQ(o17.size(), 1u);
  ASSERT_EQ(o20.size(), 1u);
  ASSERT_EQ(o16.size(), 1u);
  EXPECT_LT(MaxAbsDiff(o17[0], o20[0]), 1e-4f);
  EXPECT_LT(MaxAbsDiff(o17[0], o16[0]), 1e-4f);
}

TEST(MakeModelTest, BertBase) {
  ModelOptions o = SmallTransformer();
  o.layers = 2;
  o.vocab = 100;
  auto graph = MakeAndImport("bert_base", o);
  ASSERT_NE(graph, nullptr);
  OpCounts expected;
  for (const auto& [op, n] : kBertLayerOps) expected[op] = 2 * n;
  expected["Gather"] = 1;
  expected["Add"] += 1;
  expected["LayerNormalization"] += 1;
  EXPECT_EQ(CountOps(*graph), expected);
  EXPECT_EQ(graph->num_nodes(), 3 + 2 * 34);
  ASSERT_EQ(graph->inputs().size(), 2u);
  EXPECT_EQ(graph->inputs()[0]->name(), "input_ids");
  EXPECT_EQ(graph->inputs()[0]->dtype(), DType::kInt64);
  EXPECT_EQ(graph->inputs()[0]->shape(), (Shape{2, 8}));
  ASSERT_EQ(graph->outputs().size(), 1u);
  EXPECT_EQ(graph->outputs()[0]->shape(), (Shape{2, 8, 32}));
  const std::vector<Tensor> out = Evaluate(*graph, RandomFeeds(*graph, 6));
  ASSERT_EQ(out.size(), 1u);
  ExpectFinite(out[0]);
  ExpectRowsVary(out[0]);
}

TEST(MakeModelTest, Gpt2Block) {
  auto graph = MakeAndImport("gpt2_block", SmallTransformer());
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(CountOps(*graph), (OpCounts{{"LayerNormalization", 2},
                                        {"MatMul", 6},
                                        {"Add", 8},
                                        {"Split", 1},
                                        {"Reshape", 4},
                                        {"Transpose", 4},
                                        {"Div", 1},
                                        {"Where", 1},
                                        {"Softmax", 1},
                                        {"Mul", 4},
                                        {"Pow", 1},
                                        {"Tanh", 1}}));
  EXPECT_EQ(graph->num_nodes(), 34);
  ASSERT_EQ(graph->inputs().size(), 1u);
  EXPECT_EQ(graph->inputs()[0]->shape(), (Shape{2, 8, 32}));
  ASSERT_EQ(graph->outputs().size(), 1u);
  EXPECT_EQ(graph->outputs()[0]->name(), "output");
  EXPECT_EQ(graph->outputs()[0]->shape(), (Shape{2, 8, 32}));
  for (const Node* node : graph->nodes()) {
    if (node->op_type() == "MatMul" && node->input(1)->is_constant() &&
        node->name().find("c_attn") != std::string::npos) {
      EXPECT_EQ(node->input(1)->shape(), (Shape{32, 96})) << "fused QKV weight";
    }
    if (node->op_type() == "Split") {
      ASSERT_EQ(node->num_outputs(), 3);
      for (int i = 0; i < 3; ++i) EXPECT_EQ(node->output(i)->shape(), (Shape{2, 8, 32}));
    }
  }
  const TensorMap feeds = RandomFeeds(*graph, 7);
  const std::vector<Tensor> base = Evaluate(*graph, feeds);
  ASSERT_EQ(base.size(), 1u);
  ExpectFinite(base[0]);

  // Causality: changing the last token changes only the last position's output.
  TensorMap changed = feeds;
  float* x = changed["hidden_states"].mutable_data<float>();
  for (int b = 0; b < 2; ++b) {
    for (int i = 0; i < 32; ++i) x[(b * 8 + 7) * 32 + i] += 2.f;
  }
  const std::vector<Tensor> after = Evaluate(*graph, changed);
  ASSERT_NO_FATAL_FAILURE(ExpectOnlyPositionChanged(base, after, 7, 32, /*exact=*/true));
}

// Below opset 13 Split takes its sizes as an attribute; the model computes the same.
TEST(MakeModelTest, Gpt2BlockOpset11SplitAttribute) {
  auto g11 = MakeAndImport("gpt2_block", SmallTransformer(11));
  auto g17 = MakeAndImport("gpt2_block", SmallTransformer(17));
  ASSERT_NE(g11, nullptr);
  ASSERT_NE(g17, nullptr);
  const OpCounts c11 = CountOps(*g11);
  EXPECT_EQ(c11.at("Split"), 1);
  EXPECT_EQ(c11.at("ReduceMean"), 4);  // LayerNorm decomposed twice
  const TensorMap feeds = RandomFeeds(*g17, 8);
  const std::vector<Tensor> o11 = Evaluate(*g11, feeds), o17 = Evaluate(*g17, feeds);
  ASSERT_EQ(o11.size(), 1u);
  ASSERT_EQ(o17.size(), 1u);
  EXPECT_LT(MaxAbsDiff(o11[0], o17[0]), 1e-4f);
}

// ---------------------------------------------------------------------------
// distilbert

// Feeds for distilbert/gpt2: ids in [0, 100), every position visible.
TensorMap TokenFeeds(const Graph& graph, uint32_t seed) {
  TensorMap feeds;
  for (const Value* in : graph.inputs()) {
    if (in->name() == "attention_mask") {
      feeds[in->name()] = Tensor::FromFloat(DType::kInt64, in->shape(), std::vector<float>(in->numel(), 1.f));
    }
  }
  return RandomFeeds(graph, seed, feeds);
}

const OpCounts kDistilBertLayerOps = {
    {"MatMul", 8}, {"Add", 9},   {"Reshape", 5}, {"Transpose", 4},          {"Div", 2}, {"Equal", 1}, {"Expand", 1},
    {"Cast", 1},   {"Where", 1}, {"Softmax", 1}, {"LayerNormalization", 2}, {"Erf", 1}, {"Mul", 2}};

TEST(MakeModelTest, DistilBert) {
  const OpCounts embeddings = {{"Gather", 2}, {"Add", 1}, {"LayerNormalization", 1}};
  EXPECT_EQ(Total(kDistilBertLayerOps), 38);
  EXPECT_EQ(CountFileOps("distilbert", SmallDistilBert()), Stack(kDistilBertLayerOps, 2, embeddings));
  auto graph = MakeAndImport("distilbert", SmallDistilBert());
  ASSERT_NE(graph, nullptr);
  // The position-embedding Gather reads constants only: kiln folds it on import.
  EXPECT_EQ(CountOps(*graph), Stack(kDistilBertLayerOps, 2, {{"Gather", 1}, {"Add", 1}, {"LayerNormalization", 1}}));
  EXPECT_EQ(graph->num_nodes(), 3 + 2 * 38);
  ASSERT_EQ(graph->inputs().size(), 2u);
  EXPECT_EQ(graph->inputs()[0]->name(), "input_ids");
  EXPECT_EQ(graph->inputs()[1]->name(), "attention_mask");
  EXPECT_EQ(graph->inputs()[1]->dtype(), DType::kInt64);
  EXPECT_EQ(graph->inputs()[1]->shape(), (Shape{2, 8}));
  ASSERT_EQ(graph->outputs().size(), 1u);
  EXPECT_EQ(graph->outputs()[0]->name(), "last_hidden_state");
  EXPECT_EQ(graph->outputs()[0]->shape(), (Shape{2, 8, 32}));
  for (const Node* node : graph->nodes()) {
    if (node->op_type() == "Softmax") {
      EXPECT_EQ(node->input(0)->shape(), (Shape{2, 4, 8, 8}));
    }
    if (node->op_type() == "Where") {
      EXPECT_EQ(node->input(0)->dtype(), DType::kBool);
      EXPECT_EQ(node->input(0)->shape(), (Shape{2, 4, 8, 8})) << "the expanded mask";
    }
  }
  const std::vector<Tensor> out = Evaluate(*graph, TokenFeeds(*graph, 11));
  ASSERT_EQ(out.size(), 1u);
  ExpectFinite(out[0]);
  ExpectRowsVary(out[0]);
}

// attention_mask 0 hides a key: changing that token leaves every other position as is.
TEST(MakeModelTest, DistilBertAttentionMaskHidesKeys) {
  auto graph = MakeAndImport("distilbert", SmallDistilBert());
  ASSERT_NE(graph, nullptr);
  std::vector<float> mask(2 * 8, 1.f);
  mask[5] = mask[8 + 5] = 0.f;
  TensorMap feeds = RandomFeeds(*graph, 12, {{"attention_mask", Tensor::FromFloat(DType::kInt64, {2, 8}, mask)}});
  const std::vector<Tensor> base = Evaluate(*graph, feeds);
  Tensor ids = feeds["input_ids"];
  for (int b = 0; b < 2; ++b) ids.mutable_data<int64_t>()[b * 8 + 5] = (ids.data<int64_t>()[b * 8 + 5] + 17) % 100;
  feeds["input_ids"] = ids;
  const std::vector<Tensor> after = Evaluate(*graph, feeds);
  ASSERT_NO_FATAL_FAILURE(ExpectOnlyPositionChanged(base, after, 5));
}

TEST(MakeModelTest, DistilBertOpset20UsesGeluAndAgrees) {
  auto g17 = MakeAndImport("distilbert", SmallDistilBert(17));
  auto g20 = MakeAndImport("distilbert", SmallDistilBert(20));
  ASSERT_NE(g17, nullptr);
  ASSERT_NE(g20, nullptr);
  const OpCounts layer20 = {
      {"MatMul", 8}, {"Add", 8},   {"Reshape", 5}, {"Transpose", 4},          {"Div", 1}, {"Equal", 1}, {"Expand", 1},
      {"Cast", 1},   {"Where", 1}, {"Softmax", 1}, {"LayerNormalization", 2}, {"Gelu", 1}};
  EXPECT_EQ(CountOps(*g20), Stack(layer20, 2, {{"Gather", 1}, {"Add", 1}, {"LayerNormalization", 1}}));
  const TensorMap feeds = TokenFeeds(*g17, 13);
  const std::vector<Tensor> o17 = Evaluate(*g17, feeds), o20 = Evaluate(*g20, feeds);
  ASSERT_EQ(o17.size(), 1u);
  ASSERT_EQ(o20.size(), 1u);
  EXPECT_LT(MaxAbsDiff(o17[0], o20[0]), 1e-4f);
}

// ---------------------------------------------------------------------------
// gpt2

const OpCounts kGpt2BlockOps = {{"LayerNormalization", 2},
                                {"Reshape", 12},
                                {"Gemm", 4},
                                {"Split", 1},
                                {"Transpose", 4},
                                {"MatMul", 2},
                                {"Div", 1},
                                {"Where", 1},
                                {"Softmax", 1},
                                {"Add", 4},
                                {"Mul", 4},
                                {"Pow", 1},
                                {"Tanh", 1}};

TEST(MakeModelTest, Gpt2) {
  const ModelOptions o = SmallDistilBert();  // B=2, S=8, H=32, A=4, F=64, 2 layers, vocab 100
  EXPECT_EQ(Total(kGpt2BlockOps), 38);
  const OpCounts outside = {{"Reshape", 2}, {"Gather", 2}, {"Add", 1}, {"LayerNormalization", 1}, {"MatMul", 1}};
  EXPECT_EQ(CountFileOps("gpt2", o), Stack(kGpt2BlockOps, 2, outside));
  auto graph = MakeAndImport("gpt2", o);
  ASSERT_NE(graph, nullptr);
  OpCounts imported = Stack(kGpt2BlockOps, 2, outside);
  imported["Gather"] = 1;  // the position Gather (constant indices) folds on import
  EXPECT_EQ(CountOps(*graph), imported);
  ASSERT_EQ(graph->inputs().size(), 1u);
  EXPECT_EQ(graph->inputs()[0]->name(), "input_ids");
  EXPECT_EQ(graph->inputs()[0]->dtype(), DType::kInt64);
  ASSERT_EQ(graph->outputs().size(), 1u);
  EXPECT_EQ(graph->outputs()[0]->name(), "logits");
  EXPECT_EQ(graph->outputs()[0]->shape(), (Shape{2, 8, 100}));

  const Tensor* wte = nullptr;
  const Tensor* lm_head = nullptr;
  for (const Node* node : graph->nodes()) {
    if (node->name() == "/transformer/wte/Gather") wte = &node->input(0)->constant();
    if (node->name() == "/lm_head/MatMul") lm_head = &node->input(1)->constant();
    if (node->name() == "/transformer/h.0/attn/c_attn/Gemm") {
      EXPECT_EQ(node->input(0)->shape(), (Shape{16, 32})) << "Conv1D flattens to [B*S, H]";
      EXPECT_EQ(node->input(1)->shape(), (Shape{32, 96})) << "Conv1D weight [in, out], no transB";
      EXPECT_FALSE(node->has_attr("transB"));
    }
  }
  // The LM head is tied to the token embedding: its weight is the [H,V] transpose.
  ASSERT_NE(wte, nullptr);
  ASSERT_NE(lm_head, nullptr);
  ASSERT_EQ(wte->shape(), (Shape{100, 32}));
  ASSERT_EQ(lm_head->shape(), (Shape{32, 100}));
  const std::vector<float> e = wte->ToFloat(), l = lm_head->ToFloat();
  for (int v = 0; v < 100; ++v) {
    for (int i = 0; i < 32; ++i) ASSERT_EQ(e[v * 32 + i], l[i * 100 + v]) << v << "," << i;
  }

  const TensorMap feeds = TokenFeeds(*graph, 14);
  const std::vector<Tensor> base = Evaluate(*graph, feeds);
  ASSERT_EQ(base.size(), 1u);
  ExpectFinite(base[0]);
  // Causality: a different last token changes only the last position's logits.
  TensorMap changed = feeds;
  for (int b = 0; b < 2; ++b) {
    int64_t& id = changed["input_ids"].mutable_data<int64_t>()[b * 8 + 7];
    id = (id + 31) % 100;
  }
  const std::vector<Tensor> after = Evaluate(*graph, changed);
  ASSERT_NO_FATAL_FAILURE(ExpectOnlyPositionChanged(base, after, 7, 100, /*exact=*/true));
}

// Nothing in GPT-2 changes form between opsets 17 and 20 (its GELU is explicit math).
TEST(MakeModelTest, Gpt2Opset20Agrees) {
  auto g17 = MakeAndImport("gpt2", SmallDistilBert(17));
  auto g20 = MakeAndImport("gpt2", SmallDistilBert(20));
  ASSERT_NE(g17, nullptr);
  ASSERT_NE(g20, nullptr);
  EXPECT_EQ(CountOps(*g17), CountOps(*g20));
  const TensorMap feeds = TokenFeeds(*g17, 15);
  const std::vector<Tensor> o17 = Evaluate(*g17, feeds), o20 = Evaluate(*g20, feeds);
  ASSERT_EQ(o17.size(), 1u);
  ASSERT_EQ(o20.size(), 1u);
  EXPECT_EQ(MaxAbsDiff(o17[0], o20[0]), 0.f);
}

}  // namespace
}  // namespace kiln::models
