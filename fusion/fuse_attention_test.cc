// Tests for FuseAttention: the BERT, GPT-2, DistilBERT and ViT attention patterns
// (keys stored transposed or read through trans_b), must-not-fire cases with their
// report entries and fused == unfused on the CPU reference (the pipeline order is
// tested in compiler/pipeline_test.cc).
#include "fusion/fuse_attention.h"

#include <gtest/gtest.h>

#include "fusion/fusion_test_util.h"
#include "graph/fused_group.h"

namespace kiln {
namespace {

using ::kiln::testing::ExpectOneRejection;
using ::kiln::testing::ExpectSameResults;
using ::kiln::testing::ExpectValid;
using ::kiln::testing::Groups;
using ::kiln::testing::ParseTyped;
using ::kiln::testing::RandomizeConstants;
using ::kiln::testing::Summary;

// Runs FuseAttention on `text` (constants randomised with seed 7); see testing::RunFusionPass.
std::unique_ptr<Graph> FuseAndCheck(const std::string& text, FusionReport* report, bool* changed = nullptr) {
  return ::kiln::testing::RunFusionPass<FuseAttention>(text, report, 7, changed);
}

// BERT: Add(Div(MatMul(q, k, trans_b), sqrt(D)), mask[B,1,1,S]) -> Softmax -> MatMul(., v).
TEST(FuseAttentionTest, BertPattern) {
  FusionReport report;
  bool changed = false;
  auto g = FuseAndCheck(::kiln::testing::kBertAttention, &report, &changed);
  EXPECT_TRUE(changed);
  EXPECT_EQ(Summary(*g), "FusedGroup attention [scores, div, add, softmax, context] anchor=scores\n");
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].pass, "fuse-attention");
  EXPECT_EQ(report.groups[0].pattern, "attention");
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
  // The group reads q, k, v and the mask; the scale is a literal of the body.
  const Node* group = Groups(*g)[0];
  EXPECT_EQ(group->num_inputs(), 4);
  EXPECT_EQ(group->num_outputs(), 1);
}

// GPT-2: the keys as a Transpose output [B,A,D,S] (no trans_b), a causal
// Where(mask, scores, -inf) after the scale; odd sizes (Sq = Sk = 5, D = 24).
TEST(FuseAttentionTest, Gpt2CausalWithTransposedKeys) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %q : bf16[3,2,5,24]
  input %k0 : bf16[3,5,2,24]
  input %v : bf16[3,2,5,16]
  const %scale : bf16[] = [4.875]
  const %causal : bool[1,1,5,5] = [1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1]
  const %fill : bf16[] = [-inf]
  %k = Transpose(%k0) {perm = [0, 2, 3, 1]} @key_t
  %s = MatMul(%q, %k) @scores
  %d = Div(%s, %scale) @div
  %w = Where(%causal, %d, %fill) @where
  %p = Softmax(%w) {axis = -1} @softmax
  %y = MatMul(%p, %v) @context
  output %y
}
)",
                        &report);
  // The key Transpose keeps the head dim innermost: the kernel reads k0 through it.
  EXPECT_EQ(Summary(*g), "FusedGroup attention [key_t, scores, div, where, softmax, context] anchor=scores\n");
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
}

// DistilBERT: q / sqrt(D) before the MatMul (a constant scale, moved onto the scores,
// so the kernel needs no pass over Q), masked_fill as Where(mask, finfo.min, scores)
// with a full-shape condition computed outside. The constants stay as written: with
// a scale of 4 the moved division is exact, so fused == unfused on the CPU reference.
TEST(FuseAttentionTest, DistilBertQueryScaleAndMaskedFill) {
  FusionReport report;
  std::unique_ptr<Graph> g = ParseTyped(R"(
graph @main {
  input %q0 : f16[2,4,8,16]
  input %k : f16[2,4,8,16]
  input %v : f16[2,4,8,16]
  input %m : f16[2,1,1,8]
  const %zero : f16[] = [0.0]
  const %shape : i64[4] = [2, 4, 8, 8]
  const %scale : f16[] = [4.0]
  const %fill : f16[] = [-65504.0]
  %q = Div(%q0, %scale) @qdiv
  %s = MatMul(%q, %k) {trans_b = 1} @scores
  %c0 = Less(%m, %zero) @less
  %c = Expand(%c0, %shape) @expand
  %w = Where(%c, %fill, %s) @where
  %p = Softmax(%w) {axis = -1} @softmax
  %y = MatMul(%p, %v) @context
  output %y
}
)");
  std::unique_ptr<Graph> original = g->Clone();
  ASSERT_TRUE(FuseAttention(&report).Run(*g).ok());
  ExpectValid(*g);
  ExpectSameResults(*original, *g);
  EXPECT_EQ(Summary(*g),
            "Less @less\nExpand @expand\nFusedGroup attention [scores, qdiv, where, softmax, context] anchor=scores\n");
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
  const Node* div = nullptr;
  for (const Node* n : FusedGroupBody(*Groups(*g)[0]).value()->nodes()) {
    if (n->name() == "qdiv") div = n;
  }
  ASSERT_NE(div, nullptr);
  EXPECT_EQ(div->input(0)->producer()->name(), "scores") << "the scale divides the scores";
}

// A Q scale that is computed (one element, not a constant) stays on Q: the kernel
// applies it to the Q tile (its Q prologue).
TEST(FuseAttentionTest, ComputedQueryScaleStaysOnQ) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %q0 : f16[2,4,8,16]
  input %k : f16[2,4,8,16]
  input %v : f16[2,4,8,16]
  input %d : f16[]
  %scale = Sqrt(%d) @sqrt
  %q = Div(%q0, %scale) @qdiv
  %s = MatMul(%q, %k) {trans_b = 1} @scores
  %p = Softmax(%s) {axis = -1} @softmax
  %y = MatMul(%p, %v) @context
  output %y
}
)",
                        &report);
  EXPECT_EQ(Summary(*g), "Sqrt @sqrt\nFusedGroup attention [qdiv, scores, softmax, context] anchor=scores\n");
}

// ViT: no mask; the scale as Mul(c, scores); Sq != Sk (cross attention) and D != Dv.
TEST(FuseAttentionTest, UnmaskedCrossAttention) {
  auto g = FuseAndCheck(R"(
graph @main {
  input %q : f16[2,3,7,64]
  input %k : f16[2,3,64,9]
  input %v : f16[2,3,9,40]
  const %scale : f16[] = [0.125]
  %s = MatMul(%q, %k) @scores
  %m = Mul(%scale, %s) @mul
  %p = Softmax(%m) {axis = 3} @softmax
  %y = MatMul(%p, %v) @context
  output %y
}
)",
                        nullptr);
  EXPECT_EQ(Summary(*g), "FusedGroup attention [scores, mul, softmax, context] anchor=scores\n");
}

// Bare Softmax(MatMul) -> MatMul; keys shared by every head (K batch [B,1]), a V of
// rank 2 broadcast over the batch.
TEST(FuseAttentionTest, BroadcastKeysAndValues) {
  auto g = FuseAndCheck(R"(
graph @main {
  input %q : f16[2,4,6,16]
  input %k : f16[2,1,6,16]
  input %v : f16[6,8]
  %s = MatMul(%q, %k) {trans_b = 1} @scores
  %p = Softmax(%s) {axis = -1} @softmax
  %y = MatMul(%p, %v) @context
  output %y
}
)",
                        nullptr);
  EXPECT_EQ(Summary(*g), "FusedGroup attention [scores, softmax, context] anchor=scores\n");
}

// The models' layout: Q, K, V are head splits Transpose(Reshape(x, [B,S,A,D]),
// [0,2,1,3]) (K after fold-transpose-into-matmul: [0,2,1,3] with trans_b) and the
// output is merged back by Transpose [0,2,1,3]; all four Transposes join the group
// (the kernel reads and writes [B,S,A,D] through strides), the Reshapes stay views.
TEST(FuseAttentionTest, HeadSplitAndMergeTransposesJoin) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %xq : f16[2,6,32]
  input %xk : f16[2,6,32]
  input %xv : f16[2,6,32]
  input %mask : f16[2,1,1,6]
  const %heads : i64[4] = [2, 6, 4, 8]
  const %merged : i64[3] = [2, 6, 32]
  const %scale : f16[] = [2.828125]
  %q4 = Reshape(%xq, %heads) @q_split
  %q = Transpose(%q4) {perm = [0, 2, 1, 3]} @q_t
  %k4 = Reshape(%xk, %heads) @k_split
  %k = Transpose(%k4) {perm = [0, 2, 1, 3]} @k_t
  %v4 = Reshape(%xv, %heads) @v_split
  %v = Transpose(%v4) {perm = [0, 2, 1, 3]} @v_t
  %s = MatMul(%q, %k) {trans_b = 1} @scores
  %d = Div(%s, %scale) @div
  %a = Add(%d, %mask) @add
  %p = Softmax(%a) {axis = -1} @softmax
  %c = MatMul(%p, %v) @context
  %ct = Transpose(%c) {perm = [0, 2, 1, 3]} @merge
  %y = Reshape(%ct, %merged) @merge_reshape
  output %y
}
)",
                        &report);
  EXPECT_EQ(Summary(*g),
            "Reshape @q_split\nReshape @k_split\nReshape @v_split\n"
            "FusedGroup attention [q_t, k_t, v_t, scores, div, add, softmax, context, merge] anchor=scores\n"
            "Reshape @merge_reshape\n");
  EXPECT_EQ(report.groups[0].name, "group_scores");
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
}

// Transposes that move the contiguous axis of Q, V or the output, or whose output is
// read elsewhere, stay outside (the group still forms); the keys' Transpose joins
// when either trailing axis stays innermost (here the head dim of K' [D, Sk]).
TEST(FuseAttentionTest, OtherTransposesStayOutside) {
  auto g = FuseAndCheck(R"(
graph @main {
  input %q0 : f16[2,8,16]
  input %k0 : f16[2,16,8]
  input %v0 : f16[16,2,8]
  %q = Transpose(%q0) {perm = [0, 2, 1]} @q_t
  %k = Transpose(%k0) {perm = [0, 2, 1]} @k_t
  %v = Transpose(%v0) {perm = [1, 0, 2]} @v_t
  %s = MatMul(%q, %k) @scores
  %p = Softmax(%s) {axis = -1} @softmax
  %y = MatMul(%p, %v) @context
  %yt = Transpose(%y) {perm = [0, 2, 1]} @y_t
  output %yt
  output %v
}
)",
                        nullptr);
  EXPECT_EQ(Summary(*g),
            "Transpose @q_t\nTranspose @v_t\n"
            "FusedGroup attention [k_t, scores, softmax, context] anchor=scores\nTranspose @y_t\n");
}

TEST(FuseAttentionTest, SoftmaxNotOverTheLastAxis) {
  FusionReport report;
  bool changed = true;
  auto g = FuseAndCheck(R"(
graph @main {
  input %q : f16[2,8,16]
  input %k : f16[2,16,8]
  input %v : f16[2,8,16]
  %s = MatMul(%q, %k) @scores
  %p = Softmax(%s) {axis = 1} @softmax
  %y = MatMul(%p, %v) @context
  output %y
}
)",
                        &report, &changed);
  EXPECT_FALSE(changed);
  EXPECT_TRUE(Groups(*g).empty());
  ExpectOneRejection(report, {"scores", "softmax", "context"}, "unsupported op: ");
}

TEST(FuseAttentionTest, IntermediateReadElsewhere) {
  for (const char* out : {"%d", "%p", "%s"}) {
    SCOPED_TRACE(out);
    FusionReport report;
    bool changed = true;
    auto g = FuseAndCheck(absl::StrCat(R"(
graph @main {
  input %q : f16[2,8,16]
  input %k : f16[2,8,16]
  input %v : f16[2,8,16]
  const %scale : f16[] = [4.0]
  %s = MatMul(%q, %k) {trans_b = 1} @scores
  %d = Div(%s, %scale) @div
  %p = Softmax(%d) {axis = -1} @softmax
  %y = MatMul(%p, %v) @context
  output %y
  output )",
                                       out, "\n}\n"),
                          &report, &changed);
    EXPECT_FALSE(changed);
    EXPECT_TRUE(Groups(*g).empty());
    ExpectOneRejection(report, "other consumers: ");
  }
}

TEST(FuseAttentionTest, NonElementwiseOrUnsupportedOpBetween) {
  // A Transpose of the scores, and a Tanh (element-wise, not a score op).
  for (const char* op : {"Transpose(%s) {perm = [0, 2, 1]}", "Tanh(%s)"}) {
    SCOPED_TRACE(op);
    FusionReport report;
    bool changed = true;
    auto g = FuseAndCheck(absl::StrCat(R"(
graph @main {
  input %q : f16[2,8,16]
  input %k : f16[2,8,16]
  input %v : f16[2,8,16]
  %s = MatMul(%q, %k) {trans_b = 1} @scores
  %t = )",
                                       op, R"( @between
  %p = Softmax(%t) {axis = -1} @softmax
  %y = MatMul(%p, %v) @context
  output %y
}
)"),
                          &report, &changed);
    EXPECT_FALSE(changed);
    EXPECT_TRUE(Groups(*g).empty());
    ExpectOneRejection(report, {"softmax", "context"}, "unsupported op: ");
  }
}

TEST(FuseAttentionTest, DtypeAndHeadDimLimits) {
  struct Case {
    const char* dtype;
    int d;
    const char* reason;
  };
  for (const Case& c : {Case{"f32", 16, "dtype: "}, Case{"f16", 160, "shape: "}, Case{"bf16", 20, "shape: "}}) {
    SCOPED_TRACE(absl::StrCat(c.dtype, " D=", c.d));
    FusionReport report;
    bool changed = true;
    const std::string t = c.dtype;
    auto g = FuseAndCheck(absl::StrCat(R"(
graph @main {
  input %q : )", t, "[2,8,", c.d, R"(]
  input %k : )", t, "[2,8,", c.d, R"(]
  input %v : )", t, R"([2,8,16]
  %s = MatMul(%q, %k) {trans_b = 1} @scores
  %p = Softmax(%s) {axis = -1} @softmax
  %y = MatMul(%p, %v) @context
  output %y
}
)"),
                          &report, &changed);
    EXPECT_FALSE(changed);
    ExpectOneRejection(report, {"scores", "softmax", "context"}, c.reason);
  }
}

TEST(FuseAttentionTest, NotAttentionIsNotReported) {
  // A classifier softmax (no MatMul reads it), a Softmax of a graph input read by a
  // MatMul, and a mask Add whose other operand grows the scores.
  FusionReport report;
  bool changed = true;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f16[4,16]
  input %w : f16[16,8]
  input %u : f16[4,8]
  input %v : f16[8,8]
  %h = MatMul(%x, %w) @fc
  %p = Softmax(%h) {axis = -1} @classifier
  %r = Softmax(%u) {axis = -1} @plain
  %y = MatMul(%r, %v) @after
  output %p
  output %y
}
)",
                        &report, &changed);
  EXPECT_FALSE(changed);
  EXPECT_TRUE(Groups(*g).empty());
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
}

// Each attention of a graph becomes its own group (the first one's output feeds the
// second's Q).
TEST(FuseAttentionTest, TwoLayers) {
  const std::string text = R"(
graph @main {
  input %q : f16[1,2,16,32]
  input %k : f16[1,2,16,32]
  input %v : f16[1,2,16,32]
  input %mask : f16[1,1,1,16]
  const %scale : f16[] = [5.65625]
  %s = MatMul(%q, %k) {trans_b = 1} @scores
  %d = Div(%s, %scale) @div
  %a = Add(%d, %mask) @add
  %p = Softmax(%a) {axis = -1} @softmax
  %y = MatMul(%p, %v) @context
  %s2 = MatMul(%y, %k) {trans_b = 1} @scores2
  %d2 = Div(%s2, %scale) @div2
  %p2 = Softmax(%d2) {axis = -1} @softmax2
  %y2 = MatMul(%p2, %v) @context2
  output %y2
}
)";
  FusionReport report;
  auto g = FuseAndCheck(text, &report);
  EXPECT_EQ(Summary(*g),
            "FusedGroup attention [scores, div, add, softmax, context] anchor=scores\n"
            "FusedGroup attention [scores2, div2, softmax2, context2] anchor=scores2\n");

}

}  // namespace
}  // namespace kiln
