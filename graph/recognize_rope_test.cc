// Tests for RecognizeRope on llama.dynamo's rotary embedding (cut from the zoo,
// shrunk: 2 heads, 4 positions, D = 8; cos/sin tables [1,1,S,D] as the export folds
// them), on the query and the key of a layer, and the forms that must stay.
#include "graph/recognize_rope.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::ExpectSameOutputs;
using ::kiln::pass_test::MustParse;

// q * cos + rotate_half(q) * sin, as llama.dynamo writes it (`extra` goes before the
// output, `concat` is the rotate_half Concat's operands).
std::string Rope(const std::string& concat = "%neg, %slice_4", const std::string& extra = "") {
  return absl::StrCat(R"(
graph @main {
  input %q : f32[2,2,4,8]
  input %cos : f32[1,1,4,8]
  input %sin : f32[1,1,4,8]
  const %zero : i64[1] = [0]
  const %half : i64[1] = [4]
  const %axis : i64[1] = [3]
  const %end : i64[1] = [9223372036854775807]
  const %one : i64[1] = [1]
  %mul_4 = Mul(%q, %cos) @node_mul_4
  %slice_4 = Slice(%q, %zero, %half, %axis, %one) @node_slice_4
  %slice_5 = Slice(%q, %half, %end, %axis, %one) @node_slice_5
  %neg = Neg(%slice_5) @node_neg
  %cat_2 = Concat()",
                      concat, R"() {axis = -1} @node_cat_2
  %mul_5 = Mul(%cat_2, %sin) @node_mul_5
  %add_4 = Add(%mul_4, %mul_5) @node_add_4
)",
                      extra, R"(
  output %add_4
}
)");
}

TEST(RecognizeRopeTest, LlamaDynamoRotaryEmbedding) {
  std::unique_ptr<Graph> g = MustParse(Rope());
  std::unique_ptr<Graph> before = g->Clone();
  absl::StatusOr<bool> changed = RecognizeRope().Run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  // No Concat, Neg or half Slices left: Reshapes to [2,2,4,2,4], one Slice of step -1
  // over the halves, the sign, the products and the sum, and the Reshape back.
  std::string ops;
  for (const Node* n : g->nodes()) absl::StrAppend(&ops, n->op_type(), " ");
  EXPECT_EQ(ops, "Reshape Reshape Reshape Slice Mul Mul Mul Add Reshape ");
  const Value* y = g->outputs()[0];
  EXPECT_EQ(y->name(), "add_4");
  EXPECT_EQ(y->producer()->op_type(), "Reshape");
  EXPECT_EQ(y->producer()->input(0)->shape(), (Shape{2, 2, 4, 2, 4}));
  ExpectSameOutputs(*before, *g);
}

// The query as the head split of [B,S,H,D] read by the rotation alone: D is split
// before the Transpose, which fuse-pointwise then reads through strides.
TEST(RecognizeRopeTest, HeadSplitTransposeMovesAfterTheSplitOfD) {
  std::unique_ptr<Graph> g = MustParse(absl::StrReplaceAll(
      Rope(), {{"input %q : f32[2,2,4,8]", "input %q0 : f32[2,4,2,8]"},
               {"const %one : i64[1] = [1]", "const %one : i64[1] = [1]\n  %q = Transpose(%q0) {perm = [0, 2, 1, 3]}"}}));
  std::unique_ptr<Graph> before = g->Clone();
  absl::StatusOr<bool> changed = RecognizeRope().Run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  const Node* heads = nullptr;
  for (const Node* n : g->nodes()) {
    if (n->op_type() == "Transpose") heads = n;
  }
  ASSERT_NE(heads, nullptr);
  EXPECT_EQ(heads->input(0)->shape(), (Shape{2, 4, 2, 2, 4}));
  EXPECT_EQ(heads->input(0)->producer()->input(0)->name(), "q0");
  EXPECT_EQ(heads->GetInts("perm").value(), (std::vector<int64_t>{0, 2, 1, 3, 4}));
  ExpectSameOutputs(*before, *g);
}

TEST(RecognizeRopeTest, WhatMustStay) {
  // Halves the other way round (x1 first): not rotate_half.
  ExpectNoChange<RecognizeRope>(Rope("%slice_4, %neg"));
  // The rotated value read elsewhere too.
  ExpectNoChange<RecognizeRope>(Rope("%neg, %slice_4", "  output %cat_2"));
  // Halves of two different tensors.
  ExpectNoChange<RecognizeRope>(absl::StrReplaceAll(
      Rope(), {{"%slice_4 = Slice(%q,", "%slice_4 = Slice(%k,"}, {"input %cos", "input %k : f32[2,2,4,8]\n  input %cos"}}));
  // Tables of another width than D (a [1,1,4,1] cos broadcast along the head dim).
  ExpectNoChange<RecognizeRope>(
      absl::StrReplaceAll(Rope(), {{"input %cos : f32[1,1,4,8]", "input %cos : f32[1,1,4,1]"}}));
}

}  // namespace
}  // namespace kiln
