// Tests for FuseAttention on the exporters' forms, cut from the zoo's exports (after
// canonicalisation, as fuse-attention sees them; sizes shrunk): torch.export's SDPA
// decomposition (bert/distilbert/gpt2.dynamo: sqrt of the scale on Q and on K^T, the
// keys reshaped [B*H,S,D] -> transposed -> [B,H,D,S], the Where(IsNaN(P), 0, P)
// guard), the legacy exporter's (bert.legacy: K' = Transpose [0,2,3,1] times the
// scale root), Llama's GQA (repeat_kv by Unsqueeze/Expand/Reshape), the selects of a
// packed QKV product (vit.dynamo, swin.legacy) and Swin's shifted windows. Each is
// fused == unfused on the CPU reference; plus the cases that must not join.
#include <gtest/gtest.h>

#include "fusion/fuse_attention.h"
#include "fusion/fusion_test_util.h"

namespace kiln {
namespace {

using ::kiln::testing::ExpectSameResults;
using ::kiln::testing::ExpectValid;
using ::kiln::testing::Groups;
using ::kiln::testing::ParseTyped;
using ::kiln::testing::Summary;

// Runs FuseAttention on `text` as written (the guard's 0 and the scales are part of
// the pattern, so the constants are not randomised). The scales moved onto the
// scores round the f16 scores differently on the CPU reference: fused == unfused within 1e-2 relative
// plus 5e-4 (outputs of about 0.02).
std::unique_ptr<Graph> Fuse(const std::string& text, FusionReport* report, bool* changed = nullptr) {
  std::unique_ptr<Graph> g = ParseTyped(text);
  std::unique_ptr<Graph> original = g->Clone();
  absl::StatusOr<bool> result = FuseAttention(report).Run(*g);
  EXPECT_TRUE(result.ok()) << result.status();
  if (changed != nullptr) *changed = result.value_or(false);
  ExpectValid(*g);
  ExpectSameResults(*original, *g, 1e-2f, 5e-4f);
  return g;
}

// bert.dynamo's first layer (H = 2, D = 8, S = 8): the mask is computed outside.
constexpr char kTorchSdpa[] = R"(
graph @main {
  input %xq : f16[2,8,16]
  input %xk : f16[2,8,16]
  input %xv : f16[2,8,16]
  input %mask : f16[2,1,8,8]
  const %heads : i64[4] = [2, 8, 2, 8]
  const %flat : i64[3] = [4, 8, 8]
  const %unflat : i64[4] = [2, 2, 8, 8]
  const %merged : i64[3] = [2, 8, 16]
  const %root : f16[] = [0.5947]
  const %zero : f16[] = [0.0]
  %view = Reshape(%xq, %heads) {allowzero = 1} @node_view
  %q = Transpose(%view) {perm = [0, 2, 1, 3]} @node_transpose
  %view_1 = Reshape(%xk, %heads) {allowzero = 1} @node_view_1
  %k = Transpose(%view_1) {perm = [0, 2, 1, 3]} @node_transpose_1
  %view_2 = Reshape(%xv, %heads) {allowzero = 1} @node_view_2
  %v = Transpose(%view_2) {perm = [0, 2, 1, 3]} @node_transpose_2
  %val_91 = Reshape(%k, %flat) @node_Reshape_89
  %val_92 = Transpose(%val_91) {perm = [0, 2, 1]} @node_Transpose_90
  %val_96 = Mul(%q, %root) @node_Mul_94
  %val_98b = Mul(%val_92, %root) @node_Mul_96
  %val_98 = Reshape(%val_98b, %unflat) @node_Reshape_92
  %val_102 = MatMul(%val_96, %val_98) @node_MatMul_100
  %val_103 = Add(%val_102, %mask) @node_Add_101
  %val_104 = Softmax(%val_103) {axis = -1} @node_Softmax_102
  %val_105 = IsNaN(%val_104) @node_IsNaN_103
  %val_106 = Where(%val_105, %zero, %val_104) @node_Where_104
  %sdpa = MatMul(%val_106, %v) @node_sdpa
  %t3 = Transpose(%sdpa) {perm = [0, 2, 1, 3]} @node_transpose_3
  %y = Reshape(%t3, %merged) {allowzero = 1} @node_view_3
  output %y
}
)";

TEST(FuseAttentionFormsTest, TorchExportSdpa) {
  FusionReport report;
  auto g = Fuse(kTorchSdpa, &report);
  // The head splits' Reshapes stay views outside; the keys' reshapes and transposes
  // join, their scale moves onto the scores (after the MatMul), the guard joins.
  EXPECT_EQ(Summary(*g),
            "Reshape @node_view\nReshape @node_view_1\nReshape @node_view_2\n"
            "FusedGroup attention [node_transpose, node_transpose_1, node_transpose_2, node_Reshape_89, "
            "node_Transpose_90, node_Reshape_92, node_MatMul_100, node_Mul_94, node_Mul_96, node_Add_101, "
            "node_Softmax_102, node_IsNaN_103, node_Where_104, node_sdpa, node_transpose_3] anchor=node_MatMul_100\n"
            "Reshape @node_view_3\n");
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
}

// bert.legacy: Q and K' = Transpose [0,2,3,1] of the head split, each times the root.
TEST(FuseAttentionFormsTest, LegacySdpaWithTransposedKeys) {
  FusionReport report;
  auto g = Fuse(R"(
graph @main {
  input %q4 : f16[2,8,2,8]
  input %k4 : f16[2,8,2,8]
  input %v4 : f16[2,8,2,8]
  input %mask : f16[2,1,8,8]
  const %root : f16[] = [0.5947]
  const %zero : f16[] = [0.0]
  %q = Transpose(%q4) {perm = [0, 2, 1, 3]} @Transpose
  %v = Transpose(%v4) {perm = [0, 2, 1, 3]} @Transpose_1
  %kt = Transpose(%k4) {perm = [0, 2, 3, 1]} @Transpose_2
  %qs = Mul(%q, %root) @Mul
  %ks = Mul(%kt, %root) @Mul_1
  %s = MatMul(%qs, %ks) @MatMul
  %a = Add(%s, %mask) @Add
  %p = Softmax(%a) {axis = -1} @Softmax
  %n = IsNaN(%p) @IsNaN
  %pg = Where(%n, %zero, %p) @Where_1
  %y = MatMul(%pg, %v) @MatMul_1
  output %y
}
)",
                &report);
  EXPECT_EQ(Summary(*g),
            "FusedGroup attention [Transpose, Transpose_1, Transpose_2, MatMul, Mul, Mul_1, Add, Softmax, IsNaN, "
            "Where_1, MatMul_1] anchor=MatMul\n");
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
}

// llama.dynamo: 4 query heads over 2 key/value heads; Q comes from RoPE (computed).
TEST(FuseAttentionFormsTest, GroupedQueryAttention) {
  FusionReport report;
  auto g = Fuse(R"(
graph @main {
  input %rope_q : f16[2,4,8,16]
  input %rope_k : f16[2,2,8,16]
  input %xv : f16[2,8,32]
  input %mask : f16[2,1,8,8]
  const %kv_heads : i64[4] = [2, 8, 2, 16]
  const %axis : i64[1] = [2]
  const %rep : i64[5] = [2, 2, 2, 8, 16]
  const %heads : i64[4] = [2, 4, 8, 16]
  const %flat : i64[3] = [8, 8, 16]
  const %unflat : i64[4] = [2, 4, 16, 8]
  const %root : f16[] = [0.5]
  const %zero : f16[] = [0.0]
  %view_2 = Reshape(%xv, %kv_heads) @node_view_2
  %v = Transpose(%view_2) {perm = [0, 2, 1, 3]} @node_transpose_3
  %ku = Unsqueeze(%rope_k, %axis) @node_unsqueeze_18
  %ke = Expand(%ku, %rep) @node_expand_3
  %vu = Unsqueeze(%v, %axis) @node_unsqueeze_19
  %ve = Expand(%vu, %rep) @node_expand_4
  %vr = Reshape(%ve, %heads) @node__unsafe_view_1
  %kf = Reshape(%ke, %flat) @node_Reshape_407
  %kt = Transpose(%kf) {perm = [0, 2, 1]} @node_Transpose_195
  %qs = Mul(%rope_q, %root) @node_Mul_199
  %kts = Mul(%kt, %root) @node_Mul_201
  %k4 = Reshape(%kts, %unflat) @node_Reshape_197
  %s = MatMul(%qs, %k4) @node_MatMul_205
  %a = Add(%s, %mask) @node_Add_206
  %p = Softmax(%a) {axis = -1} @node_Softmax_207
  %n = IsNaN(%p) @node_IsNaN_208
  %pg = Where(%n, %zero, %p) @node_Where_209
  %y = MatMul(%pg, %vr) @node_sdpa
  %yt = Transpose(%y) {perm = [0, 2, 1, 3]} @node_transpose_4
  output %yt
}
)",
                &report);
  ASSERT_EQ(Groups(*g).size(), 1u) << Summary(*g);
  std::string inputs;
  for (const Value* in : Groups(*g)[0]->inputs()) absl::StrAppend(&inputs, in->name(), in->TypeString(), " ");
  // repeat_kv, the head split's Transpose, the keys' reshapes and transposes join;
  // the group reads the unrepeated key/value heads ([.., 2, ..], not [.., 4, ..] copies).
  EXPECT_EQ(Summary(*g),
            "Reshape @node_view_2\nUnsqueeze @node_unsqueeze_18\n"
            "FusedGroup attention [node_transpose_3, node_expand_3, node_unsqueeze_19, node_expand_4, "
            "node__unsafe_view_1, node_Reshape_407, node_Transpose_195, node_Reshape_197, node_MatMul_205, "
            "node_Mul_199, node_Mul_201, node_Add_206, node_Softmax_207, node_IsNaN_208, node_Where_209, "
            "node_sdpa, node_transpose_4] anchor=node_MatMul_205\n");
  EXPECT_EQ(inputs, "view_2f16[2,8,2,16] kuf16[2,2,1,8,16] rope_qf16[2,4,8,16] maskf16[2,1,8,8] ");
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
}

// vit.dynamo's layer (torchvision's MultiheadAttention; S = 8, B = 1, H = 2, D = 8):
// Q, K and V are selects (Gather of index 0, 1, 2) of one packed in_proj product, and
// the scale roots sit among Q's and K's views (before their final Reshapes).
constexpr char kPackedInProj[] = R"(
graph @main {
  input %linear : f16[8,1,48]
  const %split3 : i64[4] = [8, 1, 3, 16]
  const %zero_axis : i64[1] = [0]
  const %squeeze_axis : i64[1] = [-2]
  const %i0 : i64[] = [0]
  const %i1 : i64[] = [1]
  const %i2 : i64[] = [2]
  const %heads : i64[3] = [8, 2, 8]
  const %bhsd : i64[4] = [1, 2, 8, 8]
  const %bhds : i64[4] = [1, 2, 8, 8]
  const %merged : i64[2] = [8, 16]
  const %root : f16[] = [0.5947]
  %view_10 = Reshape(%linear, %split3) {allowzero = 1} @node_view_10
  %unsqueeze_1 = Unsqueeze(%view_10, %zero_axis) @node_unsqueeze_1
  %transpose_7 = Transpose(%unsqueeze_1) {perm = [3, 1, 2, 0, 4]} @node_transpose_7
  %squeeze_1 = Squeeze(%transpose_7, %squeeze_axis) @node_squeeze_1
  %select_3 = Gather(%squeeze_1, %i0) {axis = 0} @node_select_3
  %select_4 = Gather(%squeeze_1, %i1) {axis = 0} @node_select_4
  %select_5 = Gather(%squeeze_1, %i2) {axis = 0} @node_select_5
  %view_11 = Reshape(%select_3, %heads) {allowzero = 1} @node_view_11
  %transpose_8 = Transpose(%view_11) {perm = [1, 0, 2]} @node_transpose_8
  %view_12 = Reshape(%select_4, %heads) {allowzero = 1} @node_view_12
  %transpose_9 = Transpose(%view_12) {perm = [1, 0, 2]} @node_transpose_9
  %view_13 = Reshape(%select_5, %heads) {allowzero = 1} @node_view_13
  %transpose_10 = Transpose(%view_13) {perm = [1, 0, 2]} @node_transpose_10
  %view_16 = Reshape(%transpose_10, %bhsd) {allowzero = 1} @node_view_16
  %val_163 = Transpose(%transpose_9) {perm = [0, 2, 1]} @node_Transpose_157
  %qs = Mul(%transpose_8, %root) @node_Mul_161
  %val_167 = Reshape(%qs, %bhsd) {allowzero = 1} @node_view_14
  %ks = Mul(%val_163, %root) @node_Mul_164
  %val_170 = Reshape(%ks, %bhds) @node_Reshape_159
  %val_171 = MatMul(%val_167, %val_170) @node_MatMul_165
  %val_172 = Softmax(%val_171) {axis = -1} @node_Softmax_166
  %sdpa = MatMul(%val_172, %view_16) @node_sdpa
  %permute_2 = Transpose(%sdpa) {perm = [2, 0, 1, 3]} @node_permute_2
  %y = Reshape(%permute_2, %merged) {allowzero = 1} @node_view_17
  output %y
}
)";

TEST(FuseAttentionFormsTest, PackedInProjectionSelects) {
  FusionReport report;
  auto g = Fuse(kPackedInProj, &report);
  ASSERT_EQ(Groups(*g).size(), 1u) << Summary(*g);
  // The selects, the Transpose they share and both scales join (the scales move onto
  // the scores, after the MatMul); the group reads the product through its first
  // views, with no copy of Q, K or V.
  EXPECT_EQ(Summary(*g),
            "Reshape @node_view_10\nUnsqueeze @node_unsqueeze_1\n"
            "FusedGroup attention [node_transpose_7, node_squeeze_1, node_select_3, node_select_4, node_select_5, "
            "node_view_11, node_transpose_8, node_view_12, node_transpose_9, node_view_13, node_transpose_10, "
            "node_view_16, node_Transpose_157, node_view_14, node_Reshape_159, node_MatMul_165, node_Mul_161, "
            "node_Mul_164, node_Softmax_166, node_sdpa, node_permute_2] anchor=node_MatMul_165\n"
            "Reshape @node_view_17\n");
  ASSERT_EQ(Groups(*g)[0]->num_inputs(), 1);
  EXPECT_EQ(Groups(*g)[0]->input(0)->name(), "unsqueeze_1");
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
}

// swin.legacy's shifted-window block (4 windows of 4 tokens, H = 2, D = 8): the packed
// QKV selects, the relative-position bias, and the shifted windows' mask added to the
// scores regrouped as [B, windows, H, N, N] between two Reshapes.
constexpr char kShiftedWindows[] = R"(
graph @main {
  input %qkv : f16[4,4,48]
  input %mask : f16[1,4,1,4,4]
  const %split : i64[5] = [4, 4, 3, 2, 8]
  const %i0 : i64[] = [0]
  const %i1 : i64[] = [1]
  const %i2 : i64[] = [2]
  const %scale : f16[] = [0.3535]
  const %bias : f16[1,2,4,4] = splat(0.25)
  const %windows : i64[5] = [1, 4, 2, 4, 4]
  const %scores : i64[4] = [4, 2, 4, 4]
  const %merged : i64[3] = [4, 4, 16]
  %r4 = Reshape(%qkv, %split) @Reshape_4
  %t2 = Transpose(%r4) {perm = [2, 0, 3, 1, 4]} @Transpose_2
  %q = Gather(%t2, %i0) {axis = 0} @Gather_9
  %k = Gather(%t2, %i1) {axis = 0} @Gather_10
  %v = Gather(%t2, %i2) {axis = 0} @Gather_11
  %qs = Mul(%q, %scale) @Mul_2
  %s = MatMul(%qs, %k) {trans_b = 1} @MatMul_1
  %sb = Add(%s, %bias) @Add_1
  %s5 = Reshape(%sb, %windows) @Reshape_16
  %sm = Add(%s5, %mask) @Add_11
  %s4 = Reshape(%sm, %scores) @Reshape_17
  %p = Softmax(%s4) {axis = -1} @Softmax
  %o = MatMul(%p, %v) @MatMul_2
  %ot = Transpose(%o) {perm = [0, 2, 1, 3]} @Transpose_4
  %y = Reshape(%ot, %merged) @Reshape_5
  output %y
}
)";

TEST(FuseAttentionFormsTest, ShiftedWindowsRegroupTheScores) {
  FusionReport report;
  auto g = Fuse(kShiftedWindows, &report);
  EXPECT_EQ(Summary(*g),
            "Reshape @Reshape_4\n"
            "FusedGroup attention [Transpose_2, Gather_9, Gather_10, Gather_11, MatMul_1, Mul_2, Add_1, Reshape_16, "
            "Add_11, Reshape_17, Softmax, MatMul_2, Transpose_4] anchor=MatMul_1\n"
            "Reshape @Reshape_5\n");
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
}

// Must not join across a reader outside: V's select also feeds a Relu, so it stays a
// copy outside and the Transpose the selects share stays too (Q's and K's chains stop
// at their selects). Scores regrouped and not restored before the Softmax are refused.
TEST(FuseAttentionFormsTest, SharedViewsAndRegroupsThatMustStayOutside) {
  std::string text = kShiftedWindows;
  const std::string out = "  output %y\n";
  text.replace(text.find(out), out.size(), "  %vr = Relu(%v) @outside\n  output %y\n  output %vr\n");
  FusionReport report;
  auto g = Fuse(text, &report);
  EXPECT_EQ(Summary(*g),
            "Reshape @Reshape_4\nTranspose @Transpose_2\nGather @Gather_11\nRelu @outside\n"
            "FusedGroup attention [Gather_9, Gather_10, MatMul_1, Mul_2, Add_1, Reshape_16, Add_11, Reshape_17, "
            "Softmax, MatMul_2, Transpose_4] anchor=MatMul_1\n"
            "Reshape @Reshape_5\n");

  // The Softmax reads the [1, windows, H, N, N] scores (no Reshape back): refused.
  std::string unrestored = kShiftedWindows;
  for (const std::string& line : {"  %s4 = Reshape(%sm, %scores) @Reshape_17\n",
                                  "  %ot = Transpose(%o) {perm = [0, 2, 1, 3]} @Transpose_4\n",
                                  "  %y = Reshape(%ot, %merged) @Reshape_5\n"}) {
    unrestored.erase(unrestored.find(line), line.size());
  }
  const std::string softmax = "Softmax(%s4)", output = "output %y";
  unrestored.replace(unrestored.find(softmax), softmax.size(), "Softmax(%sm)");
  unrestored.replace(unrestored.find(output), output.size(), "output %o");
  FusionReport report2;
  bool changed = true;
  auto g2 = Fuse(unrestored, &report2, &changed);
  EXPECT_FALSE(changed);
  ASSERT_EQ(report2.rejections.size(), 1u) << report2.ToString();
  EXPECT_NE(report2.rejections[0].reason.find("batch regroupings"), std::string::npos) << report2.ToString();
}

// whisper_encoder.legacy: q_proj's bias Add and its scale come before the head split;
// the scale of that computed sum stays with it (fuse-pointwise makes the two one
// kernel), while the scales on the head-split views join as before.
TEST(FuseAttentionFormsTest, ScaleOfAComputedSumStaysOutside) {
  FusionReport report;
  auto g = Fuse(R"(
graph @main {
  input %xq : f16[1,8,16]
  input %xk : f16[1,8,16]
  input %xv : f16[1,8,16]
  const %bias : f16[16] = splat(0.125)
  const %scale : f16[] = [0.3535]
  const %one : f16[] = [1.0]
  const %heads : i64[4] = [1, 8, 2, 8]
  %qa = Add(%bias, %xq) @q_proj_add
  %qs = Mul(%qa, %scale) @Mul
  %qr = Reshape(%qs, %heads) @Reshape
  %q = Transpose(%qr) {perm = [0, 2, 1, 3]} @Transpose
  %kr = Reshape(%xk, %heads) @Reshape_1
  %vr = Reshape(%xv, %heads) @Reshape_2
  %v = Transpose(%vr) {perm = [0, 2, 1, 3]} @Transpose_1
  %kt = Transpose(%kr) {perm = [0, 2, 3, 1]} @Transpose_2
  %q1 = Mul(%q, %one) @Mul_1
  %k1 = Mul(%kt, %one) @Mul_2
  %s = MatMul(%q1, %k1) @MatMul
  %p = Softmax(%s) {axis = -1} @Softmax
  %o = MatMul(%p, %v) @MatMul_1
  %y = Transpose(%o) {perm = [0, 2, 1, 3]} @Transpose_3
  output %y
}
)",
                &report);
  EXPECT_EQ(Summary(*g),
            "Add @q_proj_add\nMul @Mul\nReshape @Reshape\nReshape @Reshape_1\nReshape @Reshape_2\n"
            "FusedGroup attention [Transpose, Transpose_1, Transpose_2, MatMul, Mul_1, Mul_2, Softmax, MatMul_1, "
            "Transpose_3] anchor=MatMul\n");
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
}

// Must not join: a guard that fills 1 instead of 0 (then P is read by IsNaN and a
// Where, not by a MatMul: not attention, nothing reported); a key Reshape whose
// elements have no strided form over its input (it and the Transpose before it stay
// outside; the group reads the Reshape's output); a key scale that is not a constant.
TEST(FuseAttentionFormsTest, WhatMustNotJoin) {
  std::string text = kTorchSdpa;
  const std::string zero = "const %zero : f16[] = [0.0]";
  text.replace(text.find(zero), zero.size(), "const %zero : f16[] = [1.0]");
  FusionReport report;
  bool changed = true;
  auto g = Fuse(text, &report, &changed);
  EXPECT_FALSE(changed);
  EXPECT_TRUE(Groups(*g).empty());
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();

  FusionReport report2;
  auto g2 = Fuse(R"(
graph @main {
  input %q : f16[2,8,16]
  input %x : f16[2,8,16]
  input %v : f16[2,8,16]
  input %c : f16[]
  const %shape : i64[3] = [2, 8, 16]
  %xt = Transpose(%x) {perm = [0, 2, 1]} @odd_t
  %k = Reshape(%xt, %shape) @odd_reshape
  %ks = Mul(%k, %c) @runtime_scale
  %s = MatMul(%q, %ks) {trans_b = 1} @scores
  %p = Softmax(%s) {axis = -1} @softmax
  %y = MatMul(%p, %v) @context
  output %y
}
)",
                 &report2);
  EXPECT_EQ(Summary(*g2),
            "Transpose @odd_t\nReshape @odd_reshape\nMul @runtime_scale\n"
            "FusedGroup attention [scores, softmax, context] anchor=scores\n");
  EXPECT_TRUE(report2.rejections.empty()) << report2.ToString();
}

}  // namespace
}  // namespace kiln
