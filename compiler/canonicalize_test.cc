// Tests for canonicalisation (RunCanonicalization, compiler/pipeline.h) on graphs that mirror kiln's generated models (BERT
// layer, GPT-2 block below opset 17) and a Conv + BN + Relu + Gemm network.
#include "compiler/pipeline.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/pass_test_util.h"
#include "graph/text_format.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectSameOutputs;
using ::kiln::pass_test::ExpectVerifies;
using ::kiln::pass_test::MustParse;
using ::kiln::pass_test::Print;

// "[v0, v1, ...]": n seeded values uniform in [-scale, scale] (+ offset).
std::string RandomData(int64_t n, uint32_t seed, float scale, float offset = 0.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<std::string> items;
  for (int64_t i = 0; i < n; ++i) items.push_back(FormatFloat(dist(rng) + offset));
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

std::map<std::string, int> OpCounts(const Graph& g) {
  std::map<std::string, int> counts;
  for (const Node* n : g.nodes()) ++counts[n->op_type()];
  return counts;
}

// Canonicalizes a copy of `text`'s graph, checks it verifies, that outputs keep
// their names and values, and that a second run changes nothing.
std::unique_ptr<Graph> CanonicalizeAndCheck(const std::string& text) {
  std::unique_ptr<Graph> before = MustParse(text);
  std::unique_ptr<Graph> g = before->Clone();
  auto changed = RunCanonicalization(*g);
  EXPECT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(changed.ok() && *changed);
  ExpectVerifies(*g);
  EXPECT_EQ(g->outputs().size(), before->outputs().size());
  for (size_t i = 0; i < g->outputs().size() && i < before->outputs().size(); ++i) {
    EXPECT_EQ(g->outputs()[i]->name(), before->outputs()[i]->name());
  }
  ExpectSameOutputs(*before, *g);
  const std::string once = Print(*g);
  auto again = RunCanonicalization(*g);
  EXPECT_TRUE(again.ok() && !*again);
  EXPECT_EQ(Print(*g), once);
  return g;
}

// The opset < 17 LayerNorm of models/model_builder.cc over %<in> : [.., H].
// `axes` is "attr" ({axes = [-1]}) or "input" (constant input, as imported).
std::string LayerNormText(const std::string& p, const std::string& in, const std::string& out, int64_t h, float eps,
                          bool axes_input, uint32_t seed) {
  const std::string reduce_x = axes_input ? absl::StrCat("ReduceMean(%", in, ", %", p, ".axes)")
                                          : absl::StrCat("ReduceMean(%", in, ") {axes = [-1]}");
  const std::string reduce_sq = axes_input ? absl::StrCat("ReduceMean(%", p, ".sq, %", p, ".axes)")
                                           : absl::StrCat("ReduceMean(%", p, ".sq) {axes = [-1]}");
  return absl::StrCat("  const %", p, ".weight : f32[", h, "] = ", RandomData(h, seed, 0.1f, 1.f), "\n", "  const %", p,
                      ".bias : f32[", h, "] = ", RandomData(h, seed + 1, 0.1f), "\n", "  const %", p,
                      ".two : f32[] = [2.0]\n", "  const %", p, ".eps : f32[] = [", FormatFloat(eps), "]\n",
                      "  const %", p, ".axes : i64[1] = [-1]\n", "  %", p, ".mean = ", reduce_x, " @/", p,
                      "/ReduceMean\n", "  %", p, ".d = Sub(%", in, ", %", p, ".mean) @/", p, "/Sub\n", "  %", p,
                      ".sq = Pow(%", p, ".d, %", p, ".two) @/", p, "/Pow\n", "  %", p, ".var = ", reduce_sq, " @/", p,
                      "/ReduceMean_1\n", "  %", p, ".ve = Add(%", p, ".var, %", p, ".eps) @/", p, "/Add\n", "  %", p,
                      ".std = Sqrt(%", p, ".ve) @/", p, "/Sqrt\n", "  %", p, ".n = Div(%", p, ".d, %", p, ".std) @/", p,
                      "/Div\n", "  %", p, ".s = Mul(%", p, ".n, %", p, ".weight) @/", p, "/Mul\n", "  %", out,
                      " = Add(%", p, ".s, %", p, ".bias) @/", p, "/Add_1\n");
}

// LinearMatMul: MatMul(x, W[in,out]) then Add(bias, ·).
std::string LinearText(const std::string& p, const std::string& in, const std::string& out, int64_t fin, int64_t fout,
                       uint32_t seed) {
  return absl::StrCat("  const %", p, ".weight : f32[", fin, ",", fout,
                      "] = ", RandomData(fin * fout, seed, 1.f / std::sqrt(static_cast<float>(fin))), "\n", "  const %",
                      p, ".bias : f32[", fout, "] = ", RandomData(fout, seed + 1, 0.1f), "\n", "  %", p,
                      ".mm = MatMul(%", in, ", %", p, ".weight) @/", p, "/MatMul\n", "  %", out, " = Add(%", p,
                      ".bias, %", p, ".mm) @/", p, "/Add\n");
}

// GeluErf below opset 20.
std::string GeluErfText(const std::string& p, const std::string& in, const std::string& out) {
  return absl::StrCat("  const %", p, ".sqrt2 : f32[] = [1.4142135]\n", "  const %", p, ".one : f32[] = [1.0]\n",
                      "  const %", p, ".half : f32[] = [0.5]\n", "  %", p, ".s = Div(%", in, ", %", p, ".sqrt2) @/", p,
                      "/Div\n", "  %", p, ".e = Erf(%", p, ".s) @/", p, "/Erf\n", "  %", p, ".p = Add(%", p, ".e, %", p,
                      ".one) @/", p, "/Add\n", "  %", p, ".m = Mul(%", in, ", %", p, ".p) @/", p, "/Mul\n", "  %", out,
                      " = Mul(%", p, ".m, %", p, ".half) @/", p, "/Mul_1\n");
}

// GeluTanh (GPT-2's NewGELUActivation).
std::string GeluTanhText(const std::string& p, const std::string& in, const std::string& out) {
  return absl::StrCat("  const %", p, ".half : f32[] = [0.5]\n", "  const %", p, ".three : f32[] = [3.0]\n",
                      "  const %", p, ".coeff : f32[] = [0.044715]\n", "  const %", p, ".k : f32[] = [0.7978846]\n",
                      "  const %", p, ".one : f32[] = [1.0]\n", "  %", p, ".hx = Mul(%", in, ", %", p, ".half) @/", p,
                      "/Mul\n", "  %", p, ".cube = Pow(%", in, ", %", p, ".three) @/", p, "/Pow\n", "  %", p,
                      ".cs = Mul(%", p, ".cube, %", p, ".coeff) @/", p, "/Mul_1\n", "  %", p, ".inner = Add(%", in,
                      ", %", p, ".cs) @/", p, "/Add\n", "  %", p, ".arg = Mul(%", p, ".inner, %", p, ".k) @/", p,
                      "/Mul_2\n", "  %", p, ".t = Tanh(%", p, ".arg) @/", p, "/Tanh\n", "  %", p, ".p1 = Add(%", p,
                      ".t, %", p, ".one) @/", p, "/Add_1\n", "  %", out, " = Mul(%", p, ".hx, %", p, ".p1) @/", p,
                      "/Mul_3\n");
}

TEST(CanonicalizeTest, BertLayerFeedForwardBelowOpset17) {
  // The second half of models/architectures.cc BertLayer (post-LN) at opset 13,
  // one LayerNorm with the axes attribute and one as the importer presents it,
  // plus an inference Dropout as torch exports leave it.
  const std::string text = absl::StrCat(
      "graph @main {\n  input %h : f32[2,4,8]\n  input %x : f32[2,4,8]\n", "  const %ratio : f32[] = [0.1]\n",
      "  %sum = Add(%h, %x) @/attention/output/Add\n",
      LayerNormText("attention.output.LayerNorm", "sum", "attn_out", 8, 1e-12f, false, 11),
      LinearText("intermediate.dense", "attn_out", "inter", 8, 16, 21), GeluErfText("intermediate.act", "inter", "act"),
      LinearText("output.dense", "act", "ffn", 16, 8, 31), "  %drop = Dropout(%ffn, %ratio) @/output/dropout/Dropout\n",
      "  %res = Add(%drop, %attn_out) @/output/Add\n",
      LayerNormText("output.LayerNorm", "res", "last_hidden_state", 8, 1e-12f, true, 41),
      "  output %last_hidden_state\n}\n");
  std::unique_ptr<Graph> g = CanonicalizeAndCheck(text);
  EXPECT_EQ(OpCounts(*g),
            (std::map<std::string, int>{{"Add", 4}, {"Gelu", 1}, {"LayerNormalization", 2}, {"MatMul", 2}}))
      << Print(*g);
  std::vector<std::string> names;
  for (const Node* n : g->nodes()) {
    if (n->op_type() == "Gelu" || n->op_type() == "LayerNormalization") names.push_back(n->name());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"/attention.output.LayerNorm/Add_1", "/intermediate.act/Mul_1",
                                             "/output.LayerNorm/Add_1"}));
  EXPECT_EQ(g->FindValue("last_hidden_state")->producer()->op_type(), "LayerNormalization");
}

TEST(CanonicalizeTest, Gpt2BlockMlpBelowOpset17) {
  // The pre-LN MLP half of models/architectures.cc Gpt2Block.
  const std::string text = absl::StrCat(
      "graph @main {\n  input %resid : f32[2,4,8]\n", LayerNormText("h.0.ln_2", "resid", "ln", 8, 1e-5f, true, 51),
      LinearText("h.0.mlp.c_fc", "ln", "fc", 8, 32, 61), GeluTanhText("h.0.mlp.act", "fc", "act"),
      LinearText("h.0.mlp.c_proj", "act", "proj", 32, 8, 71), "  %output = Add(%resid, %proj) @/h.0/Add_1\n",
      "  output %output\n}\n");
  std::unique_ptr<Graph> g = CanonicalizeAndCheck(text);
  EXPECT_EQ(OpCounts(*g),
            (std::map<std::string, int>{{"Add", 3}, {"Gelu", 1}, {"LayerNormalization", 1}, {"MatMul", 2}}))
      << Print(*g);
  for (const Node* n : g->nodes()) {
    if (n->op_type() == "Gelu") {
      EXPECT_EQ(n->GetString("approximate").value_or(""), "tanh");
    }
  }
}

TEST(CanonicalizeTest, ConvBatchNormReluAndGemmHead) {
  // A ResNet-style stem and classifier: Conv + BN + Relu, pooling, Flatten, Gemm
  // with transB (nn.Linear on a 2-D input), the weight coming from a Constant node
  // as some exporters spell it.
  const std::string text = absl::StrCat(R"(graph @main {
  input %x : f32[2,3,6,6]
  const %conv.weight : f32[4,3,3,3] = )",
                                        RandomData(108, 81, 0.3f), R"(
  const %conv.bias : f32[4] = )",
                                        RandomData(4, 82, 0.1f), R"(
  const %bn.weight : f32[4] = )",
                                        RandomData(4, 83, 0.2f, 1.f), R"(
  const %bn.bias : f32[4] = )",
                                        RandomData(4, 84, 0.1f), R"(
  const %bn.running_mean : f32[4] = )",
                                        RandomData(4, 85, 0.1f), R"(
  const %bn.running_var : f32[4] = )",
                                        RandomData(4, 86, 0.2f, 1.f), R"(
  const %fc.bias : f32[5] = )",
                                        RandomData(5, 87, 0.1f), R"(
  %c = Conv(%x, %conv.weight, %conv.bias) {pads = [1, 1, 1, 1]} @/conv1/Conv
  %b = BatchNormalization(%c, %bn.weight, %bn.bias, %bn.running_mean, %bn.running_var) {epsilon = 1e-05} @/bn1/BatchNormalization
  %r = Relu(%b) @/relu/Relu
  %p = GlobalAveragePool(%r) @/pool/GlobalAveragePool
  %f = Flatten(%p) @/Flatten
  %i = Identity(%f) @/Identity
  %w = Constant() {value = tensor<f32[5,4]> )",
                                        RandomData(20, 88, 0.5f), R"(} @/fc/Constant
  %logits = Gemm(%i, %w, %fc.bias) {alpha = 1.0, beta = 1.0, transB = 1} @/fc/Gemm
  output %logits
}
)");
  std::unique_ptr<Graph> g = CanonicalizeAndCheck(text);
  EXPECT_EQ(OpCounts(*g),
            (std::map<std::string, int>{
                {"Add", 1}, {"Conv", 1}, {"Flatten", 1}, {"GlobalAveragePool", 1}, {"MatMul", 1}, {"Relu", 1}}))
      << Print(*g);
  std::vector<std::string> names;
  for (const Node* n : g->nodes()) names.push_back(n->name());
  EXPECT_EQ(names, (std::vector<std::string>{"/conv1/Conv", "/relu/Relu", "/pool/GlobalAveragePool", "/Flatten",
                                             "/fc/Gemm", "/fc/Gemm/bias"}));
}

TEST(CanonicalizeTest, TransposedMatMulOperandsBecomeLayoutFlags) {
  // Gemm(transA) on a computed operand, Gemm(transB) on a weight a Constant node
  // produces, a swap Transpose and an attention key Transpose [0,2,3,1] feeding
  // MatMuls: computed operands end up read through trans_a / trans_b, the weight
  // row-major [K, N] without a flag, and only the row-preserving [0,2,1,3] copy
  // remains.
  std::unique_ptr<Graph> g = CanonicalizeAndCheck(absl::StrCat(R"(graph @main {
  input %x : f32[6,4]
  input %q : f32[1,2,5,3]
  input %k : f32[1,5,2,3]
  const %b : f32[5] = )",
                                                               RandomData(5, 91, 0.1f), R"(
  %r = Relu(%x) @/relu
  %w = Constant() {value = tensor<f32[5,6]> )",
                                                               RandomData(30, 92, 0.5f), R"(} @/fc/Constant
  %h = Gemm(%r, %w, %b) {transA = 1, transB = 1} @/fc/Gemm
  %ht = Transpose(%h) {perm = [1, 0]} @/ht
  %g = MatMul(%ht, %h) @/gram
  %kt = Transpose(%k) {perm = [0, 2, 3, 1]} @/kt
  %s = MatMul(%q, %kt) @/scores
  output %g
  output %s
}
)"));
  EXPECT_EQ(OpCounts(*g), (std::map<std::string, int>{{"Add", 1}, {"MatMul", 3}, {"Relu", 1}, {"Transpose", 1}}))
      << Print(*g);
  std::map<std::string, std::string> flags;  // MatMul name -> "ab", "a", "b" or ""
  for (const Node* n : g->nodes()) {
    if (n->op_type() == "Transpose") EXPECT_EQ(*n->GetInts("perm"), (std::vector<int64_t>{0, 2, 1, 3}));
    if (n->op_type() != "MatMul") continue;
    flags[n->name()] = absl::StrCat(*n->GetInt("trans_a", 0) ? "a" : "", *n->GetInt("trans_b", 0) ? "b" : "");
    if (n->name() == "/fc/Gemm") {
      ASSERT_TRUE(n->input(1)->is_constant());
      EXPECT_EQ(n->input(1)->shape(), (Shape{6, 5}));
    }
  }
  EXPECT_EQ(flags, (std::map<std::string, std::string>{{"/fc/Gemm", "a"}, {"/gram", "a"}, {"/scores", "b"}}));
}

TEST(CanonicalizeTest, NothingToDoReportsNoChange) {
  std::unique_ptr<Graph> g = MustParse(R"(
graph @main {
  input %x : f32[2,3]
  const %w : f32[3,2] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  %m = MatMul(%x, %w)
  %y = Relu(%m)
  output %y
}
)");
  const std::string before = Print(*g);
  auto changed = RunCanonicalization(*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(Print(*g), before);
}

}  // namespace
}  // namespace kiln
