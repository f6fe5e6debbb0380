// Tests for StridedView: the view chains of the attention exports as strides, the
// factor lists GQA's repeat_kv needs, broadcasting of batch dims, the selects and
// slices that move the start, and the reshapes that have no strided form.
#include "graph/strided_view.h"

#include <gtest/gtest.h>

#include <vector>

#include "graph/pass_test_util.h"

namespace kiln {
namespace {

std::vector<int64_t> Strides(const StridedView& v) {
  std::vector<int64_t> out;
  for (int d = 0; d < v.rank(); ++d) out.push_back(v.Stride(d).value_or(-1));
  return out;
}

TEST(StridedViewTest, DenseAndTranspose) {
  StridedView v = StridedView::Dense({2, 3, 4});
  EXPECT_EQ(Strides(v), (std::vector<int64_t>{12, 4, 1}));
  ASSERT_TRUE(v.Transpose({2, 0, 1}));
  EXPECT_EQ(v.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(Strides(v), (std::vector<int64_t>{1, 12, 4}));
  EXPECT_FALSE(v.Transpose({0, 0, 1}));
  EXPECT_EQ(v.shape(), (Shape{4, 2, 3}));  // unchanged
}

// BERT's head split of a [B*S, 3*H*D] QKV piece, [1,128,64] -> [2,64,2,32] ->
// Transpose [0,2,1,3]; then torch's keys: [B*H,S,D] -> Transpose -> [B,H,D,S].
TEST(StridedViewTest, HeadSplitAndTorchKeyReshapes) {
  StridedView v = StridedView::Dense({1, 128, 64});
  ASSERT_TRUE(v.Reshape({2, 64, 2, 32}));
  ASSERT_TRUE(v.Transpose({0, 2, 1, 3}));
  EXPECT_EQ(Strides(v), (std::vector<int64_t>{4096, 32, 64, 1}));
  ASSERT_TRUE(v.Reshape({4, 64, 32}));
  // Batch and head merged: not one stride, two factors.
  EXPECT_EQ(v.Stride(0), std::nullopt);
  EXPECT_EQ(v.factors(0), (std::vector<ViewFactor>{{2, 4096}, {2, 32}}));
  ASSERT_TRUE(v.Transpose({0, 2, 1}));
  ASSERT_TRUE(v.Reshape({2, 2, 32, 64}));
  EXPECT_EQ(Strides(v), (std::vector<int64_t>{4096, 32, 1, 64}));
}

// Llama's repeat_kv of V: [2,64,32] -> [2,64,2,16] -> Transpose -> Unsqueeze ->
// Expand [2,2,2,64,16] -> Reshape [2,4,64,16]: query head h reads key/value head h / 2.
TEST(StridedViewTest, RepeatKvAsFactors) {
  StridedView v = StridedView::Dense({2, 64, 32});
  ASSERT_TRUE(v.Reshape({2, 64, 2, 16}));
  ASSERT_TRUE(v.Transpose({0, 2, 1, 3}));
  ASSERT_TRUE(v.Reshape({2, 2, 1, 64, 16}));
  ASSERT_TRUE(v.Expand({2, 2, 2, 64, 16}));
  EXPECT_EQ(v.factors(2), (std::vector<ViewFactor>{{2, 0}}));
  ASSERT_TRUE(v.Reshape({2, 4, 64, 16}));
  EXPECT_EQ(v.factors(1), (std::vector<ViewFactor>{{2, 16}, {2, 0}}));
  EXPECT_EQ(v.Stride(2), 32);
  EXPECT_EQ(v.Stride(3), 1);
  std::optional<std::vector<ViewFactor>> batch = v.BatchFactors(2, {2, 4});
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(*batch, (std::vector<ViewFactor>{{2, 2048}, {2, 16}, {2, 0}}));
}

TEST(StridedViewTest, BatchFactorsBroadcast) {
  // A [1,4,S,D] operand against [2,4] batch dims, a [S,D] one against [3]: the missing
  // and size-1 dims read with stride 0; a mismatching dim has no factors.
  const StridedView v = StridedView::Dense({1, 4, 8, 16});
  EXPECT_EQ(*v.BatchFactors(2, {2, 4}), (std::vector<ViewFactor>{{2, 0}, {4, 128}}));
  EXPECT_EQ(*StridedView::Dense({8, 16}).BatchFactors(2, {3}), (std::vector<ViewFactor>{{3, 0}}));
  EXPECT_EQ(v.BatchFactors(2, {2, 3}), std::nullopt);
  EXPECT_EQ(v.BatchFactors(2, {}), std::nullopt);  // more batch dims than the target
}

TEST(StridedViewTest, ReshapesWithoutStridedForm) {
  // [2,3] transposed is [3,2] of strides [1,3]; as [2,3] the first row would take
  // elements 0, 3, 1: no strides reach that. The view stays as it was.
  StridedView v = StridedView::Dense({2, 3});
  ASSERT_TRUE(v.Transpose({1, 0}));
  EXPECT_FALSE(v.Reshape({2, 3}));
  EXPECT_EQ(v.shape(), (Shape{3, 2}));
  EXPECT_FALSE(v.Reshape({7}));     // element count
  EXPECT_FALSE(v.Reshape({0, 6}));  // empty
  // Merging them is fine: one dim of two factors.
  ASSERT_TRUE(v.Reshape({6}));
  EXPECT_EQ(v.factors(0), (std::vector<ViewFactor>{{3, 1}, {2, 3}}));
  // Expand only broadcasts size-1 dims.
  StridedView w = StridedView::Dense({2, 1});
  EXPECT_FALSE(w.Expand({3, 4}));
  ASSERT_TRUE(w.Expand({5, 2, 4}));
  EXPECT_EQ(Strides(w), (std::vector<int64_t>{0, 1, 0}));
}

// torchvision's packed in_proj (ViT): [S,B,3E] -> [S,B,3,E] -> Unsqueeze(0) ->
// Transpose [3,1,2,0,4] -> Squeeze(-2) -> Gather(index 1, axis 0) is K: the rows of
// [S,B,E] that start E elements in.
TEST(StridedViewTest, SelectOfAPackedProduct) {
  StridedView v = StridedView::Dense({5, 2, 48});
  ASSERT_TRUE(v.Reshape({5, 2, 3, 16}));
  ASSERT_TRUE(v.Reshape({1, 5, 2, 3, 16}));
  ASSERT_TRUE(v.Transpose({3, 1, 2, 0, 4}));
  ASSERT_TRUE(v.Reshape({3, 5, 2, 16}));
  ASSERT_TRUE(v.Select(0, 1, /*keep_dim=*/false));
  EXPECT_EQ(v.shape(), (Shape{5, 2, 16}));
  EXPECT_EQ(v.offset(), 16);
  EXPECT_EQ(Strides(v), (std::vector<int64_t>{96, 48, 1}));
  // A kept dim becomes size 1; a select through a dim of two factors sums both.
  StridedView w = StridedView::Dense({4, 6});
  ASSERT_TRUE(w.Transpose({1, 0}));
  ASSERT_TRUE(w.Reshape({24}));  // factors (6, 1), (4, 6)
  ASSERT_TRUE(w.Select(0, 9, /*keep_dim=*/true));
  EXPECT_EQ(w.shape(), (Shape{1}));
  EXPECT_EQ(w.offset(), 2 * 1 + 1 * 6);
  EXPECT_FALSE(w.Select(0, 1, false));  // out of range
}

TEST(StridedViewTest, SlicesMoveTheStartAndScaleTheStride) {
  StridedView v = StridedView::Dense({8, 10});
  ASSERT_TRUE(v.Slice(0, 2, 3, 2));  // rows 2, 5
  ASSERT_TRUE(v.Slice(1, 4, 1, 6));  // columns 4..9
  EXPECT_EQ(v.shape(), (Shape{2, 6}));
  EXPECT_EQ(v.offset(), 2 * 10 + 4);
  EXPECT_EQ(Strides(v), (std::vector<int64_t>{30, 1}));
  EXPECT_FALSE(v.Slice(1, 4, 1, 3));   // past the end
  EXPECT_FALSE(v.Slice(1, 0, -1, 2));  // reversed: not taken
  // A dim of two factors takes a slice only when it keeps the dim whole.
  StridedView w = StridedView::Dense({4, 6});
  ASSERT_TRUE(w.Transpose({1, 0}));
  ASSERT_TRUE(w.Reshape({24}));
  EXPECT_TRUE(w.Slice(0, 0, 1, 24));
  EXPECT_FALSE(w.Slice(0, 1, 1, 4));
}

// Apply takes Gather of one constant index (scalar: the dim goes; [1]: it stays) and
// constant Slices, as the exporters write them; a Gather of two indices is no view.
TEST(StridedViewTest, ApplyGatherAndSliceNodes) {
  std::unique_ptr<Graph> g = pass_test::MustParse(R"(
graph @main {
  input %x : f16[3,4,8]
  const %i : i64[] = [2]
  const %i1 : i64[1] = [-1]
  const %two : i64[2] = [0, 1]
  const %starts : i64[1] = [2]
  const %ends : i64[1] = [8]
  const %axes : i64[1] = [-1]
  %a = Gather(%x, %i) {axis = 0}
  %b = Gather(%x, %i1) {axis = 1}
  %c = Gather(%x, %two) {axis = 0}
  %d = Slice(%x, %starts, %ends, %axes)
  output %a
  output %b
  output %c
  output %d
}
)");
  auto node = [&](const char* out) { return g->FindValue(out)->producer(); };
  StridedView a = StridedView::Dense({3, 4, 8});
  ASSERT_TRUE(a.Apply(*node("a")));
  EXPECT_EQ(a.shape(), (Shape{4, 8}));
  EXPECT_EQ(a.offset(), 64);
  StridedView b = StridedView::Dense({3, 4, 8});
  ASSERT_TRUE(b.Apply(*node("b")));
  EXPECT_EQ(b.shape(), (Shape{3, 1, 8}));
  EXPECT_EQ(b.offset(), 24);
  EXPECT_FALSE(IsViewNode(*node("c")));
  StridedView d = StridedView::Dense({3, 4, 8});
  ASSERT_TRUE(d.Apply(*node("d")));
  EXPECT_EQ(d.shape(), (Shape{3, 4, 6}));
  EXPECT_EQ(d.offset(), 2);
  EXPECT_EQ(Strides(d), (std::vector<int64_t>{32, 8, 1}));
}

}  // namespace
}  // namespace kiln
