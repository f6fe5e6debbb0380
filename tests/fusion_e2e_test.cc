// Fusion end to end on whole models (CPU reference, no GPU): canonicalised and fused
// graphs compute what the imported graph computes, every group kind included, and
// fusion cuts the kernel count. Models: kiln's generated BERT layer, GPT-2 block,
// MLP and CNN; ResNet-50 and the other light models when KILN_ONNX_DATA is set.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "frontend/onnx_importer.h"
#include "compiler/pipeline.h"
#include "graph/evaluate.h"
#include "graph/fused_group.h"
#include "graph/infer_shapes.h"
#include "graph/text_format.h"
#include "gtest/gtest.h"
#include "models/architectures.h"

namespace kiln {
namespace {

TensorMap RandomFeeds(const Graph& g, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  TensorMap feeds;
  for (const Value* in : g.inputs()) {
    std::vector<float> v(in->numel());
    for (float& x : v) x = IsFloating(in->dtype()) ? uni(rng) : static_cast<float>(rng() % 7);
    feeds[in->name()] = Tensor::FromFloat(in->dtype(), in->shape(), v);
  }
  return feeds;
}

double RelativeError(const Tensor& got, const Tensor& want) {
  const std::vector<float> g = got.ToFloat(), w = want.ToFloat();
  if (g.size() != w.size()) return INFINITY;
  double err = 0, scale = 1e-6;
  for (size_t i = 0; i < g.size(); ++i) {
    err = std::max(err, static_cast<double>(std::fabs(g[i] - w[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(w[i])));
  }
  return err / scale;
}

struct Counts {
  int imported = 0, canonical = 0, fused = 0;
  std::set<std::string> patterns;
};

// Imports `onnx`, checks canonicalised and fused graphs against the imported one.
Counts CheckModel(const std::string& onnx, const std::string& name, const TensorMap* given_feeds = nullptr) {
  Counts c;
  auto graph = ImportOnnxFile(onnx);
  EXPECT_TRUE(graph.ok()) << graph.status();
  if (!graph.ok()) return c;
  c.imported = (*graph)->num_nodes();
  const TensorMap feeds = given_feeds ? *given_feeds : RandomFeeds(**graph, 3);
  auto reference = EvaluateGraph(**graph, feeds);
  EXPECT_TRUE(reference.ok()) << reference.status();

  std::unique_ptr<Graph> canonical = (*graph)->Clone();
  EXPECT_TRUE(RunCanonicalization(*canonical).ok());
  c.canonical = canonical->num_nodes();
  std::unique_ptr<Graph> fused = canonical->Clone();
  auto report = RunFusion(*fused);
  EXPECT_TRUE(report.ok()) << report.status();
  c.fused = fused->num_nodes();
  for (const Node* n : fused->nodes()) {
    if (IsFusedGroup(*n)) c.patterns.insert(*n->GetString("pattern"));
  }
  for (const auto* g : {canonical.get(), fused.get()}) {
    auto got = EvaluateGraph(*g, feeds);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok() || !reference.ok()) continue;
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_LE(RelativeError((*got)[i], (*reference)[i]), 1e-4)
          << name << (g == fused.get() ? " fused" : " canonical") << " output " << i;
    }
  }
  std::string kinds;
  for (const std::string& p : c.patterns) absl::StrAppend(&kinds, kinds.empty() ? "" : ", ", p);
  std::cout << absl::StrFormat("[ fusion ] %-20s kernels per inference: %4d imported, %4d canonical, %4d fused (%s)\n",
                               name, c.imported, c.canonical, c.fused, kinds);
  return c;
}

std::string Generated(const std::string& name) {
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / absl::StrCat(name, "_", ::getpid(), ".onnx")).string();
  models::ModelOptions options;
  if (name == "bert_layer" || name == "gpt2_block") options.seq = 32;
  auto model = models::MakeModel(name, options);
  EXPECT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE(models::WriteModel(*model, path).ok());
  return path;
}

TEST(FusionE2eTest, GeneratedModelsFusedEqualUnfused) {
  std::set<std::string> all;
  for (const std::string name : {"mlp", "tiny_cnn", "bert_layer", "gpt2_block"}) {
    Counts c = CheckModel(Generated(name), name);
    EXPECT_LT(c.fused, c.canonical) << name << ": fusion formed nothing";
    all.insert(c.patterns.begin(), c.patterns.end());
  }
  // Every group kind the transformer and CNN blocks contain was checked numerically.
  for (const char* kind : {"matmul+epilogue", "conv+epilogue"}) {
    EXPECT_TRUE(all.count(kind)) << "no '" << kind << "' group formed";
  }
}

TEST(FusionE2eTest, GemmTransposedComputedOperandReadsThroughLayoutFlag) {
  // Gemm(transA=1, transB=1) whose A is computed (another MatMul's product) and B a
  // weight, then Relu: canonicalisation leaves one MatMul reading A through trans_a
  // and a row-major [K, N] weight, with no Transpose node; fusion makes it a
  // matmul+epilogue group whose body keeps the flag; both equal the imported graph.
  auto parsed = ParseGraph(R"(
graph @main {
  input %x : f32[8,16]
  const %w0 : f32[16,10] = splat(0.0)
  const %w : f32[6,8] = splat(0.0)
  const %b : f32[6] = splat(0.0)
  %h = MatMul(%x, %w0) @/proj/MatMul
  %g = Gemm(%h, %w, %b) {transA = 1, transB = 1} @/fc/Gemm
  %y = Relu(%g) @/fc/Relu
  output %y
}
)");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  Graph& imported = **parsed;
  ASSERT_TRUE(InferShapes(imported, {.fold_constants = false}).ok());
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (Value* c : imported.constants()) {
    std::vector<float> v(c->numel());
    for (float& e : v) e = uni(rng);
    imported.SetConstant(c, Tensor::FromFloat(c->dtype(), c->shape(), v));
  }
  const TensorMap feeds = RandomFeeds(imported, 5);
  auto reference = EvaluateGraph(imported, feeds);
  ASSERT_TRUE(reference.ok()) << reference.status();

  std::unique_ptr<Graph> canonical = imported.Clone();
  ASSERT_TRUE(RunCanonicalization(*canonical).ok());
  int transposes = 0;
  const Node* fc = nullptr;
  for (const Node* n : canonical->nodes()) {
    transposes += n->op_type() == "Transpose";
    if (n->name() == "/fc/Gemm") fc = n;
  }
  EXPECT_EQ(transposes, 0) << PrintGraph(*canonical);
  ASSERT_NE(fc, nullptr) << PrintGraph(*canonical);
  EXPECT_EQ(fc->op_type(), "MatMul");
  EXPECT_EQ(*fc->GetInt("trans_a", 0), 1);
  EXPECT_EQ(*fc->GetInt("trans_b", 0), 0);
  EXPECT_TRUE(fc->input(1)->is_constant());
  EXPECT_EQ(fc->input(1)->shape(), (Shape{8, 6}));

  std::unique_ptr<Graph> fused = canonical->Clone();
  auto report = RunFusion(*fused);
  ASSERT_TRUE(report.ok()) << report.status();
  const Node* group = nullptr;
  for (const Node* n : fused->nodes()) {
    if (IsFusedGroup(*n)) group = n;
  }
  ASSERT_NE(group, nullptr) << PrintGraph(*fused);
  EXPECT_EQ(*group->GetString("pattern"), "matmul+epilogue");
  auto body = FusedGroupBody(*group);
  ASSERT_TRUE(body.ok()) << body.status();
  int flagged = 0;
  for (const Node* n : (*body)->nodes()) flagged += n->op_type() == "MatMul" && *n->GetInt("trans_a", 0) == 1;
  EXPECT_EQ(flagged, 1) << PrintGraph(**body);

  for (const Graph* g : {canonical.get(), fused.get()}) {
    auto got = EvaluateGraph(*g, feeds);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), reference->size());
    EXPECT_LE(RelativeError((*got)[0], (*reference)[0]), 1e-5) << (g == fused.get() ? "fused" : "canonical");
  }
}

TEST(FusionE2eTest, LightModelsFusedEqualUnfused) {
  const char* data = std::getenv("KILN_ONNX_DATA");
  if (data == nullptr) GTEST_SKIP() << "skipped: KILN_ONNX_DATA is not set";
  const std::filesystem::path light = std::filesystem::path(data) / "light";
  if (!std::filesystem::is_directory(light)) GTEST_SKIP() << "skipped: no " << light;
  std::set<std::string> all;
  for (const char* name : {"light_resnet50", "light_squeezenet", "light_shufflenet", "light_inception_v1"}) {
    auto graph = ImportOnnxFile((light / (std::string(name) + ".onnx")).string());
    ASSERT_TRUE(graph.ok()) << graph.status();
    // The input the expected outputs were made with: arange(n)/n.
    const Value* in = (*graph)->inputs()[0];
    std::vector<float> v(in->numel());
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) / v.size();
    TensorMap feeds{{in->name(), Tensor::FromFloat(in->dtype(), in->shape(), v)}};
    Counts c = CheckModel((light / (std::string(name) + ".onnx")).string(), name, &feeds);
    EXPECT_LT(c.fused, c.imported) << name;
    all.insert(c.patterns.begin(), c.patterns.end());
  }
  // The residual Sums (sum-to-add) join their conv's epilogue, so no pointwise group
  // is left in these four.
  EXPECT_TRUE(all.count("conv+epilogue")) << "no 'conv+epilogue' group formed";
  EXPECT_TRUE(all.count("matmul+epilogue")) << "no 'matmul+epilogue' group formed";
}

}  // namespace
}  // namespace kiln
