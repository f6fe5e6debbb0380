// Tests for FuseRotaryMatMul on Llama's attention input as it stands after
// fuse-siblings (cut from llama.dynamo's first layer, the sequence shortened to 8):
// the merged Q/K/V product, its Split, recognize-rope's rotations of Q and K, GQA's
// repeat of K and V and the SDPA decomposition. Fused == unfused on the CPU reference;
// then fuse-attention reads Q, K and V from the group's output in place. Plus the
// forms that must not fire.
#include "fusion/fuse_rotary_matmul.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fusion/fuse_attention.h"
#include "fusion/fusion_test_util.h"
#include "graph/strided_view.h"

namespace kiln {
namespace {

using ::kiln::testing::ExpectSameResults;
using ::kiln::testing::ExpectValid;
using ::kiln::testing::Groups;
using ::kiln::testing::ParseTyped;
using ::kiln::testing::RandomizeConstants;
using ::kiln::testing::ReplaceOnce;
using ::kiln::testing::Summary;

constexpr char kLlamaQkv[] = R"(
graph @main {
  input %mul_3 : f16[2,8,64]
  const %w : f16[64,128] = splat(0.5)
  const %split_sizes : i64[3] = [64, 32, 32]
  const %val_99 : i64[4] = [2, 8, -1, 16]
  const %val_163 : i64[5] = [2, 2, 2, 8, 16]
  const %val_182 : i64[4] = [2, 4, 8, 16]
  const %val_196 : i64[4] = [2, 4, 16, 8]
  const %val_198 : f16[] = [0.5]
  const %val_204 : f16[2,1,8,8] = splat(0.0)
  const %val_214 : i64[3] = [2, 8, -1]
  const %val_194_shape : i64[3] = [8, 8, 16]
  const %val_53 : i64[1] = [2]
  const %val_202 : f16[] = [0.0]
  const %q_x_shape : i64[5] = [2, 8, 4, 2, 8]
  const %q_cos : f16[1,1,8,2,8] = splat(0.5)
  const %q_sin : f16[1,1,8,2,8] = splat(0.5)
  const %swap_starts : i64[1] = [1]
  const %swap_ends : i64[1] = [-9223372036854775808]
  const %swap_axes : i64[1] = [3]
  const %swap_steps : i64[1] = [-1]
  const %q_sign : f16[2,1] = [-1.0, 1.0]
  const %q_out_shape : i64[4] = [2, 4, 8, 16]
  const %k_x_shape : i64[5] = [2, 8, 2, 2, 8]
  const %k_cos : f16[1,1,8,2,8] = splat(0.5)
  const %k_sin : f16[1,1,8,2,8] = splat(0.5)
  const %k_sign : f16[2,1] = [-1.0, 1.0]
  const %k_out_shape : i64[4] = [2, 2, 8, 16]
  %qkv : f16[2,8,128] = MatMul(%mul_3, %w) @node_linear/siblings
  %linear : f16[2,8,64], %linear_1 : f16[2,8,32], %linear_2 : f16[2,8,32] = Split(%qkv, %split_sizes) {axis = -1} @node_linear/split
  %view : f16[2,8,4,16] = Reshape(%linear, %val_99) {allowzero = 1} @node_view
  %view_1 : f16[2,8,2,16] = Reshape(%linear_1, %val_99) {allowzero = 1} @node_view_1
  %view_2 : f16[2,8,2,16] = Reshape(%linear_2, %val_99) {allowzero = 1} @node_view_2
  %transpose_3 : f16[2,2,8,16] = Transpose(%view_2) {perm = [0, 2, 1, 3]} @node_transpose_3
  %unsqueeze_19 : f16[2,2,1,8,16] = Unsqueeze(%transpose_3, %val_53) @node_unsqueeze_19
  %expand_4 : f16[2,2,2,8,16] = Expand(%unsqueeze_19, %val_163) @node_expand_4
  %_unsafe_view_1 : f16[2,4,8,16] = Reshape(%expand_4, %val_182) {allowzero = 1} @node__unsafe_view_1
  %q_x : f16[2,8,4,2,8] = Reshape(%view, %q_x_shape) @node_add_4/x
  %q_heads : f16[2,4,8,2,8] = Transpose(%q_x) {perm = [0, 2, 1, 3, 4]} @node_transpose_1
  %q_swapped : f16[2,4,8,2,8] = Slice(%q_heads, %swap_starts, %swap_ends, %swap_axes, %swap_steps) @node_add_4/swap
  %q_rotated : f16[2,4,8,2,8] = Mul(%q_swapped, %q_sign) @node_add_4/rotate_half
  %q_x_cos : f16[2,4,8,2,8] = Mul(%q_heads, %q_cos) @node_add_4/x_cos
  %q_rot_sin : f16[2,4,8,2,8] = Mul(%q_rotated, %q_sin) @node_add_4/rot_sin
  %q_sum : f16[2,4,8,2,8] = Add(%q_x_cos, %q_rot_sin) @node_add_4
  %k_x : f16[2,8,2,2,8] = Reshape(%view_1, %k_x_shape) @node_add_5/x
  %k_heads : f16[2,2,8,2,8] = Transpose(%k_x) {perm = [0, 2, 1, 3, 4]} @node_transpose_2
  %k_swapped : f16[2,2,8,2,8] = Slice(%k_heads, %swap_starts, %swap_ends, %swap_axes, %swap_steps) @node_add_5/swap
  %k_rotated : f16[2,2,8,2,8] = Mul(%k_swapped, %k_sign) @node_add_5/rotate_half
  %k_x_cos : f16[2,2,8,2,8] = Mul(%k_heads, %k_cos) @node_add_5/x_cos
  %k_rot_sin : f16[2,2,8,2,8] = Mul(%k_rotated, %k_sin) @node_add_5/rot_sin
  %k_sum : f16[2,2,8,2,8] = Add(%k_x_cos, %k_rot_sin) @node_add_5
  %add_5 : f16[2,2,8,16] = Reshape(%k_sum, %k_out_shape) @node_add_5/merge
  %unsqueeze_18 : f16[2,2,1,8,16] = Unsqueeze(%add_5, %val_53) @node_unsqueeze_18
  %expand_3 : f16[2,2,2,8,16] = Expand(%unsqueeze_18, %val_163) @node_expand_3
  %val_194 : f16[8,8,16] = Reshape(%expand_3, %val_194_shape) @node_Reshape_407
  %val_195 : f16[8,16,8] = Transpose(%val_194) {perm = [0, 2, 1]} @node_Transpose_195
  %val_201_pre : f16[8,16,8] = Mul(%val_195, %val_198) @node_Mul_201
  %val_201 : f16[2,4,16,8] = Reshape(%val_201_pre, %val_196) {allowzero = 0} @node_Reshape_197
  %val_199_pre : f16[2,4,8,2,8] = Mul(%q_sum, %val_198) @node_Mul_199
  %val_199 : f16[2,4,8,16] = Reshape(%val_199_pre, %q_out_shape) @node_add_4/merge
  %val_205 : f16[2,4,8,8] = MatMul(%val_199, %val_201) @node_MatMul_205
  %val_206 : f16[2,4,8,8] = Add(%val_205, %val_204) @node_Add_206
  %val_207 : f16[2,4,8,8] = Softmax(%val_206) {axis = -1} @node_Softmax_207
  %val_208 : bool[2,4,8,8] = IsNaN(%val_207) @node_IsNaN_208
  %val_209 : f16[2,4,8,8] = Where(%val_208, %val_202, %val_207) @node_Where_209
  %sdpa : f16[2,4,8,16] = MatMul(%val_209, %_unsafe_view_1) @node_scaled_dot_product_attention
  %transpose_4 : f16[2,8,4,16] = Transpose(%sdpa) {perm = [0, 2, 1, 3]} @node_transpose_4
  %view_3 : f16[2,8,64] = Reshape(%transpose_4, %val_214) {allowzero = 1} @node_view_3
  output %view_3
}
)";

// `text` parsed, its float constants random but for the rotate_half signs and the
// NaN guard's zero, which the patterns require.
std::unique_ptr<Graph> Parsed(const std::string& text, uint32_t seed) {
  std::unique_ptr<Graph> g = ParseTyped(text);
  RandomizeConstants(*g, seed);
  for (const char* sign : {"q_sign", "k_sign"}) {
    if (Value* v = g->FindValue(sign); v != nullptr) {
      g->SetConstant(v, Tensor::FromFloat(DType::kFloat16, {2, 1}, {-1.f, 1.f}));
    }
  }
  g->SetConstant(g->FindValue("val_202"), Tensor::FromFloat(DType::kFloat16, {}, {0.f}));
  return g;
}

// Runs the pass on `text`, checking validity and numerics; returns the graph.
std::unique_ptr<Graph> RunPass(const std::string& text, FusionReport* report, bool* changed) {
  std::unique_ptr<Graph> g = Parsed(text, 11);
  std::unique_ptr<Graph> original = g->Clone();
  absl::StatusOr<bool> result = FuseRotaryMatMul(report).Run(*g);
  EXPECT_TRUE(result.ok()) << result.status();
  *changed = result.value_or(false);
  ExpectValid(*g);
  ExpectSameResults(*original, *g);
  return g;
}

const Value* Constant(const Node& group, const Shape& shape, int which) {
  int seen = 0;
  for (const Value* in : group.inputs()) {
    if (in != nullptr && in->is_constant() && in->shape() == shape && seen++ == which) return in;
  }
  return nullptr;
}

TEST(FuseRotaryMatMulTest, LlamaQkvRotationsJoinTheProduct) {
  FusionReport report;
  bool changed = false;
  std::unique_ptr<Graph> g = RunPass(kLlamaQkv, &report, &changed);
  EXPECT_TRUE(changed);
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
  const std::string summary = Summary(*g);
  EXPECT_NE(summary.find("FusedGroup rotary-matmul [node_linear/siblings, node_linear/siblings/rotary_pairs, "
                         "node_linear/siblings/rotary_swap, node_linear/siblings/rotary_partner, "
                         "node_linear/siblings/rotary_x_cos, node_linear/siblings/rotary_partner_sin, "
                         "node_linear/siblings/rotary] anchor=node_linear/siblings\n"),
            std::string::npos)
      << summary;
  // The Split is three Slices of the group's output; the rotations' nodes are gone.
  EXPECT_EQ(summary.find("Split"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("rotate_half"), std::string::npos) << summary;
  EXPECT_NE(summary.find("Slice @node_linear/siblings/rotary_piece_2"), std::string::npos) << summary;

  // fuse-attention then reads Q, K and V through those Slices: one attention group and
  // the rotary group are the only kernels left besides the output's views.
  FusionReport attention_report;
  ASSERT_TRUE(FuseAttention(&attention_report).Run(*g).ok());
  std::vector<std::string> patterns;
  for (const Node* n : Groups(*g)) patterns.push_back(n->GetString("pattern", "").value_or(""));
  EXPECT_EQ(patterns, (std::vector<std::string>{"rotary-matmul", "attention"}))
      << Summary(*g) << attention_report.ToString();
  for (const Node* n : g->nodes()) {
    EXPECT_TRUE(IsFusedGroup(*n) || IsViewNode(*n)) << n->op_type() << " @" << n->name() << " left\n" << Summary(*g);
    if (IsFusedGroup(*n) || n->op_type() != "Slice") continue;
    ADD_FAILURE() << "Slice @" << n->name() << " outside the attention group";
  }
}

// The tables over the product's columns: Q's and K's columns take cos and -sin / +sin
// by half, V's pass through (1, 0); one row of tables per position, shared by the batch.
TEST(FuseRotaryMatMulTest, TablesCoverEveryColumn) {
  std::unique_ptr<Graph> original = Parsed(kLlamaQkv, 11);
  std::unique_ptr<Graph> g = original->Clone();
  ASSERT_TRUE(FuseRotaryMatMul().Run(*g).ok());
  auto groups = Groups(*g);
  ASSERT_EQ(groups.size(), 1u);
  const Value* c = Constant(*groups[0], Shape{1, 8, 128}, 0);
  const Value* s = Constant(*groups[0], Shape{1, 8, 128}, 1);
  ASSERT_NE(c, nullptr) << PrintGraph(*g);
  ASSERT_NE(s, nullptr) << PrintGraph(*g);
  const std::vector<float> cv = c->constant().ToFloat(), sv = s->constant().ToFloat();
  const std::vector<float> qc = original->FindValue("q_cos")->constant().ToFloat();
  const std::vector<float> qs = original->FindValue("q_sin")->constant().ToFloat();
  const std::vector<float> ks = original->FindValue("k_sin")->constant().ToFloat();
  for (int pos = 0; pos < 8; ++pos) {
    for (int col = 0; col < 128; ++col) {
      const float cw = cv[pos * 128 + col], sw = sv[pos * 128 + col];
      const int d = col % 16, half = d / 8;  // head dim 16: halves of 8
      if (col >= 96) {                       // V
        EXPECT_EQ(cw, 1.f) << pos << " " << col;
        EXPECT_EQ(sw, 0.f) << pos << " " << col;
      } else if (col < 64) {  // Q: cos[pos, half, d % 8]
        EXPECT_EQ(cw, qc[pos * 16 + d]) << pos << " " << col;
        EXPECT_EQ(sw, half == 0 ? -qs[pos * 16 + d] : qs[pos * 16 + d]) << pos << " " << col;
      } else {
        EXPECT_EQ(sw, half == 0 ? -ks[pos * 16 + d] : ks[pos * 16 + d]) << pos << " " << col;
      }
    }
  }
}

TEST(FuseRotaryMatMulTest, DoesNotFireOnOtherForms) {
  // GPT-J's interleaved rotation (pairs of adjacent elements): xh's halves are not h
  // contiguous columns apart. Reported.
  {
    std::string text = ReplaceOnce(kLlamaQkv, "const %q_x_shape : i64[5] = [2, 8, 4, 2, 8]",
                                   "const %q_x_shape : i64[5] = [2, 8, 4, 8, 2]");
    text = ReplaceOnce(text, "%q_x : f16[2,8,4,2,8] = Reshape(%view, %q_x_shape) @node_add_4/x",
                       "%q_x : f16[2,8,4,8,2] = Reshape(%view, %q_x_shape) @node_add_4/x");
    text = ReplaceOnce(text, "Transpose(%q_x) {perm = [0, 2, 1, 3, 4]}", "Transpose(%q_x) {perm = [0, 2, 1, 4, 3]}");
    FusionReport report;
    bool changed = true;
    RunPass(text, &report, &changed);
    EXPECT_FALSE(changed);
    ::kiln::testing::ExpectOneRejection(report, "layout: ");
  }
  // Q's heads of 8 (halves of 4 columns): whole n8 blocks do not pair. Reported.
  {
    std::string text = ReplaceOnce(kLlamaQkv, "const %q_x_shape : i64[5] = [2, 8, 4, 2, 8]",
                                   "const %q_x_shape : i64[5] = [2, 8, 8, 2, 4]");
    text = ReplaceOnce(text, "%q_x : f16[2,8,4,2,8] = Reshape(%view, %q_x_shape) @node_add_4/x",
                       "%q_x : f16[2,8,8,2,4] = Reshape(%view, %q_x_shape) @node_add_4/x");
    text =
        ReplaceOnce(text, "%q_heads : f16[2,4,8,2,8] = Transpose(%q_x)", "%q_heads : f16[2,8,8,2,4] = Transpose(%q_x)");
    for (const char* v : {"q_swapped", "q_rotated", "q_x_cos", "q_rot_sin", "q_sum"}) {
      text = ReplaceOnce(text, absl::StrCat("%", v, " : f16[2,4,8,2,8]"), absl::StrCat("%", v, " : f16[2,8,8,2,4]"));
    }
    text = ReplaceOnce(text, "const %q_cos : f16[1,1,8,2,8]", "const %q_cos : f16[1,1,8,2,4]");
    text = ReplaceOnce(text, "const %q_sin : f16[1,1,8,2,8]", "const %q_sin : f16[1,1,8,2,4]");
    text = ReplaceOnce(text, "%val_199_pre : f16[2,4,8,2,8] = Mul(%q_sum, %val_198)",
                       "%val_199_pre : f16[2,8,8,2,4] = Mul(%q_sum, %val_198)");
    FusionReport report;
    bool changed = true;
    RunPass(text, &report, &changed);
    EXPECT_FALSE(changed);
    ::kiln::testing::ExpectOneRejection(report, "head dim: ");
  }
  // Tables per batch entry (sequences at other positions): not one table for the
  // product's rows. Reported.
  {
    const std::string text = ReplaceOnce(kLlamaQkv, "const %q_cos : f16[1,1,8,2,8]", "const %q_cos : f16[2,1,8,2,8]");
    FusionReport report;
    bool changed = true;
    RunPass(text, &report, &changed);
    EXPECT_FALSE(changed);
    ::kiln::testing::ExpectOneRejection(report, "tables: ");
  }
  // A product that is not a MatMul's: silent.
  {
    const std::string text = ReplaceOnce(
        kLlamaQkv, "%qkv : f16[2,8,128] = MatMul(%mul_3, %w) @node_linear/siblings",
        "%qkv0 : f16[2,8,128] = MatMul(%mul_3, %w) @node_linear/siblings\n  %qkv : f16[2,8,128] = Relu(%qkv0) @relu");
    FusionReport report;
    bool changed = true;
    RunPass(text, &report, &changed);
    EXPECT_FALSE(changed);
    EXPECT_TRUE(report.rejections.empty()) << report.ToString();
  }
  // Q's rotation read elsewhere (a graph output) or with other signs: K's alone joins
  // the product, Q's stays as it was.
  for (const std::string& text : {ReplaceOnce(kLlamaQkv, "  output %view_3\n", "  output %view_3\n  output %q_sum\n"),
                                  ReplaceOnce(kLlamaQkv, "Mul(%q_swapped, %q_sign)", "Mul(%q_swapped, %q_cos)")}) {
    FusionReport report;
    bool changed = false;
    std::unique_ptr<Graph> g = RunPass(text, &report, &changed);
    EXPECT_TRUE(changed);
    EXPECT_NE(Summary(*g).find("Add @node_add_4\n"), std::string::npos) << Summary(*g);
    EXPECT_EQ(Summary(*g).find("Add @node_add_5\n"), std::string::npos) << Summary(*g);
  }
}

}  // namespace
}  // namespace kiln
