// Tests for the model generators: each model at a small size is written, imported
// with kiln's ONNX importer, checked for its op pattern and output shapes, and run
// on the CPU reference.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "frontend/onnx_importer.h"
#include "graph/evaluate.h"
#include "models/architectures.h"
#include "models/model_builder.h"

namespace kiln::models {
namespace {

using OpCounts = std::map<std::string, int>;

OpCounts CountOps(const Graph& graph) {
  OpCounts counts;
  for (const Node* node : graph.nodes()) ++counts[node->op_type()];
  return counts;
}

// Op counts of the ONNX file itself (before kiln's import folds constant subgraphs).
OpCounts CountFileOps(const std::string& name, const ModelOptions& options) {
  auto model = MakeModel(name, options);
  EXPECT_TRUE(model.ok()) << model.status();
  OpCounts counts;
  if (model.ok()) {
    for (const onnx::NodeProto& node : model->graph().node()) ++counts[node.op_type()];
  }
  return counts;
}

int Total(const OpCounts& counts) {
  int n = 0;
  for (const auto& [op, c] : counts) n += c;
  return n;
}

// `per_layer` times `layers`, plus `extra`.
OpCounts Stack(const OpCounts& per_layer, int layers, const OpCounts& extra) {
  OpCounts out = extra;
  for (const auto& [op, n] : per_layer) out[op] += layers * n;
  return out;
}

// A per-process, per-test folder: ctest runs the cases of this binary in parallel.
std::string TempPath(const std::string& file) {
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / absl::StrCat("kiln_models_test_", getpid()) / test;
  std::filesystem::create_directories(dir);
  return (dir / file).string();
}

// Small sizes so the CPU reference is quick.
ModelOptions SmallTransformer(int64_t opset = 17) {
  ModelOptions o;
  o.batch = 2;
  o.seq = 8;
  o.hidden = 32;
  o.heads = 4;
  o.ffn = 64;
  o.opset = opset;
  return o;
}

// Writes the model, imports it from the file and returns the graph.
std::unique_ptr<Graph> MakeAndImport(const std::string& name, const ModelOptions& options) {
  auto model = MakeModel(name, options);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return nullptr;
  const std::string path = TempPath(absl::StrCat(name, "_opset", options.opset, ".onnx"));
  const absl::Status written = WriteModel(*model, path);
  EXPECT_TRUE(written.ok()) << written;
  auto graph = ImportOnnxFile(path);
  EXPECT_TRUE(graph.ok()) << graph.status();
  // The graph holds its constants in memory: the file is no longer needed.
  const std::filesystem::path test_dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  std::filesystem::remove_all(test_dir, ec);
  std::filesystem::remove(test_dir.parent_path(), ec);  // only when empty
  return graph.ok() ? std::move(*graph) : nullptr;
}

// Random feeds: floats N(0,1), int64 ids in [0, 100), attention masks all zeros
// except where `feeds` already has a value.
TensorMap RandomFeeds(const Graph& graph, uint32_t seed, TensorMap feeds = {}) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  for (const Value* in : graph.inputs()) {
    if (feeds.count(in->name())) continue;
    std::vector<float> values(in->numel());
    if (in->name() == "attention_mask") {
      // all positions visible
    } else if (in->dtype() == DType::kInt64) {
      for (float& v : values) v = static_cast<float>(rng() % 100);
    } else {
      for (float& v : values) v = normal(rng);
    }
    feeds[in->name()] = Tensor::FromFloat(in->dtype(), in->shape(), values);
  }
  return feeds;
}

std::vector<Tensor> Evaluate(const Graph& graph, const TensorMap& feeds) {
  auto outputs = EvaluateGraph(graph, feeds);
  EXPECT_TRUE(outputs.ok()) << outputs.status();
  return outputs.ok() ? *outputs : std::vector<Tensor>{};
}

void ExpectFinite(const Tensor& t) {
  const std::vector<float> v = t.ToFloat();
  for (size_t i = 0; i < v.size(); ++i) ASSERT_TRUE(std::isfinite(v[i])) << "element " << i << " is " << v[i];
}

float MaxAbsDiff(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.ToFloat(), y = b.ToFloat();
  EXPECT_EQ(x.size(), y.size());
  float d = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) d = std::max(d, std::abs(x[i] - y[i]));
  return d;
}

// The per-element spread of the rows of a [.., H] output after LayerNorm: rows must
// not collapse to a constant.
void ExpectRowsVary(const Tensor& t) {
  const std::vector<float> v = t.ToFloat();
  const int64_t h = t.shape().back();
  for (size_t r = 0; r < v.size() / h; ++r) {
    float lo = v[r * h], hi = v[r * h];
    for (int64_t i = 0; i < h; ++i) {
      lo = std::min(lo, v[r * h + i]);
      hi = std::max(hi, v[r * h + i]);
    }
    ASSERT_GT(hi - lo, 0.1f) << "row " << r;
  }
}

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
  ASSERT_EQ(base.size(), 1u);
  ASSERT_EQ(after.size(), 1u);
  const std::vector<float> a = base[0].ToFloat(), c = after[0].ToFloat();
  for (int b = 0; b < 2; ++b) {
    for (int s = 0; s < 8; ++s) {
      float diff = 0;
      for (int i = 0; i < 32; ++i) diff = std::max(diff, std::abs(a[(b * 8 + s) * 32 + i] - c[(b * 8 + s) * 32 + i]));
      if (s == 5) {
        EXPECT_GT(diff, 1e-3f) << "the changed position itself must change";
      } else {
        EXPECT_LT(diff, 1e-5f) << "batch " << b << " position " << s;
      }
    }
  }
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
  ASSERT_EQ(after.size(), 1u);
  const std::vector<float> a = base[0].ToFloat(), c = after[0].ToFloat();
  for (int b = 0; b < 2; ++b) {
    for (int s = 0; s < 8; ++s) {
      float diff = 0;
      for (int i = 0; i < 32; ++i) diff = std::max(diff, std::abs(a[(b * 8 + s) * 32 + i] - c[(b * 8 + s) * 32 + i]));
      if (s == 7) {
        EXPECT_GT(diff, 1e-3f);
      } else {
        EXPECT_EQ(diff, 0.f) << "batch " << b << " position " << s << " sees a later token";
      }
    }
  }
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

ModelOptions SmallDistilBert(int64_t opset = 17) {
  ModelOptions o = SmallTransformer(opset);
  o.layers = 2;
  o.vocab = 100;
  return o;
}

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
  ASSERT_EQ(base.size(), 1u);
  ASSERT_EQ(after.size(), 1u);
  const std::vector<float> a = base[0].ToFloat(), c = after[0].ToFloat();
  for (int b = 0; b < 2; ++b) {
    for (int s = 0; s < 8; ++s) {
      float diff = 0;
      for (int i = 0; i < 32; ++i) diff = std::max(diff, std::abs(a[(b * 8 + s) * 32 + i] - c[(b * 8 + s) * 32 + i]));
      if (s == 5) {
        EXPECT_GT(diff, 1e-3f) << "the changed token itself must change";
      } else {
        EXPECT_LT(diff, 1e-5f) << "batch " << b << " position " << s;
      }
    }
  }
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
  ASSERT_EQ(after.size(), 1u);
  const std::vector<float> a = base[0].ToFloat(), c = after[0].ToFloat();
  for (int b = 0; b < 2; ++b) {
    for (int s = 0; s < 8; ++s) {
      float diff = 0;
      for (int v = 0; v < 100; ++v) {
        diff = std::max(diff, std::abs(a[(b * 8 + s) * 100 + v] - c[(b * 8 + s) * 100 + v]));
      }
      if (s == 7) {
        EXPECT_GT(diff, 1e-3f);
      } else {
        EXPECT_EQ(diff, 0.f) << "batch " << b << " position " << s << " sees a later token";
      }
    }
  }
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

// ---------------------------------------------------------------------------
// vit_b16

ModelOptions SmallVit(int64_t opset = 17) {
  ModelOptions o;
  o.batch = 2;
  o.image = 32;  // 2x2 patches of 16x16 + the class token: 5 tokens
  o.hidden = 32;
  o.heads = 4;
  o.ffn = 64;
  o.layers = 2;
  o.classes = 10;
  o.opset = opset;
  return o;
}

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

ModelOptions SmallCnn() {
  ModelOptions o;
  o.batch = 2;
  o.image = 32;
  o.classes = 10;
  return o;
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
