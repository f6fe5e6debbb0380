// Helpers of the model generator tests (models/make_model_test.cc,
// make_model_text_test.cc, make_model_vision_test.cc): op counts, writing and
// importing a model, random feeds, the CPU reference and its checks.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
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

namespace kiln::models::model_test {

using OpCounts = std::map<std::string, int>;

inline OpCounts CountOps(const Graph& graph) {
  OpCounts counts;
  for (const Node* node : graph.nodes()) ++counts[node->op_type()];
  return counts;
}

// Op counts of the ONNX file itself (before kiln's import folds constant subgraphs).
inline OpCounts CountFileOps(const std::string& name, const ModelOptions& options) {
  auto model = MakeModel(name, options);
  EXPECT_TRUE(model.ok()) << model.status();
  OpCounts counts;
  if (model.ok()) {
    for (const onnx::NodeProto& node : model->graph().node()) ++counts[node.op_type()];
  }
  return counts;
}

inline int Total(const OpCounts& counts) {
  int n = 0;
  for (const auto& [op, c] : counts) n += c;
  return n;
}

// `per_layer` times `layers`, plus `extra`.
inline OpCounts Stack(const OpCounts& per_layer, int layers, const OpCounts& extra) {
  OpCounts out = extra;
  for (const auto& [op, n] : per_layer) out[op] += layers * n;
  return out;
}

// A per-process, per-test folder: ctest runs the cases of this binary in parallel.
inline std::string TempPath(const std::string& file) {
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / absl::StrCat("kiln_models_test_", getpid()) / test;
  std::filesystem::create_directories(dir);
  return (dir / file).string();
}

// Small sizes so the CPU reference is quick.
inline ModelOptions SmallTransformer(int64_t opset = 17) {
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
inline std::unique_ptr<Graph> MakeAndImport(const std::string& name, const ModelOptions& options) {
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
inline TensorMap RandomFeeds(const Graph& graph, uint32_t seed, TensorMap feeds = {}) {
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

inline std::vector<Tensor> Evaluate(const Graph& graph, const TensorMap& feeds) {
  auto outputs = EvaluateGraph(graph, feeds);
  EXPECT_TRUE(outputs.ok()) << outputs.status();
  return outputs.ok() ? *outputs : std::vector<Tensor>{};
}

inline void ExpectFinite(const Tensor& t) {
  const std::vector<float> v = t.ToFloat();
  for (size_t i = 0; i < v.size(); ++i) ASSERT_TRUE(std::isfinite(v[i])) << "element " << i << " is " << v[i];
}

inline float MaxAbsDiff(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.ToFloat(), y = b.ToFloat();
  EXPECT_EQ(x.size(), y.size());
  float d = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) d = std::max(d, std::abs(x[i] - y[i]));
  return d;
}

// The per-element spread of the rows of a [.., H] output after LayerNorm: rows must
// not collapse to a constant.
// `base` and `after` (one output each, [2, 8, width]: batch, positions, features)
// differ at position `changed` of every batch entry and nowhere else: a change there
// reached no other position (a causal or padding-masked model). `exact`: the other
// positions equal to the bit, else within 1e-5.
inline void ExpectOnlyPositionChanged(const std::vector<Tensor>& base, const std::vector<Tensor>& after, int changed,
                                      int width = 32, bool exact = false) {
  ASSERT_EQ(base.size(), 1u);
  ASSERT_EQ(after.size(), 1u);
  const std::vector<float> a = base[0].ToFloat(), c = after[0].ToFloat();
  for (int b = 0; b < 2; ++b) {
    for (int s = 0; s < 8; ++s) {
      float diff = 0;
      for (int i = 0; i < width; ++i) {
        diff = std::max(diff, std::abs(a[(b * 8 + s) * width + i] - c[(b * 8 + s) * width + i]));
      }
      if (s == changed) {
        EXPECT_GT(diff, 1e-3f) << "the changed position itself must change";
      } else if (exact) {
        EXPECT_EQ(diff, 0.f) << "batch " << b << " position " << s << " sees position " << changed;
      } else {
        EXPECT_LT(diff, 1e-5f) << "batch " << b << " position " << s;
      }
    }
  }
}

inline void ExpectRowsVary(const Tensor& t) {
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

inline ModelOptions SmallDistilBert(int64_t opset = 17) {
  ModelOptions o = SmallTransformer(opset);
  o.layers = 2;
  o.vocab = 100;
  return o;
}

inline ModelOptions SmallVit(int64_t opset = 17) {
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

inline ModelOptions SmallCnn() {
  ModelOptions o;
  o.batch = 2;
  o.image = 32;
  o.classes = 10;
  return o;
}

}  // namespace kiln::models::model_test
