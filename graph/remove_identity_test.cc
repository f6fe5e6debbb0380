// Tests for RemoveIdentity: text graph in, expected text out, outputs unchanged.
#include "graph/remove_identity.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::MustParse;
using ::kiln::pass_test::Print;
using ::kiln::pass_test::RunPass;

TEST(RemoveIdentityTest, RemovesIdentityAndInferenceDropout) {
  const std::string out = RunPass<RemoveIdentity>(R"(
graph @main {
  input %x : f32[2,3]
  const %ratio : f32[] = [0.1]
  const %train : bool[] = [false]
  %a = Identity(%x)
  %b = Relu(%a)
  %c = Identity(%b)
  %d = Dropout(%c, %ratio)
  %e, %mask = Dropout(%d, %ratio, %train)
  %y = Tanh(%e)
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[2,3]
  %b : f32[2,3] = Relu(%x)
  %y : f32[2,3] = Tanh(%b)
  output %y
}
)");
}

TEST(RemoveIdentityTest, KeepsGraphOutputsUsedMasksAndTrainingMode) {
  // %i is a graph output (its name must stay); %m is read; %t is computed.
  const std::string in = R"(
graph @main {
  input %x : f32[4]
  %i = Identity(%x)
  %r = Relu(%i)
  %d, %m = Dropout(%r)
  %n = Not(%m)
  output %i
  output %d
  output %n
}
)";
  ExpectNoChange<RemoveIdentity>(in);
}

TEST(RemoveIdentityTest, KeepsDropoutWithNonConstantTrainingMode) {
  std::unique_ptr<Graph> g = MustParse(R"(
graph @main {
  input %x : f32[4]
  input %t : bool[]
  %d = Dropout(%x, _, %t)
  %y = Relu(%d)
  output %y
}
)");
  const std::string before = Print(*g);
  auto changed = RemoveIdentity().Run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(Print(*g), before);
}

TEST(RemoveIdentityTest, OnlyTheOutputIdentityOfAChainStays) {
  const std::string out = RunPass<RemoveIdentity>(R"(
graph @main {
  input %x : f32[3]
  %a = Identity(%x)
  %b = Identity(%a)
  %y = Identity(%b)
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[3]
  %y : f32[3] = Identity(%x)
  output %y
}
)");
}

// Swin-T's window attention as the legacy exporter writes it for a 56 x 56 map
// (a whole number of 7 x 7 windows): a Pad of zeros before the partition, and the
// crop after it, two Slices (the second with an INT64_MAX end) that take everything.
TEST(RemoveIdentityTest, RemovesSwinsZeroPadAndFullCrop) {
  const std::string out = RunPass<RemoveIdentity>(R"(
graph @main {
  input %x : f32[1,56,56,16]
  const %pads : i64[8] = [0, 0, 0, 0, 0, 0, 0, 0]
  const %zero : i64[1] = [0]
  const %one : i64[1] = [1]
  const %two : i64[1] = [2]
  const %h : i64[1] = [56]
  const %max : i64[1] = [9223372036854775807]
  %p = Pad(%x, %pads) {mode = "constant"}
  %r = Relu(%p)
  %s1 = Slice(%r, %zero, %h, %one, %one)
  %s2 = Slice(%s1, %zero, %max, %two, %one)
  %y = Tanh(%s2)
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[1,56,56,16]
  %r : f32[1,56,56,16] = Relu(%x)
  %y : f32[1,56,56,16] = Tanh(%r)
  output %y
}
)");
}

// Pads and Slices that change the tensor stay: a pad of one row, a crop, a step of 2
// and a reversal (each read by a Relu, not a graph output).
TEST(RemoveIdentityTest, KeepsPadsAndSlicesThatChangeTheTensor) {
  ExpectNoChange<RemoveIdentity>(R"(
graph @main {
  input %x : f32[1,8,8,4]
  const %pads : i64[8] = [0, 1, 0, 0, 0, 0, 0, 0]
  const %zero : i64[1] = [0]
  const %one : i64[1] = [1]
  const %two : i64[1] = [2]
  const %six : i64[1] = [6]
  const %eight : i64[1] = [8]
  const %last : i64[1] = [-1]
  const %min : i64[1] = [-9223372036854775807]
  %p = Pad(%x, %pads)
  %crop = Slice(%x, %zero, %six, %one)
  %even = Slice(%x, %zero, %eight, %one, %two)
  %flip = Slice(%x, %last, %min, %one, %last)
  %a = Relu(%p)
  %b = Relu(%crop)
  %c = Relu(%even)
  %d = Relu(%flip)
  output %a
  output %b
  output %c
  output %d
}
)");
}

// Whisper's legacy export (the zoo's whisper_encoder.legacy): the q projection is
// scaled by 1/sqrt(d) first, then SDPA's decomposition scales Q and K^T by sqrt(1).
TEST(RemoveIdentityTest, RemovesScalesByOne) {
  const std::string out = RunPass<RemoveIdentity>(R"(
graph @main {
  input %q : f32[1,2,5,4]
  input %kt : f32[1,2,4,5]
  const %one : f32[] = [1.0]
  const %one1 : f32[1] = [1.0]
  %qs = Mul(%q, %one) @/m/layers.0/self_attn/Mul_1
  %ks = Mul(%one1, %kt) @/m/layers.0/self_attn/Mul_2
  %s = MatMul(%qs, %ks)
  %y = Div(%s, %one)
  %z = Relu(%y)
  output %z
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %q : f32[1,2,5,4]
  input %kt : f32[1,2,4,5]
  %s : f32[1,2,5,5] = MatMul(%q, %kt)
  %z : f32[1,2,5,5] = Relu(%s)
  output %z
}
)");
}

// A 1 that broadcasts x to a larger shape, other factors, 1 / x, and a scale by 1
// whose output is a graph output: kept.
TEST(RemoveIdentityTest, KeepsScalesThatChangeTheTensor) {
  ExpectNoChange<RemoveIdentity>(R"(
graph @main {
  input %x : f32[3]
  const %one : f32[2,1] = [1.0, 1.0]
  const %two : f32[] = [2.0]
  const %unit : f32[] = [1.0]
  %a = Mul(%x, %one)
  %b = Mul(%x, %two)
  %c = Div(%unit, %x)
  %d = Mul(%x, %unit)
  %s = Sum(%a, %b, %c)
  output %s
  output %d
}
)");
}

// The padding mask of bert.legacy in the zoo (batch 2, 8 tokens) as the legacy exporter
// writes it: the gathered bool mask is cast to bool, and the And's [2,1,8,8] result is
// expanded to [2,1,8,8]; both go, so the Where reads the And.
TEST(RemoveIdentityTest, RemovesCastsAndExpandsToTheirOwnType) {
  const std::string out = RunPass<RemoveIdentity>(R"(
graph @main {
  input %gathered : bool[2,1,1,8]
  const %all : bool[1,1,8,1] = splat(true)
  const %expand_shape : i64[4] = [2, 1, 8, 8]
  const %zero : f32[1] = [0.0]
  const %ninf : f32[1] = [-100.0]
  %mask = Cast(%gathered) {to = 9} @/m/Cast_5
  %and = And(%all, %mask) @/m/And_1
  %expanded = Expand(%and, %expand_shape) @/m/Expand
  %add_mask = Where(%expanded, %zero, %ninf)
  %wide = Expand(%mask, %expand_shape)
  %f = Cast(%wide) {to = 1}
  output %add_mask
  output %f
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %gathered : bool[2,1,1,8]
  const %all : bool[1,1,8,1] = splat(true)
  const %expand_shape : i64[4] = [2, 1, 8, 8]
  const %zero : f32[1] = [0.0]
  const %ninf : f32[1] = [-100.0]
  %and : bool[2,1,8,8] = And(%all, %gathered)
  %add_mask : f32[2,1,8,8] = Where(%and, %zero, %ninf)
  %wide : bool[2,1,8,8] = Expand(%gathered, %expand_shape)
  %f : f32[2,1,8,8] = Cast(%wide) {to = 1}
  output %add_mask
  output %f
}
)");
}

// BERT's position-id buffer cut to the sequence length as the legacy exporter writes
// it, in a graph compiled for seq in 1..8 with an 8-long buffer: at the largest size
// the Slice takes the whole buffer, at any other it does not, so it stays.
TEST(RemoveIdentityTest, KeepsASliceToADynamicLengthThatTakesAllOnlyAtTheLargest) {
  ExpectNoChange<RemoveIdentity>(R"(
graph @main {
  dim seq in [1, 8]
  input %ids : i64[1,8] dims "1, seq"
  const %buffer : i64[1,8] = [0, 1, 2, 3, 4, 5, 6, 7]
  const %zero : i64[1] = [0]
  const %end : i64[1] = [8] symbolic "seq"
  const %one : i64[1] = [1]
  %s = Slice(%buffer, %zero, %end, %one, %one)
  %y = Add(%ids, %s)
  output %y
}
)");
}

}  // namespace
}  // namespace kiln
