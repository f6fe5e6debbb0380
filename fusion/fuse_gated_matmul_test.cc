// Tests for FuseGatedMatMul on Llama's FFN as torch.export writes it (cut from
// llama.dynamo after lower-precision, widths shrunk): SiLU spelled Mul(g, Sigmoid(g))
// on the gate product, times the up product, then the down projection; fused ==
// unfused on the CPU reference. Plus the forms that must not fire.
#include "fusion/fuse_gated_matmul.h"

#include <gtest/gtest.h>

#include <string>

#include "fusion/fusion_test_util.h"

namespace kiln {
namespace {

using ::kiln::testing::Groups;
using ::kiln::testing::ParseTyped;
using ::kiln::testing::ReplaceOnce;
using ::kiln::testing::RunFusionPass;
using ::kiln::testing::Summary;

constexpr char kLlamaFfn[] = R"(
graph @main {
  input %mul_9 : f16[2,5,16]
  const %val_220 : f16[16,24] = splat(0.5)
  const %val_222 : f16[16,24] = splat(0.25)
  const %val_223 : f16[24,16] = splat(0.125)
  %linear_4 : f16[2,5,24] = MatMul(%mul_9, %val_220) @node_linear_4
  %val_221 : f16[2,5,24] = Sigmoid(%linear_4) @node_Sigmoid_221
  %silu : f16[2,5,24] = Mul(%linear_4, %val_221) @node_silu
  %linear_5 : f16[2,5,24] = MatMul(%mul_9, %val_222) @node_linear_5
  %mul_10 : f16[2,5,24] = Mul(%silu, %linear_5) @node_mul_10
  %linear_6 : f16[2,5,16] = MatMul(%mul_10, %val_223) @node_linear_6
  output %linear_6
}
)";

TEST(FuseGatedMatMulTest, LlamaSwiGluIsOneGroup) {
  FusionReport report;
  auto g = RunFusionPass<FuseGatedMatMul>(kLlamaFfn, &report, 1);
  EXPECT_EQ(Summary(*g),
            "FusedGroup gated-matmul [node_linear_4/gated, node_linear_4/gated_pairs, node_linear_4/gated_split, "
            "node_linear_4/gated_g, node_Sigmoid_221, node_silu, node_linear_4/gated_u, node_mul_10] "
            "anchor=node_linear_4/gated\nMatMul @node_linear_6\n");
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
  // One weight [K, 2N], its blocks of 8 columns alternating between the two.
  const Value* w = g->FindValue("node_linear_4/gated_weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape(), (Shape{16, 48}));
}

// The weights' columns in blocks of 8: gate 0..7, up 0..7, gate 8..15, ... (a column
// mix-up would change the results, which RunFusionPass compares; this checks the
// layout the kernel's pairing relies on).
TEST(FuseGatedMatMulTest, WeightBlocksAlternate) {
  auto original = ParseTyped(kLlamaFfn);
  ::kiln::testing::RandomizeConstants(*original, 7);
  auto g = original->Clone();
  ASSERT_TRUE(FuseGatedMatMul().Run(*g).ok());
  const std::vector<float> wg = original->FindValue("val_220")->constant().ToFloat();
  const std::vector<float> wu = original->FindValue("val_222")->constant().ToFloat();
  // The group's body holds the interleaved weight now; find it through the group.
  auto groups = Groups(*g);
  ASSERT_EQ(groups.size(), 1u);
  auto body = FusedGroupBody(*groups[0]);
  ASSERT_TRUE(body.ok()) << body.status();
  const Value* w = nullptr;
  for (const Value* c : (*body)->constants()) {
    if (c->shape() == Shape{16, 48}) w = c;
  }
  for (const Value* in : groups[0]->inputs()) {
    if (in != nullptr && in->shape() == Shape{16, 48} && in->is_constant()) w = in;
  }
  ASSERT_NE(w, nullptr);
  const std::vector<float> wi = w->constant().ToFloat();
  for (int64_t k = 0; k < 16; ++k) {
    for (int64_t c = 0; c < 48; ++c) {
      const int64_t block = c / 8, e = c % 8;
      const std::vector<float>& src = block % 2 == 0 ? wg : wu;
      ASSERT_EQ(wi[k * 48 + c], src[k * 24 + (block / 2) * 8 + e]) << "row " << k << " column " << c;
    }
  }
}

// GeGLU with a chain on both sides (a scale on the up product) and the operands of
// the join swapped.
TEST(FuseGatedMatMulTest, ChainsOnBothSides) {
  auto g = RunFusionPass<FuseGatedMatMul>(R"(
graph @main {
  input %x : f16[3,16]
  const %wg : f16[16,8] = splat(0.5)
  const %wu : f16[16,8] = splat(0.25)
  const %s : f16[8] = splat(2.0)
  %g = MatMul(%x, %wg) @gate
  %a = Gelu(%g) @gelu
  %u = MatMul(%x, %wu) @up
  %us = Mul(%u, %s) @scale
  %y = Mul(%us, %a) @join
  output %y
}
)",
                                          nullptr, 2);
  EXPECT_EQ(Summary(*g),
            "FusedGroup gated-matmul [up/gated, up/gated_pairs, up/gated_split, up/gated_g, scale, up/gated_u, gelu, "
            "join] anchor=up/gated\n");
}

// Phi-3's merged gate_up projection: one MatMul of [K, 2N], chunked in two along the
// last axis (torch.export's Split with num_outputs), gate first; the up half may come
// first too.
TEST(FuseGatedMatMulTest, MergedGateUpWeight) {
  constexpr char kMerged[] = R"(
graph @main {
  input %x : f16[2,5,16]
  const %w : f16[16,48] = splat(0.5)
  %gu : f16[2,5,48] = MatMul(%x, %w) @gate_up_proj
  %g : f16[2,5,24], %u : f16[2,5,24] = Split(%gu) {axis = -1, num_outputs = 2} @chunk
  %s : f16[2,5,24] = Sigmoid(%g) @sigmoid
  %a : f16[2,5,24] = Mul(%g, %s) @silu
  %y : f16[2,5,24] = Mul(%u, %a) @join
  output %y
}
)";
  FusionReport report;
  auto g = RunFusionPass<FuseGatedMatMul>(kMerged, &report, 8);
  EXPECT_EQ(Summary(*g),
            "FusedGroup gated-matmul [gate_up_proj/gated, gate_up_proj/gated_pairs, gate_up_proj/gated_split, "
            "gate_up_proj/gated_g, gate_up_proj/gated_u, sigmoid, silu, join] anchor=gate_up_proj/gated\n");
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
  // The product also read elsewhere: no group.
  bool changed = true;
  std::string shared = ReplaceOnce(kMerged, "  output %y\n", "  output %y\n  output %gu\n");
  RunFusionPass<FuseGatedMatMul>(shared, nullptr, 9, &changed);
  EXPECT_FALSE(changed);
  // Both chains from one half: no pair.
  changed = true;
  RunFusionPass<FuseGatedMatMul>(ReplaceOnce(kMerged, "Mul(%u, %a)", "Mul(%g, %a)"), nullptr, 10, &changed);
  EXPECT_FALSE(changed);
}

// Must not fire: the SiLU also read elsewhere (reported), a side input that is not a
// constant (a residual), the MatMuls on different inputs, a width not a multiple of 8,
// f32 weights.
TEST(FuseGatedMatMulTest, OtherFormsStayApart) {
  FusionReport report;
  bool changed = true;
  std::string shared = ReplaceOnce(kLlamaFfn, "  output %linear_6\n", "  output %linear_6\n  output %silu\n");
  RunFusionPass<FuseGatedMatMul>(shared, &report, 3, &changed);
  EXPECT_FALSE(changed);
  ::kiln::testing::ExpectOneRejection(report, "other consumers: 'silu'");

  std::string residual = ReplaceOnce(kLlamaFfn, "Mul(%linear_4, %val_221)", "Add(%linear_4, %mul_9b)");
  residual = ReplaceOnce(residual, "  input %mul_9 : f16[2,5,16]\n",
                         "  input %mul_9 : f16[2,5,16]\n  input %mul_9b : f16[2,5,24]\n");
  changed = true;
  RunFusionPass<FuseGatedMatMul>(residual, nullptr, 4, &changed);
  EXPECT_FALSE(changed);

  std::string two_inputs = ReplaceOnce(kLlamaFfn, "MatMul(%mul_9, %val_222)", "MatMul(%other, %val_222)");
  two_inputs = ReplaceOnce(two_inputs, "  input %mul_9 : f16[2,5,16]\n",
                           "  input %mul_9 : f16[2,5,16]\n  input %other : f16[2,5,16]\n");
  changed = true;
  RunFusionPass<FuseGatedMatMul>(two_inputs, nullptr, 5, &changed);
  EXPECT_FALSE(changed);

  std::string odd = kLlamaFfn;
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{{"f16[16,24]", "f16[16,20]"},
                                                                                 {"f16[16,24]", "f16[16,20]"},
                                                                                 {"f16[24,16]", "f16[20,16]"},
                                                                                 {"f16[2,5,24]", "f16[2,5,20]"},
                                                                                 {"f16[2,5,24]", "f16[2,5,20]"},
                                                                                 {"f16[2,5,24]", "f16[2,5,20]"},
                                                                                 {"f16[2,5,24]", "f16[2,5,20]"}}) {
    odd = ReplaceOnce(odd, from, to);
  }
  changed = true;
  RunFusionPass<FuseGatedMatMul>(odd, nullptr, 6, &changed);
  EXPECT_FALSE(changed);

  std::string f32 = kLlamaFfn;
  for (int i = 0; i < 12; ++i) {
    if (f32.find("f16") == std::string::npos) break;
    f32 = ReplaceOnce(f32, "f16", "f32");
  }
  changed = true;
  RunFusionPass<FuseGatedMatMul>(f32, nullptr, 7, &changed);
  EXPECT_FALSE(changed);
}

}  // namespace
}  // namespace kiln
