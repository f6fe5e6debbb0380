// Tests for FuseAttention on the exporters' forms, cut from the zoo's exports (after
// canonicalisation, as fuse-attention sees them; sizes shrunk): torch.export's SDPA
// decomposition (bert/distilbert/gpt2.dynamo: sqrt of the scale on Q and on K^T, the
// keys reshaped [B*H,S,D] -> transposed -> [B,H,D,S], the Where(IsNaN(P), 0, P)
// guard), the legacy exporter's (bert.legacy: K' = Transpose [0,2,3,1] times the
// scale root) and Llama's GQA (repeat_kv by Unsqueeze/Expand/Reshape). Each is
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
// the pattern, so the constants are not randomised). The moved key scale rounds the
// f16 scores differently on the CPU reference: fused == unfused within 1e-2 relative
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
            "node_Transpose_90, node_Mul_94, node_Reshape_92, node_MatMul_100, node_Mul_96, node_Add_101, "
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
            "FusedGroup attention [Transpose, Transpose_1, Transpose_2, Mul, MatMul, Mul_1, Add, Softmax, IsNaN, "
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
            "node__unsafe_view_1, node_Reshape_407, node_Transpose_195, node_Mul_199, node_Reshape_197, "
            "node_MatMul_205, node_Mul_201, node_Add_206, node_Softmax_207, node_IsNaN_208, node_Where_209, "
            "node_sdpa, node_transpose_4] anchor=node_MatMul_205\n");
  EXPECT_EQ(inputs, "view_2f16[2,8,2,16] kuf16[2,2,1,8,16] rope_qf16[2,4,8,16] maskf16[2,1,8,8] ");
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
