// Tests for FoldBatchNorm: text graph in, expected text out, outputs unchanged.
#include "graph/fold_batch_norm.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectSameOutputs;
using ::kiln::pass_test::MustParse;
using ::kiln::pass_test::Print;
using ::kiln::pass_test::RunPass;

TEST(FoldBatchNormTest, FoldsIntoConvWeightsAndBias) {
  // s = scale / sqrt(var + eps) = [2, 1] / 2 = [1, 0.5];
  // W' = W * s[m]; B' = (B - mean) * s + beta = [(0.5 - 0.5) * 1 + 1, (-1 - 1) * 0.5 + 0].
  const std::string out = RunPass<FoldBatchNorm>(R"(
graph @main {
  input %x : f32[1,2,3,3]
  const %w : f32[2,2,1,1] = [1.0, 2.0, 3.0, 4.0]
  const %b : f32[2] = [0.5, -1.0]
  const %scale : f32[2] = [2.0, 1.0]
  const %beta : f32[2] = [1.0, 0.0]
  const %mean : f32[2] = [0.5, 1.0]
  const %var : f32[2] = [3.0, 3.0]
  %c = Conv(%x, %w, %b) {strides = [1, 1]} @conv
  %y = BatchNormalization(%c, %scale, %beta, %mean, %var) {epsilon = 1.0} @bn
  %r = Relu(%y)
  output %r
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[1,2,3,3]
  const %w/bn_folded : f32[2,2,1,1] = [1.0, 2.0, 1.5, 2.0]
  const %b/bn_folded : f32[2] = [1.0, -1.0]
  %y : f32[1,2,3,3] = Conv(%x, %w/bn_folded, %b/bn_folded) {strides = [1, 1]}
  %r : f32[1,2,3,3] = Relu(%y)
  output %r
}
)");
}

TEST(FoldBatchNormTest, FoldedConvKeepsItsNameAndTheBnOutput) {
  std::unique_ptr<Graph> g = MustParse(R"(
graph @main {
  input %x : f32[1,3,5,5]
  const %w : f32[4,3,3,3] = splat(0.25)
  const %scale : f32[4] = [1.0, 2.0, 3.0, 4.0]
  const %beta : f32[4] = [0.1, 0.2, 0.3, 0.4]
  const %mean : f32[4] = [-1.0, 0.0, 1.0, 2.0]
  const %var : f32[4] = [0.5, 1.0, 2.0, 4.0]
  %c = Conv(%x, %w) {pads = [1, 1, 1, 1]} @conv1
  %y = BatchNormalization(%c, %scale, %beta, %mean, %var) @bn1
  output %y
}
)");
  std::unique_ptr<Graph> before = g->Clone();
  auto changed = FoldBatchNorm().Run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  ASSERT_EQ(g->num_nodes(), 1);
  const Node* conv = g->nodes()[0];
  EXPECT_EQ(conv->op_type(), "Conv");
  EXPECT_EQ(conv->name(), "conv1");
  EXPECT_EQ(conv->output(0)->name(), "y");
  EXPECT_TRUE(g->IsGraphOutput(conv->output(0)));
  EXPECT_TRUE(conv->GetInts("pads").ok());
  // Without a Conv bias the folded one is named after the Conv.
  EXPECT_EQ(conv->input(2)->name(), "conv1/bias_bn_folded");
  ExpectSameOutputs(*before, *g);
}

TEST(FoldBatchNormTest, StandaloneBecomesPerChannelMulAdd) {
  // s = [1, 0.5, 0.25], t = beta - mean * s = [1 - 1, 0 - 1, 2 - 0.5].
  const std::string out = RunPass<FoldBatchNorm>(R"(
graph @main {
  input %x : f32[2,3,4]
  const %scale : f32[3] = [1.0, 1.0, 1.0]
  const %beta : f32[3] = [1.0, 0.0, 2.0]
  const %mean : f32[3] = [1.0, 2.0, 2.0]
  const %var : f32[3] = [0.0, 3.0, 15.0]
  %r = Relu(%x)
  %y = BatchNormalization(%r, %scale, %beta, %mean, %var) {epsilon = 1.0} @bn
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[2,3,4]
  const %bn/scale : f32[3,1] = [1.0, 0.5, 0.25]
  const %bn/shift : f32[3,1] = [0.0, -1.0, 1.5]
  %r : f32[2,3,4] = Relu(%x)
  %y/scaled : f32[2,3,4] = Mul(%r, %bn/scale)
  %y : f32[2,3,4] = Add(%y/scaled, %bn/shift)
  output %y
}
)");
}

TEST(FoldBatchNormTest, StandaloneOnRankTwoInputAndNodeNames) {
  std::unique_ptr<Graph> g = MustParse(R"(
graph @main {
  input %x : f32[5,3]
  const %scale : f32[3] = [0.5, 1.5, -2.0]
  const %beta : f32[3] = [0.1, 0.2, 0.3]
  const %mean : f32[3] = [0.3, -0.2, 0.1]
  const %var : f32[3] = [1.0, 0.25, 4.0]
  %y = BatchNormalization(%x, %scale, %beta, %mean, %var) @bn
  output %y
}
)");
  std::unique_ptr<Graph> before = g->Clone();
  ASSERT_TRUE(FoldBatchNorm().Run(*g).ok());
  ASSERT_EQ(g->num_nodes(), 2);
  EXPECT_EQ(g->nodes()[0]->op_type(), "Mul");
  EXPECT_EQ(g->nodes()[0]->name(), "bn");
  EXPECT_EQ(g->nodes()[0]->input(1)->shape(), (Shape{3}));
  EXPECT_EQ(g->nodes()[1]->op_type(), "Add");
  EXPECT_EQ(g->nodes()[1]->name(), "bn/bias");
  ExpectSameOutputs(*before, *g);
}

TEST(FoldBatchNormTest, DoesNotFoldIntoConvWhoseOutputIsReadElsewhere) {
  // The Conv keeps its weights; the BN still becomes Mul + Add.
  const std::string out = RunPass<FoldBatchNorm>(R"(
graph @main {
  input %x : f32[1,2,2,2]
  const %w : f32[2,2,1,1] = [1.0, 2.0, 3.0, 4.0]
  const %scale : f32[2] = [2.0, 2.0]
  const %beta : f32[2] = [0.0, 1.0]
  const %mean : f32[2] = [0.0, 0.0]
  const %var : f32[2] = [3.0, 3.0]
  %c = Conv(%x, %w)
  %y = BatchNormalization(%c, %scale, %beta, %mean, %var) {epsilon = 1.0}
  %s = Add(%c, %y)
  output %s
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[1,2,2,2]
  const %w : f32[2,2,1,1] = [1.0, 2.0, 3.0, 4.0]
  const %BatchNormalization_1/scale : f32[2,1,1] = splat(1.0)
  const %BatchNormalization_1/shift : f32[2,1,1] = [0.0, 1.0]
  %c : f32[1,2,2,2] = Conv(%x, %w)
  %y/scaled : f32[1,2,2,2] = Mul(%c, %BatchNormalization_1/scale)
  %y : f32[1,2,2,2] = Add(%y/scaled, %BatchNormalization_1/shift)
  %s : f32[1,2,2,2] = Add(%c, %y)
  output %s
}
)");
}

TEST(FoldBatchNormTest, DoesNotFireOnNonConstantParameters) {
  std::unique_ptr<Graph> g = MustParse(R"(
graph @main {
  input %x : f32[1,2,2,2]
  input %scale : f32[2]
  const %w : f32[2,2,1,1] = [1.0, 2.0, 3.0, 4.0]
  const %beta : f32[2] = [0.0, 1.0]
  const %mean : f32[2] = [0.0, 0.0]
  const %var : f32[2] = [3.0, 3.0]
  %c = Conv(%x, %w)
  %y = BatchNormalization(%c, %scale, %beta, %mean, %var)
  output %y
}
)");
  const std::string before = Print(*g);
  auto changed = FoldBatchNorm().Run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(Print(*g), before);
}

TEST(FoldBatchNormTest, DoesNotFoldIntoConvWithComputedWeights) {
  // W is a graph input: the BN is still rewritten standalone, the Conv kept.
  const std::string out = RunPass<FoldBatchNorm>(R"(
graph @main {
  input %x : f32[1,2,2,2]
  input %w : f32[2,2,1,1]
  const %scale : f32[2] = [2.0, 2.0]
  const %beta : f32[2] = [0.0, 1.0]
  const %mean : f32[2] = [0.0, 0.0]
  const %var : f32[2] = [3.0, 3.0]
  %c = Conv(%x, %w)
  %y = BatchNormalization(%c, %scale, %beta, %mean, %var) {epsilon = 1.0}
  output %y
}
)");
  EXPECT_NE(out.find("= Conv(%x, %w)\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("= BatchNormalization("), std::string::npos) << out;
}

}  // namespace
}  // namespace kiln
