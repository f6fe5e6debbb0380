// Tests for FuseSiblings: the shared-input rewrite (expected text), dual-matmul
// groups, must-not-fire cases, and fused == unfused on the CPU reference.
#include "fusion/fuse_siblings.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "fusion/fuse_epilogue.h"
#include "fusion/fusion_test_util.h"
#include "graph/infer_shapes.h"
#include "graph/specialize.h"

namespace kiln {
namespace {

using ::kiln::testing::ExpectOneRejection;
using ::kiln::testing::ExpectSameResults;
using ::kiln::testing::ExpectValid;
using ::kiln::testing::Groups;
using ::kiln::testing::ParseTyped;
using ::kiln::testing::RandomizeConstants;
using ::kiln::testing::Summary;

// Runs FuseSiblings on `text` (constants randomised with seed 5); see testing::RunFusionPass.
std::unique_ptr<Graph> FuseAndCheck(const std::string& text, FusionReport* report, bool* changed = nullptr) {
  return ::kiln::testing::RunFusionPass<FuseSiblings>(text, report, 5, changed);
}

TEST(FuseSiblingsTest, ConcatenatesWeightsOfSharedInput) {
  std::unique_ptr<Graph> g = ParseTyped(R"(
graph @main {
  input %x : f32[3,2]
  const %wq : f32[2,1] = [1.0, 2.0]
  const %wk : f32[2,2] = [3.0, 4.0, 5.0, 6.0]
  %q = MatMul(%x, %wq) @q
  %k = MatMul(%x, %wk) @k
  %r = Relu(%k) @relu
  output %q
  output %r
}
)");
  FusionReport report;
  ASSERT_TRUE(*FuseSiblings(&report).Run(*g));
  ExpectValid(*g);
  // Column block i of the new weight is W_i: rows [1 | 3 4] and [2 | 5 6].
  EXPECT_EQ(PrintGraph(*g), R"(graph @main {
  input %x : f32[3,2]
  const %q/siblings_weight : f32[2,3] = [1.0, 3.0, 4.0, 2.0, 5.0, 6.0]
  const %q/split_sizes : i64[2] = [1, 2]
  %q/siblings_out : f32[3,3] = MatMul(%x, %q/siblings_weight) @q/siblings
  %q : f32[3,1], %k : f32[3,2] = Split(%q/siblings_out, %q/split_sizes) {axis = -1} @q/split
  %r : f32[3,2] = Relu(%k) @relu
  output %q
  output %r
}
)");
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].pass, "fuse-siblings");
  EXPECT_EQ(report.groups[0].name, "q/siblings");
  EXPECT_EQ(report.groups[0].pattern, "siblings");
  EXPECT_EQ(report.groups[0].members, (std::vector<std::string>{"q", "k"}));
}

TEST(FuseSiblingsTest, QkvOnBatchedInputMatchesReference) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[2,5,16]
  const %wq : f32[16,8] = splat(0.5)
  const %wk : f32[16,8] = splat(0.5)
  const %wv : f32[16,12] = splat(0.5)
  %q = MatMul(%x, %wq) @q
  %k = MatMul(%x, %wk) @k
  %v = MatMul(%x, %wv) @v
  %kt = Transpose(%k) {perm = [0, 2, 1]} @kt
  %s = MatMul(%q, %kt) @scores
  %o = MatMul(%s, %v) @out
  output %o
}
)",
                        &report);
  EXPECT_EQ(Summary(*g), "MatMul @q/siblings\nSplit @q/split\nTranspose @kt\nMatMul @scores\nMatMul @out\n");
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].members, (std::vector<std::string>{"q", "k", "v"}));
}

// Each sibling's bias Add is pulled above the Split as one concatenated bias, so the
// merged MatMul can take it as an epilogue; results are unchanged (RunFusionPass
// compares with the unfused graph on random inputs and constants).
TEST(FuseSiblingsTest, ConcatenatesBiasesWhenEverySiblingHasOne) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[2,5,16]
  const %wq : f32[16,8] = splat(0.5)
  const %wk : f32[16,8] = splat(0.5)
  const %wv : f32[16,12] = splat(0.5)
  const %bq : f32[8] = splat(0.1)
  const %bk : f32[1,8] = splat(0.2)
  const %bv : f32[12] = splat(0.3)
  %q0 = MatMul(%x, %wq) @q
  %k0 = MatMul(%x, %wk) @k
  %v0 = MatMul(%x, %wv) @v
  %q = Add(%q0, %bq) @q_bias
  %k = Add(%bk, %k0) @k_bias
  %v = Add(%v0, %bv) @v_bias
  %s = Add(%q, %k) @sum
  output %s
  output %v
}
)",
                        &report);
  EXPECT_EQ(Summary(*g), "MatMul @q/siblings\nAdd @q/siblings_bias_add\nSplit @q/split\nAdd @sum\n");
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].members,
            (std::vector<std::string>{"q", "q_bias", "k", "k_bias", "v", "v_bias"}));
  const Value* bias = g->FindValue("q/siblings_bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->shape(), (Shape{28}));

  // One sibling without a bias: it gets zeros, and the bias still goes above the
  // Split (equal widths: the stacked layout, each piece reshaped back to [3, 2]).
  FusionReport partial;
  auto h = FuseAndCheck(R"(
graph @main {
  input %x : f32[3,4]
  const %wq : f32[4,2] = splat(0.5)
  const %wk : f32[4,2] = splat(0.5)
  const %bq : f32[2] = splat(0.1)
  %q0 = MatMul(%x, %wq) @q
  %k = MatMul(%x, %wk) @k
  %q = Add(%q0, %bq) @q_bias
  %s = Mul(%q, %k) @prod
  output %s
}
)",
                        &partial);
  EXPECT_EQ(Summary(*h),
            "MatMul @q/siblings\nAdd @q/siblings_bias_add\nSplit @q/split\nReshape @q/unstack0\n"
            "Reshape @q/unstack1\nMul @prod\n");
  ASSERT_EQ(partial.groups.size(), 1u);
  EXPECT_EQ(partial.groups[0].members, (std::vector<std::string>{"q", "q_bias", "k"}));
}

// Widths that differ and one bias: the concatenated layout, its bias zero over the
// bias-less sibling's columns.
TEST(FuseSiblingsTest, ConcatenatedBiasHasZerosForASiblingWithout) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[3,4]
  const %wq : f32[4,2] = splat(0.5)
  const %wk : f32[4,3] = splat(0.25)
  const %bq : f32[2] = [0.5, -0.5]
  %q0 = MatMul(%x, %wq) @q
  %k = MatMul(%x, %wk) @k
  %q = Add(%bq, %q0) @q_bias
  %s = ReduceSum(%k) {keepdims = 0}
  %t = Mul(%q, %s) @prod
  output %t
}
)",
                        &report);
  EXPECT_EQ(Summary(*g),
            "MatMul @q/siblings\nAdd @q/siblings_bias_add\nSplit @q/split\nReduceSum @ReduceSum_3\nMul @prod\n");
  const Value* bias = g->FindValue("q/siblings_bias");
  ASSERT_NE(bias, nullptr);
  const std::vector<float> b = bias->constant().ToFloat();  // q's (randomised) bias, then k's zeros
  ASSERT_EQ(b.size(), 5u);
  EXPECT_NE(b[0], 0.f);
  EXPECT_EQ(std::count(b.begin() + 2, b.end(), 0.f), 3);
}

// Whisper's self-attention projections as the legacy exporter writes them (cut from
// whisper_encoder.legacy in the zoo, width 64 -> 8): q_proj and v_proj add their
// bias as Add(bias, product), k_proj has none, q is then scaled. One stacked MatMul
// with one bias [3, 1, 8] whose k rows are zeros; the scale stays on q's piece.
TEST(FuseSiblingsTest, WhisperProjectionsShareOneBiasWithZerosForK) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %h : f32[1,6,8]
  const %wq : f32[8,8] = splat(0.5)
  const %wk : f32[8,8] = splat(0.5)
  const %wv : f32[8,8] = splat(0.5)
  const %bq : f32[8] = splat(0.1)
  const %bv : f32[8] = splat(0.3)
  const %scale : f32[] = [0.125]
  const %heads : i64[4] = [1, 6, 2, 4]
  %q0 = MatMul(%h, %wq) @/m/layers.0/self_attn/q_proj/MatMul
  %q1 = Add(%bq, %q0) @/m/layers.0/self_attn/q_proj/Add
  %q = Mul(%q1, %scale) @/m/layers.0/self_attn/Mul
  %k0 = MatMul(%h, %wk) @/m/layers.0/self_attn/k_proj/MatMul
  %k = Reshape(%k0, %heads) @/m/layers.0/self_attn/Reshape_1
  %v0 = MatMul(%h, %wv) @/m/layers.0/self_attn/v_proj/MatMul
  %v1 = Add(%bv, %v0) @/m/layers.0/self_attn/v_proj/Add
  %v = Reshape(%v1, %heads) @/m/layers.0/self_attn/Reshape_2
  output %q
  output %k
  output %v
}
)",
                        &report);
  EXPECT_EQ(Summary(*g),
            "MatMul @/m/layers.0/self_attn/q_proj/MatMul/siblings\n"
            "Add @/m/layers.0/self_attn/q_proj/MatMul/siblings_bias_add\n"
            "Split @/m/layers.0/self_attn/q_proj/MatMul/split\nMul @/m/layers.0/self_attn/Mul\n"
            "Reshape @/m/layers.0/self_attn/Reshape_1\nReshape @/m/layers.0/self_attn/Reshape_2\n");
  const Value* bias = g->FindValue("/m/layers.0/self_attn/q_proj/MatMul/siblings_bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->shape(), (Shape{3, 1, 8}));
  const std::vector<float> b = bias->constant().ToFloat();
  EXPECT_EQ(std::count(b.begin() + 8, b.begin() + 16, 0.f), 8);  // k's rows
  EXPECT_NE(b[0], 0.f);
  EXPECT_NE(b[16], 0.f);
}

// Equal widths, batch 1: W stacked as [S, K, N], the bias as [S, 1, N], a Split along
// axis 0 whose pieces are the siblings' outputs as they were (no Reshape).
TEST(FuseSiblingsTest, StacksEqualWidthSiblings) {
  std::unique_ptr<Graph> g = ParseTyped(R"(
graph @main {
  input %x : f32[1,3,2]
  const %wq : f32[2,2] = [1.0, 2.0, 3.0, 4.0]
  const %wk : f32[2,2] = [5.0, 6.0, 7.0, 8.0]
  const %bq : f32[2] = [0.5, 0.25]
  const %bk : f32[1,2] = [-1.0, -2.0]
  %q0 = MatMul(%x, %wq) @q
  %k0 = MatMul(%x, %wk) @k
  %q = Add(%q0, %bq) @q_bias
  %k = Add(%bk, %k0) @k_bias
  %t = Transpose(%k) {perm = [0, 2, 1]} @kt
  %s = MatMul(%q, %t) @scores
  output %s
}
)");
  std::unique_ptr<Graph> original = g->Clone();
  FusionReport report;
  ASSERT_TRUE(*FuseSiblings(&report).Run(*g));
  ExpectValid(*g);
  ExpectSameResults(*original, *g);
  EXPECT_EQ(PrintGraph(*g), R"(graph @main {
  input %x : f32[1,3,2]
  const %q/siblings_weight : f32[2,2,2] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
  const %q/siblings_bias : f32[2,1,2] = [0.5, 0.25, -1.0, -2.0]
  const %q/split_sizes : i64[2] = splat(1)
  %q/siblings_out : f32[2,3,2] = MatMul(%x, %q/siblings_weight) @q/siblings
  %q/siblings_biased : f32[2,3,2] = Add(%q/siblings_out, %q/siblings_bias) @q/siblings_bias_add
  %q : f32[1,3,2], %k : f32[1,3,2] = Split(%q/siblings_biased, %q/split_sizes) {axis = 0} @q/split
  %t : f32[1,2,3] = Transpose(%k) {perm = [0, 2, 1]} @kt
  %s : f32[1,3,3] = MatMul(%q, %t) @scores
  output %s
}
)");
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].name, "q/siblings");
  EXPECT_EQ(report.groups[0].pattern, "siblings");
  EXPECT_EQ(report.groups[0].members, (std::vector<std::string>{"q", "q_bias", "k", "k_bias"}));
}

// Batched X [2, 3, 4]: viewed as [6, 4]; a piece read only by Reshapes to a constant
// shape feeds them directly, others get a Reshape back to [2, 3, N] (a piece that is
// a graph output, and one read by a Reshape whose shape has a 0: that 0 copies a dim
// of its input, so the input's shape must stay).
TEST(FuseSiblingsTest, StackedLayoutOnBatchedInput) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[2,3,4]
  const %wq : f32[4,4] = splat(0.5)
  const %wk : f32[4,4] = splat(0.5)
  const %wv : f32[4,4] = splat(0.5)
  const %bq : f32[4] = splat(0.1)
  const %bk : f32[4] = splat(0.2)
  const %bv : f32[4] = splat(0.3)
  const %heads : i64[4] = [2, 3, 2, 2]
  const %heads0 : i64[4] = [0, 3, 2, 2]
  %q0 = MatMul(%x, %wq) @q
  %k0 = MatMul(%x, %wk) @k
  %v0 = MatMul(%x, %wv) @v
  %q = Add(%q0, %bq) @q_bias
  %k = Add(%k0, %bk) @k_bias
  %v = Add(%v0, %bv) @v_bias
  %qh = Reshape(%q, %heads) @q_heads
  %qt = Transpose(%qh) {perm = [0, 2, 1, 3]} @q_t
  %kh = Reshape(%k, %heads0) @k_heads
  %kt = Transpose(%kh) {perm = [0, 2, 3, 1]} @k_t
  %s = MatMul(%qt, %kt) @scores
  output %s
  output %v
}
)",
                        &report);
  EXPECT_EQ(Summary(*g),
            "Reshape @q/siblings_rows\nMatMul @q/siblings\nAdd @q/siblings_bias_add\nSplit @q/split\n"
            "Reshape @q_heads\nTranspose @q_t\nReshape @q/unstack1\nReshape @k_heads\nTranspose @k_t\n"
            "MatMul @scores\nReshape @q/unstack2\n");
  EXPECT_EQ(g->FindValue("q/siblings_out")->shape(), (Shape{3, 6, 4}));
  EXPECT_EQ(g->FindValue("q/siblings_bias")->shape(), (Shape{3, 1, 4}));
  EXPECT_EQ(g->FindValue("q"), nullptr);  // q_heads reads the piece
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].pattern, "siblings");
}

// BERT's Q/K/V projections on a dynamic graph (the legacy export compiled with
// --dim batch=1..4 --dim seq=1..8): the rows Reshape's target keeps its expression,
// the stacked product keeps the largest sizes' distance between its matrices (the
// Split's pieces are views at those offsets), and the rewrite computes the same at
// a smaller size too.
TEST(FuseSiblingsTest, StackedLayoutOnADynamicGraph) {
  const std::string text = R"(
graph @main {
  dim batch in [1, 4]
  dim seq in [1, 8]
  input %x : f32[4,8,4] dims "batch, seq, 4"
  const %wq : f32[4,4] = splat(0.5)
  const %wk : f32[4,4] = splat(0.5)
  const %wv : f32[4,4] = splat(0.5)
  const %bq : f32[4] = splat(0.1)
  const %bk : f32[4] = splat(0.2)
  const %bv : f32[4] = splat(0.3)
  const %heads : i64[4] = [4, 8, 2, 2] symbolic "batch, seq, 2, 2"
  %q0 = MatMul(%x, %wq) @q
  %k0 = MatMul(%x, %wk) @k
  %v0 = MatMul(%x, %wv) @v
  %q = Add(%q0, %bq) @q_bias
  %k = Add(%k0, %bk) @k_bias
  %v = Add(%v0, %bv) @v_bias
  %qh = Reshape(%q, %heads) @q_heads
  %kh = Reshape(%k, %heads) @k_heads
  %s = Mul(%qh, %kh) @scores
  output %s
  output %v
}
)";
  FusionReport report;
  std::unique_ptr<Graph> original = ParseTyped(text);
  RandomizeConstants(*original, 5);
  std::unique_ptr<Graph> g = original->Clone();
  ASSERT_TRUE(*FuseSiblings(&report).Run(*g));
  ASSERT_TRUE(InferShapes(*g, {.fold_constants = false}).ok());
  ExpectValid(*g);
  const Value* rows = g->FindValue("q/siblings_rows_shape");
  ASSERT_NE(rows, nullptr);
  ASSERT_EQ(rows->symbolic_data().size(), 2u);
  EXPECT_EQ(rows->symbolic_data()[0].ToString(g->dim_symbols()), "batch*seq");
  EXPECT_EQ(g->FindValue("q/siblings_out")->dims().size(), 3u);
  const Node* mm = g->FindValue("q/siblings_out")->producer();
  EXPECT_EQ(mm->GetInt("out_batch_stride", 0).value_or(0), 4 * 8 * 4);
  // v's piece becomes v through a Reshape to its dims.
  const Value* v = g->FindValue("v");
  ASSERT_NE(v, nullptr);
  ASSERT_NE(v->producer(), nullptr);
  EXPECT_TRUE(v->producer()->input(1)->has_symbolic_data());
  EXPECT_TRUE(CheckSpecializations(*g).ok());
  for (const std::vector<int64_t>& at : {std::vector<int64_t>{1, 3}, std::vector<int64_t>{3, 8}}) {
    auto want = Specialize(*original, at);
    auto got = Specialize(*g, at);
    ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
    ExpectSameResults(**want, **got);
  }
}

// On a dynamic graph, siblings of different widths are left alone: their Split along
// the last axis would have no kernel with run-time sizes.
TEST(FuseSiblingsTest, DifferentWidthsMustNotFireOnADynamicGraph) {
  FusionReport report;
  bool changed = true;
  FuseAndCheck(R"(
graph @main {
  dim seq in [1, 8]
  input %x : f32[8,4] dims "seq, 4"
  const %wq : f32[4,4] = splat(0.5)
  const %wk : f32[4,2] = splat(0.5)
  %q = MatMul(%x, %wq) @q
  %k = MatMul(%x, %wk) @k
  output %q
  output %k
}
)",
               &report, &changed);
  EXPECT_FALSE(changed);
  ExpectOneRejection(report, {"q", "k"}, "shape: siblings of different widths");
}

// X of rank 1 and 2: the pieces [1, M, N] are reshaped back to [N] / [M, N].
TEST(FuseSiblingsTest, StackedLayoutOnVectorInput) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4]
  const %wa : f32[4,3] = splat(0.5)
  const %wb : f32[4,3] = splat(0.5)
  %a = MatMul(%x, %wa) @a
  %b = MatMul(%x, %wb) @b
  %y = Mul(%a, %b) @prod
  output %y
}
)",
                        &report);
  EXPECT_EQ(Summary(*g),
            "Reshape @a/siblings_rows\nMatMul @a/siblings\nSplit @a/split\nReshape @a/unstack0\n"
            "Reshape @a/unstack1\nMul @prod\n");
  EXPECT_EQ(g->FindValue("a/siblings_out")->shape(), (Shape{2, 1, 3}));
}

// A MatMul + bias whose result a Split cuts along the last axis into equal parts
// (GPT-2's c_attn) gets the stacked layout too.
TEST(FuseSiblingsTest, SplitMatMulGetsTheStackedLayout) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[2,3,4]
  const %w : f32[4,6] = splat(0.5)
  const %b : f32[6] = splat(0.1)
  const %sizes : i64[3] = [2, 2, 2]
  const %heads : i64[4] = [2, 3, 1, 2]
  %p = MatMul(%x, %w) @c_attn
  %pb = Add(%b, %p) @c_attn_bias
  %q, %k, %v = Split(%pb, %sizes) {axis = 2} @split
  %qh = Reshape(%q, %heads) @q_heads
  %kh = Reshape(%k, %heads) @k_heads
  %vh = Reshape(%v, %heads) @v_heads
  %s = Add(%qh, %kh) @sum
  %y = Mul(%s, %vh) @prod
  output %y
}
)",
                        &report);
  EXPECT_EQ(Summary(*g),
            "Reshape @c_attn/stacked_rows\nMatMul @c_attn/stacked\nAdd @c_attn/stacked_bias_add\n"
            "Split @c_attn/split\nReshape @q_heads\nReshape @k_heads\nReshape @v_heads\nAdd @sum\nMul @prod\n");
  EXPECT_EQ(g->FindValue("c_attn/stacked_weight")->shape(), (Shape{3, 4, 2}));
  EXPECT_EQ(g->FindValue("c_attn/stacked_bias")->shape(), (Shape{3, 1, 2}));
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].pattern, "split-matmul");
  EXPECT_EQ(report.groups[0].members, (std::vector<std::string>{"c_attn", "c_attn_bias", "split"}));

  // Without a bias, and with a batch-1 input (no Reshape at all).
  FusionReport plain;
  auto h = FuseAndCheck(R"(
graph @main {
  input %x : f32[1,3,4]
  const %w : f32[4,6] = splat(0.5)
  %p = MatMul(%x, %w) @c_attn
  %q, %k = Split(%p) {axis = -1, num_outputs = 2} @split
  %y = Mul(%q, %k) @prod
  output %y
}
)",
                        &plain);
  EXPECT_EQ(Summary(*h), "MatMul @c_attn/stacked\nSplit @c_attn/split\nMul @prod\n");

  // GPT-2's Conv1D export: the product of [B*T, K] rows is reshaped to [B, T, S*N]
  // before the Split; the Reshape goes with the rewrite.
  FusionReport conv1d;
  auto c = FuseAndCheck(R"(
graph @main {
  input %x : f32[6,4]
  const %w : f32[4,6] = splat(0.5)
  const %b : f32[6] = splat(0.1)
  const %bt : i64[3] = [2, 3, 6]
  %p = MatMul(%x, %w) @c_attn
  %pb = Add(%p, %b) @c_attn_bias
  %r = Reshape(%pb, %bt) @c_attn_reshape
  %q, %k, %v = Split(%r) {axis = 2, num_outputs = 3} @split
  %s = Add(%q, %k) @sum
  %y = Mul(%s, %v) @prod
  output %y
}
)",
                        &conv1d);
  EXPECT_EQ(Summary(*c),
            "MatMul @c_attn/stacked\nAdd @c_attn/stacked_bias_add\nSplit @c_attn/split\nReshape @c_attn/unstack0\n"
            "Reshape @c_attn/unstack1\nAdd @sum\nReshape @c_attn/unstack2\nMul @prod\n");
  ASSERT_EQ(conv1d.groups.size(), 1u);
  EXPECT_EQ(conv1d.groups[0].members,
            (std::vector<std::string>{"c_attn", "c_attn_bias", "c_attn_reshape", "split"}));
}

TEST(FuseSiblingsTest, SplitMatMulMustNotFire) {
  for (const char* text : {
           // Unequal parts.
           R"(graph @main {
  input %x : f32[3,4]
  const %w : f32[4,6] = splat(0.5)
  const %sizes : i64[2] = [2, 4]
  %p = MatMul(%x, %w) @mm
  %a, %b = Split(%p, %sizes) {axis = 1} @split
  output %a
  output %b
})",
           // Not the last axis.
           R"(graph @main {
  input %x : f32[4,4]
  const %w : f32[4,6] = splat(0.5)
  %p = MatMul(%x, %w) @mm
  %a, %b = Split(%p) {axis = 0, num_outputs = 2} @split
  output %a
  output %b
})",
           // A computed weight.
           R"(graph @main {
  input %x : f32[3,4]
  input %w : f32[4,6]
  %p = MatMul(%x, %w) @mm
  %a, %b = Split(%p) {axis = 1, num_outputs = 2} @split
  output %a
  output %b
})",
           // The product is read elsewhere too.
           R"(graph @main {
  input %x : f32[3,4]
  const %w : f32[4,6] = splat(0.5)
  const %bias : f32[6] = splat(0.5)
  %p = MatMul(%x, %w) @mm
  %pb = Add(%p, %bias) @bias
  %a, %b = Split(%pb) {axis = 1, num_outputs = 2} @split
  output %a
  output %b
  output %p
})",
       }) {
    FusionReport report;
    bool changed = true;
    auto g = FuseAndCheck(text, &report, &changed);
    EXPECT_FALSE(changed) << text;
    EXPECT_TRUE(report.groups.empty()) << text;
  }
}

// The stacked product takes its [S, 1, N] bias as an epilogue.
TEST(FuseSiblingsTest, StackedBiasBecomesAnEpilogue) {
  std::unique_ptr<Graph> g = ParseTyped(R"(
graph @main {
  input %x : f32[1,5,8]
  const %wg : f32[8,16] = splat(0.5)
  const %wu : f32[8,16] = splat(0.5)
  const %bg : f32[16] = splat(0.5)
  const %bu : f32[16] = splat(0.5)
  %g0 = MatMul(%x, %wg) @gate
  %u0 = MatMul(%x, %wu) @up
  %g = Add(%g0, %bg) @gate_bias
  %u = Add(%u0, %bu) @up_bias
  %a = Relu(%g) @act
  %y = Mul(%a, %u) @gated
  output %y
}
)");
  RandomizeConstants(*g, 4);
  std::unique_ptr<Graph> original = g->Clone();
  ASSERT_TRUE(*FuseSiblings().Run(*g));
  ASSERT_TRUE(*FuseEpilogue().Run(*g));
  ExpectValid(*g);
  EXPECT_EQ(Summary(*g),
            "FusedGroup matmul+epilogue [gate/siblings, gate/siblings_bias_add] anchor=gate/siblings\n"
            "Split @gate/split\nRelu @act\nMul @gated\n");
  ExpectSameResults(*original, *g);
}

TEST(FuseSiblingsTest, SharedInputMustNotFire) {
  // A computed weight, and x read as the second MatMul input (not a sibling).
  FusionReport report;
  bool changed = true;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,4]
  input %wc : f32[4,6]
  const %w : f32[4,6] = splat(0.5)
  const %l : f32[3,4] = splat(0.5)
  %a = MatMul(%x, %w) @a
  %b = MatMul(%x, %wc) @b
  %c = MatMul(%l, %x) @c
  output %a
  output %b
  output %c
}
)",
                        &report, &changed);
  EXPECT_FALSE(changed);
  EXPECT_EQ(Summary(*g), "MatMul @a\nMatMul @b\nMatMul @c\n");
  ExpectOneRejection(report, {"a", "b"}, "unsupported op: ");
}

TEST(FuseSiblingsTest, DualMatMul) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,8]
  input %h : f32[4,16]
  const %w1 : f32[8,6] = splat(0.5)
  const %w2 : f32[16,6] = splat(0.5)
  %p = MatMul(%x, %w1) @mm1
  %q = MatMul(%h, %w2) @mm2
  %y = Add(%q, %p) @sum
  output %y
}
)",
                        &report);
  EXPECT_EQ(Summary(*g), "FusedGroup dual-matmul [mm1, mm2, sum] anchor=mm1\n");
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].pattern, "dual-matmul");
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
}

TEST(FuseSiblingsTest, DualMatMulTakesAnEpilogue) {
  std::unique_ptr<Graph> g = ParseTyped(R"(
graph @main {
  input %x : f32[4,8]
  input %h : f32[4,16]
  const %w1 : f32[8,6] = splat(0.5)
  const %w2 : f32[16,6] = splat(0.5)
  const %b : f32[6] = splat(0.5)
  %p = MatMul(%x, %w1) @mm1
  %q = MatMul(%h, %w2) @mm2
  %s = Add(%p, %q) @sum
  %a = Add(%s, %b) @bias
  %y = Relu(%a) @relu
  output %y
}
)");
  RandomizeConstants(*g, 2);
  std::unique_ptr<Graph> original = g->Clone();
  ASSERT_TRUE(*FuseSiblings().Run(*g));
  ASSERT_TRUE(*FuseEpilogue().Run(*g));
  ExpectValid(*g);
  EXPECT_EQ(Summary(*g), "FusedGroup dual-matmul+epilogue [mm1, mm2, sum, bias, relu] anchor=mm1\n");
  ExpectSameResults(*original, *g);
}

TEST(FuseSiblingsTest, DualMatMulMustNotFireOnDifferentShapes) {
  FusionReport report;
  bool changed = true;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,8]
  input %v : f32[1,8]
  const %w1 : f32[8,6] = splat(0.5)
  const %w2 : f32[8,6] = splat(0.25)
  %p = MatMul(%x, %w1) @mm1
  %q = MatMul(%v, %w2) @mm2
  %y = Add(%p, %q) @broadcast_sum
  output %y
}
)",
                        &report, &changed);
  EXPECT_FALSE(changed);
  EXPECT_TRUE(Groups(*g).empty());
  ExpectOneRejection(report, {"mm1", "mm2", "broadcast_sum"}, "shape: ");
}

TEST(FuseSiblingsTest, DualMatMulOtherConsumers) {
  FusionReport report;
  bool changed = true;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[4,8]
  input %h : f32[4,8]
  const %w1 : f32[8,6] = splat(0.5)
  const %w2 : f32[8,6] = splat(0.25)
  %p = MatMul(%x, %w1) @mm1
  %q = MatMul(%h, %w2) @mm2
  %y = Add(%p, %q) @sum
  output %y
  output %q
}
)",
                        &report, &changed);
  EXPECT_FALSE(changed);
  EXPECT_TRUE(Groups(*g).empty());
  ExpectOneRejection(report, {"mm1", "mm2", "sum"}, "other consumers: ");
}

}  // namespace
}  // namespace kiln
