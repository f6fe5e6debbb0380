// Tests for ToChannelsLast: convs and pools go NHWC with transposes only at the
// region's boundary, layout-agnostic ops stay inside it, and outputs do not change.
#include "graph/to_channels_last.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::ExpectSameOutputs;
using ::kiln::pass_test::ExpectVerifies;
using ::kiln::pass_test::MustParse;
using ::kiln::pass_test::Print;

// Gives every constant of more than one element distinct random values, so a weight
// permuted the wrong way cannot go unnoticed (splat constants are layout-invariant).
void Randomize(Graph& g, uint32_t seed = 11) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (Value* c : g.constants()) {
    if (c->numel() <= 1 || !IsFloating(c->dtype())) continue;
    std::vector<float> v(c->numel());
    for (float& x : v) x = dist(rng);
    // Keep variances positive.
    if (absl::StrContains(c->name(), "var")) {
      for (float& x : v) x = x * x + 0.1f;
    }
    g.SetConstant(c, Tensor::FromFloat(c->dtype(), c->shape(), v));
  }
}

// Parses, randomises the constants, runs the pass (which must fire), checks the
// result verifies and computes the same outputs; returns the graph after the pass.
std::unique_ptr<Graph> Rewrite(const std::string& text) {
  std::unique_ptr<Graph> before = MustParse(text);
  Randomize(*before);
  std::unique_ptr<Graph> g = before->Clone();
  auto changed = ToChannelsLast().Run(*g);
  EXPECT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(changed.ok() && *changed);
  ExpectVerifies(*g);
  ExpectSameOutputs(*before, *g);
  return g;
}

int Count(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node* node : g.nodes()) n += node->op_type() == op;
  return n;
}

// Every node of `op` has channels_last = 1.
void ExpectAllChannelsLast(const Graph& g, const std::string& op) {
  for (const Node* n : g.nodes()) {
    if (n->op_type() != op) continue;
    EXPECT_EQ(n->GetInt("channels_last", 0).value_or(0), 1) << n->Describe();
  }
}

TEST(ToChannelsLastTest, ResNetBlockHasOneTransposeAtTheInput) {
  // Stem, MaxPool, a residual block (1x1 / 3x3 / 1x1 with a projection), GAP,
  // Flatten, classifier. Only the graph input changes layout.
  std::unique_ptr<Graph> g = Rewrite(R"(
graph @main {
  input %x : f32[2,3,16,16]
  const %w0 : f32[8,3,3,3] = splat(0.1)
  const %b0 : f32[8] = splat(0.1)
  const %w1 : f32[4,8,1,1] = splat(0.1)
  const %w2 : f32[4,4,3,3] = splat(0.1)
  const %w3 : f32[16,4,1,1] = splat(0.1)
  const %wp : f32[16,8,1,1] = splat(0.1)
  const %fc : f32[16,5] = splat(0.1)
  %s = Conv(%x, %w0, %b0) {pads = [1, 1, 1, 1], strides = [2, 2]} @stem
  %sr = Relu(%s)
  %p = MaxPool(%sr) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} @pool
  %a = Conv(%p, %w1) @c1
  %ar = Relu(%a)
  %b = Conv(%ar, %w2) {pads = [1, 1, 1, 1]} @c2
  %br = Relu(%b)
  %c = Conv(%br, %w3) @c3
  %proj = Conv(%p, %wp) @proj
  %sum = Add(%c, %proj)
  %out = Relu(%sum)
  %gap = GlobalAveragePool(%out)
  %flat = Flatten(%gap) {axis = 1}
  %logits = MatMul(%flat, %fc)
  output %logits
}
)");
  EXPECT_EQ(Count(*g, "Transpose"), 1) << Print(*g);
  ExpectAllChannelsLast(*g, "Conv");
  ExpectAllChannelsLast(*g, "MaxPool");
  ExpectAllChannelsLast(*g, "GlobalAveragePool");
  const std::string out = Print(*g);
  EXPECT_NE(out.find("%x/nhwc : f32[2,16,16,3] = Transpose(%x) {perm = [0, 2, 3, 1]}"), std::string::npos) << out;
  EXPECT_NE(out.find("const %w0/nhwc : f32[8,3,3,3]"), std::string::npos) << out;
  EXPECT_NE(out.find("const %w3/nhwc : f32[16,1,1,4]"), std::string::npos) << out;
  EXPECT_NE(out.find("%flat : f32[2,16] = Flatten(%gap/nhwc) {axis = 1}"), std::string::npos) << out;
  EXPECT_NE(out.find("%out/nhwc : f32[2,4,4,16] = Relu(%sum/nhwc)"), std::string::npos) << out;
  // The NCHW weights are gone.
  EXPECT_EQ(out.find("const %w1 :"), std::string::npos) << out;
}

TEST(ToChannelsLastTest, MobileNetBlockWithNchwOutput) {
  // Expand 1x1 + ReLU6 (Clip with scalar bounds), depthwise 3x3, per-channel scale
  // ([C,1,1] constant), project 1x1, residual Add. The output is the block's NCHW
  // value: one Transpose back at the end, writing %y itself.
  std::unique_ptr<Graph> g = Rewrite(R"(
graph @main {
  input %x : f32[1,8,9,7]
  const %we : f32[24,8,1,1] = splat(0.1)
  const %be : f32[24] = splat(0.1)
  const %wd : f32[24,1,3,3] = splat(0.1)
  const %bd : f32[24] = splat(0.1)
  const %k : f32[24,1,1] = splat(0.1)
  const %wp : f32[8,24,1,1] = splat(0.1)
  const %lo : f32[] = [0.0]
  const %hi : f32[] = [6.0]
  %e = Conv(%x, %we, %be) @expand
  %e6 = Clip(%e, %lo, %hi)
  %d = Conv(%e6, %wd, %bd) {group = 24, pads = [1, 1, 1, 1]} @dw
  %d6 = Clip(%d, %lo, %hi)
  %ds = Mul(%d6, %k)
  %p = Conv(%ds, %wp) @project
  %y = Add(%p, %x)
  output %y
}
)");
  const std::string out = Print(*g);
  EXPECT_EQ(Count(*g, "Transpose"), 2) << out;
  ExpectAllChannelsLast(*g, "Conv");
  EXPECT_NE(out.find("const %wd/nhwc : f32[24,3,3,1]"), std::string::npos) << out;
  EXPECT_NE(out.find("const %k/nhwc : f32[24]"), std::string::npos) << out;
  EXPECT_NE(out.find("= Add(%p/nhwc, %x/nhwc)"), std::string::npos) << out;
  EXPECT_NE(out.find("%y : f32[1,8,9,7] = Transpose(%y/nhwc) {perm = [0, 3, 1, 2]}"), std::string::npos) << out;
  EXPECT_EQ(g->outputs()[0]->name(), "y");
}

TEST(ToChannelsLastTest, ConvOutputIsTheGraphOutput) {
  std::unique_ptr<Graph> g = Rewrite(R"(
graph @main {
  input %x : f32[1,3,6,5]
  const %w : f32[4,3,3,2] = splat(0.1)
  const %b : f32[4] = splat(0.1)
  %y = Conv(%x, %w, %b) {pads = [1, 0, 1, 1], strides = [2, 1]} @conv
  output %y
}
)");
  const std::string out = Print(*g);
  EXPECT_EQ(Count(*g, "Transpose"), 2) << out;
  EXPECT_NE(out.find("const %w/nhwc : f32[4,3,2,3]"), std::string::npos) << out;
  EXPECT_NE(out.find("%x/nhwc : f32[1,6,5,3] = Transpose(%x) {perm = [0, 2, 3, 1]}"), std::string::npos) << out;
  EXPECT_NE(out.find("%y/nhwc : f32[1,3,5,4] = Conv(%x/nhwc, %w/nhwc, %b) {channels_last = 1, pads = [1, 0, 1, "
                     "1], strides = [2, 1]}"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("%y : f32[1,4,3,5] = Transpose(%y/nhwc) {perm = [0, 3, 1, 2]}\n  output %y"),
            std::string::npos)
      << out;
}

TEST(ToChannelsLastTest, ConcatBatchNormAndAveragePoolStayInside) {
  // DenseNet-style: Concat on channels, then a BatchNormalization that canonicalisation
  // could not fold (it follows a Concat), ReLU, conv, average pool.
  std::unique_ptr<Graph> g = Rewrite(R"(
graph @main {
  input %x : f32[2,4,8,8]
  const %w1 : f32[6,4,3,3] = splat(0.1)
  const %scale : f32[10] = splat(1.0)
  const %beta : f32[10] = splat(0.0)
  const %mean : f32[10] = splat(0.0)
  const %var : f32[10] = splat(1.0)
  const %w2 : f32[5,10,1,1] = splat(0.1)
  %a = Conv(%x, %w1) {pads = [1, 1, 1, 1]} @c1
  %cat = Concat(%x, %a) {axis = 1}
  %bn = BatchNormalization(%cat, %scale, %beta, %mean, %var) {epsilon = 0.001} @bn
  %r = Relu(%bn)
  %c = Conv(%r, %w2) @c2
  %p = AveragePool(%c) {kernel_shape = [2, 2], strides = [2, 2]} @pool
  output %p
}
)");
  const std::string out = Print(*g);
  EXPECT_EQ(Count(*g, "BatchNormalization"), 0) << out;
  EXPECT_EQ(Count(*g, "Transpose"), 2) << out;  // %x in, %p out
  EXPECT_NE(out.find("%cat/nhwc : f32[2,8,8,10] = Concat(%x/nhwc, %a/nhwc) {axis = 3}"), std::string::npos) << out;
  ExpectAllChannelsLast(*g, "AveragePool");
}

TEST(ToChannelsLastTest, InverseTransposesCancel) {
  // A model fed NHWC (as TensorFlow exports are): its Transpose to NCHW and the
  // Transpose back after the conv both disappear.
  std::unique_ptr<Graph> g = Rewrite(R"(
graph @main {
  input %x : f32[1,7,6,3]
  const %w : f32[4,3,3,3] = splat(0.1)
  %t = Transpose(%x) {perm = [0, 3, 1, 2]}
  %c = Conv(%t, %w) {pads = [1, 1, 1, 1]} @conv
  %back = Transpose(%c) {perm = [0, 2, 3, 1]}
  %y = Relu(%back)
  output %y
}
)");
  const std::string out = Print(*g);
  EXPECT_EQ(Count(*g, "Transpose"), 0) << out;
  EXPECT_NE(out.find("%c/nhwc : f32[1,7,6,4] = Conv(%x, %w/nhwc) {channels_last = 1, pads = [1, 1, 1, 1]}"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("%y : f32[1,7,6,4] = Relu(%c/nhwc)"), std::string::npos) << out;
}

TEST(ToChannelsLastTest, LayoutAwareReadersGetTheNchwValueBack) {
  // Softmax over channels is not layout-agnostic; an operand of lower rank that is
  // computed (not a constant) would need a Reshape; a Flatten of a value with
  // spatial dims > 1 reads NCHW order. Each reads the NCHW value through one
  // shared Transpose.
  std::unique_ptr<Graph> g = Rewrite(R"(
graph @main {
  input %x : f32[1,3,5,5]
  input %v : f32[5]
  const %w : f32[4,3,1,1] = splat(0.1)
  %c = Conv(%x, %w) @conv
  %s = Softmax(%c) {axis = 1}
  %a = Add(%c, %v)
  %f = Flatten(%c) {axis = 1}
  output %s, %a, %f
}
)");
  const std::string out = Print(*g);
  EXPECT_EQ(Count(*g, "Transpose"), 2) << out;
  EXPECT_NE(out.find("%c : f32[1,4,5,5] = Transpose(%c/nhwc) {perm = [0, 3, 1, 2]}"), std::string::npos) << out;
  EXPECT_NE(out.find("= Softmax(%c)"), std::string::npos) << out;
  EXPECT_NE(out.find("= Add(%c, %v)"), std::string::npos) << out;
  EXPECT_NE(out.find("= Flatten(%c)"), std::string::npos) << out;
}

TEST(ToChannelsLastTest, SqueezeExcitationScaleStaysNhwc) {
  // GAP -> 1x1 convs -> Sigmoid gives a [N, C, 1, 1] scale that multiplies the
  // feature map: both operands are NHWC, so the product broadcasts the same way.
  std::unique_ptr<Graph> g = Rewrite(R"(
graph @main {
  input %x : f32[2,8,6,6]
  const %w : f32[8,8,3,3] = splat(0.1)
  const %w1 : f32[2,8,1,1] = splat(0.1)
  const %w2 : f32[8,2,1,1] = splat(0.1)
  %f = Conv(%x, %w) {pads = [1, 1, 1, 1]} @conv
  %g = GlobalAveragePool(%f)
  %s1 = Conv(%g, %w1) @se1
  %r = Relu(%s1)
  %s2 = Conv(%r, %w2) @se2
  %sig = Sigmoid(%s2)
  %y = Mul(%f, %sig)
  output %y
}
)");
  EXPECT_EQ(Count(*g, "Transpose"), 2) << Print(*g);
}

TEST(ToChannelsLastTest, LeavesGraphsWithoutTwoDimensionalConvsAndPools) {
  ExpectNoChange<ToChannelsLast>(R"(
graph @main {
  input %x : f32[2,8]
  const %w : f32[8,4] = splat(0.25)
  %y = MatMul(%x, %w)
  %r = Relu(%y)
  output %r
}
)");
  // 1-D conv and pool: channels_last covers 2-D only.
  ExpectNoChange<ToChannelsLast>(R"(
graph @main {
  input %x : f32[1,3,9]
  const %w : f32[4,3,3] = splat(0.25)
  %c = Conv(%x, %w)
  %p = MaxPool(%c) {kernel_shape = [2]}
  output %p
}
)");
}

TEST(ToChannelsLastTest, HasConv2D) {
  EXPECT_TRUE(HasConv2D(*MustParse(R"(
graph @main {
  input %x : f32[1,3,5,5]
  const %w : f32[4,3,1,1] = splat(0.1)
  %c = Conv(%x, %w)
  output %c
}
)")));
  EXPECT_FALSE(HasConv2D(*MustParse(R"(
graph @main {
  input %x : f32[1,3,9]
  const %w : f32[4,3,3] = splat(0.25)
  %c = Conv(%x, %w)
  output %c
}
)")));
}

}  // namespace
}  // namespace kiln
