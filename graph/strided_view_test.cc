// Tests for StridedView: the view chains of the attention exports as strides, the
// factor lists GQA's repeat_kv needs, broadcasting of batch dims, and the reshapes
// that have no strided form.
#include "graph/strided_view.h"

#include <gtest/gtest.h>

#include <vector>

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

}  // namespace
}  // namespace kiln
