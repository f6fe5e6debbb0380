// Tests for symbolic shape inference (graph/symbolic_shapes.h) and specialisation
// (graph/specialize.h) on the shape arithmetic the legacy torch exporter writes for
// transformers (BERT's head split, position ids, the causal-mask slice), the errors for
// what cannot be expressed, and the text form of dynamic graphs.
#include "graph/symbolic_shapes.h"

#include <gtest/gtest.h>

#include <string>

#include "graph/evaluate.h"
#include "graph/infer_shapes.h"
#include "graph/specialize.h"
#include "graph/text_format.h"

namespace kiln {
namespace {

std::unique_ptr<Graph> ParseAndFold(const std::string& text) {
  auto g = ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return std::make_unique<Graph>();
  absl::Status st = InferShapes(**g);
  EXPECT_TRUE(st.ok()) << st;
  return std::move(*g);
}

std::string Dims(const Graph& g, const std::string& value) {
  const Value* v = g.FindValue(value);
  return v == nullptr ? "<no value>" : DimsToString(SymbolicShape(*v), g.dim_symbols());
}

// BERT's attention head split as the legacy exporter writes it: the batch and
// sequence sizes read back with Shape/Gather, unsqueezed and concatenated with the
// head count and head size into the Reshape's target.
constexpr char kHeadSplit[] = R"(graph @main {
  dim batch in [1, 4]
  dim seq in [1, 64]
  input %x : f32[4,64,64] dims "batch, seq, 64"
  const %i0 : i64[] = [0]
  const %i1 : i64[] = [1]
  const %axes : i64[1] = [0]
  const %heads : i64[1] = [2]
  const %size : i64[1] = [32]
  %shape = Shape(%x)
  %b = Gather(%shape, %i0) {axis = 0}
  %s = Gather(%shape, %i1) {axis = 0}
  %bu = Unsqueeze(%b, %axes)
  %su = Unsqueeze(%s, %axes)
  %target = Concat(%bu, %su, %heads, %size) {axis = 0}
  %r = Reshape(%x, %target)
  %t = Transpose(%r) {perm = [0, 2, 1, 3]}
  output %t
})";

TEST(SymbolicShapesTest, ExporterShapeArithmeticFoldsIntoASymbolicReshapeTarget) {
  std::unique_ptr<Graph> g = ParseAndFold(kHeadSplit);
  EXPECT_EQ(g->num_nodes(), 2);  // the Shape chain folded away
  const Value* target = g->FindValue("target");
  ASSERT_TRUE(target->is_constant());
  EXPECT_EQ(DimsToString(target->symbolic_data(), g->dim_symbols()), "[batch, seq, 2, 32]");
  EXPECT_EQ(target->constant().ToInt64(), (std::vector<int64_t>{4, 64, 2, 32}));  // the largest case
  EXPECT_EQ(Dims(*g, "r"), "[batch, seq, 2, 32]");
  EXPECT_EQ(Dims(*g, "t"), "[batch, 2, seq, 32]");
  EXPECT_EQ(g->FindValue("t")->shape(), (Shape{4, 2, 64, 32}));
}

TEST(SymbolicShapesTest, TextFormRoundTripsDimsAndSymbolicConstants) {
  std::unique_ptr<Graph> g = ParseAndFold(kHeadSplit);
  const std::string text = PrintGraph(*g);
  EXPECT_NE(text.find("dim seq in [1, 64]"), std::string::npos) << text;
  EXPECT_NE(text.find("symbolic \"batch, seq, 2, 32\""), std::string::npos) << text;
  EXPECT_NE(text.find("dims \"batch, 2, seq, 32\""), std::string::npos) << text;
  auto again = ParseGraph(text);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(PrintGraph(**again), text);
}

TEST(SymbolicShapesTest, TextFormKeepsADimsOptValue) {
  std::string source = kHeadSplit;
  source.replace(source.find("dim seq in [1, 64]"), 18, "dim seq in [1, 64] opt 16");
  std::unique_ptr<Graph> g = ParseAndFold(source.c_str());
  ASSERT_EQ(g->dim_symbols().size(), 2u);
  EXPECT_EQ(g->dim_symbols()[0].opt, 0);
  EXPECT_EQ(g->dim_symbols()[1].opt, 16);
  EXPECT_EQ(OptValues(g->dim_symbols()), (std::vector<int64_t>{4, 16}));  // batch: none given, its largest
  const std::string text = PrintGraph(*g);
  EXPECT_NE(text.find("dim seq in [1, 64] opt 16\n"), std::string::npos) << text;
  source.replace(source.find("opt 16"), 6, "opt 65");
  absl::StatusOr<std::unique_ptr<Graph>> outside = ParseGraph(source);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("opt value lies in its range"), std::string::npos) << outside.status();
}

TEST(SymbolicShapesTest, SpecializedGraphRunsAtTheBoundSizes) {
  std::unique_ptr<Graph> g = ParseAndFold(kHeadSplit);
  auto values = BindDims(*g, {{"x", {3, 5, 64}}});
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<int64_t>{3, 5}));
  auto s = Specialize(*g, *values);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE((*s)->is_dynamic());
  EXPECT_EQ((*s)->FindValue("target")->constant().ToInt64(), (std::vector<int64_t>{3, 5, 2, 32}));
  std::vector<float> x(3 * 5 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  auto out = EvaluateGraph(**s, {{"x", Tensor::FromFloat(DType::kFloat32, {3, 5, 64}, x)}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape(), (Shape{3, 2, 5, 32}));
  // t[b, h, s, d] = x[b, s, h * 32 + d]
  EXPECT_EQ((*out)[0].ToFloat()[((1 * 2 + 1) * 5 + 4) * 32 + 3], x[(1 * 5 + 4) * 64 + 32 + 3]);
  EXPECT_TRUE(CheckSpecializations(*g).ok());
}

// Position ids (Range over the sequence length) cannot fold: the Range stays and runs.
// The causal mask is a Slice of a fixed buffer ending at the sequence length.
TEST(SymbolicShapesTest, RangeStaysAsANodeAndASliceEndsAtTheSequenceLength) {
  std::unique_ptr<Graph> g = ParseAndFold(R"(graph @main {
  dim seq in [1, 64]
  input %ids : i64[1,64] dims "1, seq"
  const %mask : f32[1,128,128] = splat(1.0)
  const %i1 : i64[] = [1]
  const %zero : i64[] = [0]
  const %one : i64[] = [1]
  const %axes : i64[1] = [0]
  const %start : i64[1] = [0]
  const %axis : i64[1] = [1]
  %shape = Shape(%ids)
  %s = Gather(%shape, %i1) {axis = 0}
  %pos = Range(%zero, %s, %one)
  %end = Unsqueeze(%s, %axes)
  %m = Slice(%mask, %start, %end, %axis)
  output %pos, %m
})");
  EXPECT_FALSE(g->FindValue("pos")->is_constant());
  EXPECT_EQ(Dims(*g, "pos"), "[seq]");
  EXPECT_EQ(Dims(*g, "m"), "[1, seq, 128]");
  EXPECT_TRUE(CheckSpecializations(*g).ok());
}

// GatherND (transformers' packed-sequence mask reads a cumulative sum over seq at
// (batch, position) pairs): the indices' dims but the last, then the data's dims
// after the ones a tuple addresses.
TEST(SymbolicShapesTest, GatherNdKeepsTheIndicesDims) {
  std::unique_ptr<Graph> g = ParseAndFold(R"(graph @main {
  dim batch in [1, 4]
  dim seq in [1, 64]
  input %sums : i64[4,64] dims "batch, seq"
  input %rows : f32[4,64,8] dims "batch, seq, 8"
  input %at : i64[4,1,64,1,2] dims "batch, 1, seq, 1, 2"
  input %first : i64[4,1] dims "batch, 1"
  %g = GatherND(%sums, %at)
  %r = GatherND(%rows, %first) {batch_dims = 1}
  output %g, %r
})");
  EXPECT_EQ(Dims(*g, "g"), "[batch, 1, seq, 1]");
  EXPECT_EQ(Dims(*g, "r"), "[batch, 8]");
  EXPECT_TRUE(CheckSpecializations(*g).ok());
}

absl::Status InferText(const std::string& text) {
  auto g = ParseGraph(text);
  if (!g.ok()) return g.status();
  return InferShapes(**g);
}

TEST(SymbolicShapesTest, WhatCannotBeExpressedFailsNamingTheNodeAndTheDim) {
  // A split along the dynamic axis has sizes fixed at the largest case.
  absl::Status st = InferText(R"(graph @main {
  dim seq in [1, 64]
  input %x : f32[64,8] dims "seq, 8"
  const %split : i64[2] = [32, 32]
  %a, %b = Split(%x, %split) {axis = 0} @halves
  output %a
})");
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("node 'halves' (Split): output 0 dim 0 cannot be expressed"), std::string::npos) << st;
  EXPECT_NE(st.message().find("--dim NAME=N"), std::string::npos) << st;
  // A dynamic dim broadcast against a fixed one matches only at one size.
  st = InferText(R"(graph @main {
  dim seq in [1, 64]
  input %x : f32[64,8] dims "seq, 8"
  input %y : f32[64,8]
  %z = Add(%x, %y) @add
  output %z
})");
  EXPECT_NE(st.message().find("node 'add' (Add): output 0 dim 0"), std::string::npos) << st;
  EXPECT_NE(st.message().find("broadcasts seq against 64"), std::string::npos) << st;
  // A slice that the buffer's end would clamp for the larger sizes.
  st = InferText(R"(graph @main {
  dim seq in [1, 64]
  input %ids : i64[64] dims "seq"
  const %buf : f32[32] = splat(1.0)
  const %start : i64[1] = [0]
  %shape = Shape(%ids)
  %m = Slice(%buf, %start, %shape) @crop
  output %m
})");
  EXPECT_NE(st.message().find("node 'crop' (Slice)"), std::string::npos) << st;
  EXPECT_NE(st.message().find("clamped"), std::string::npos) << st;
  EXPECT_NE(st.message().find("its end passes the dim by up to 32"), std::string::npos) << st;  // seq 64 of 32
  // An op kiln has no rule for.
  st = InferText(R"(graph @main {
  dim seq in [1, 64]
  input %x : f32[64,8] dims "seq, 8"
  const %k : i64[1] = [2]
  const %reps : i64[2] = [2, 1]
  %t = Tile(%x, %reps) @tile
  output %t
})");
  EXPECT_NE(st.message().find("node 'tile' (Tile): kiln has no dynamic-shape rule for Tile"), std::string::npos) << st;
}

TEST(SymbolicShapesTest, BindDimsNamesTheInputTheDimAndTheRange) {
  std::unique_ptr<Graph> g = ParseAndFold(R"(graph @main {
  dim batch in [1, 4]
  dim seq in [2, 64]
  input %ids : i64[4,64] dims "batch, seq"
  input %mask : i64[4,64] dims "batch, seq"
  %z = Add(%ids, %mask)
  output %z
})");
  auto st = BindDims(*g, {{"ids", {2, 65}}, {"mask", {2, 65}}});
  EXPECT_NE(st.status().message().find("input 'ids' dim 1 (seq) is 65, outside the range 2..64"), std::string::npos)
      << st.status();
  st = BindDims(*g, {{"ids", {2, 8}}, {"mask", {2, 9}}});
  EXPECT_NE(st.status().message().find("input 'mask' dim 1 (seq) is 9, but input 'ids' dim 1 (seq) is 8"),
            std::string::npos)
      << st.status();
  st = BindDims(*g, {{"ids", {2, 8}}});
  EXPECT_NE(st.status().message().find("no shape for input 'mask'"), std::string::npos) << st.status();
}

// A rewrite that wrote the largest size into a constant (here a Reshape target) is
// caught by specialising at the ranges' ends.
TEST(SymbolicShapesTest, CheckSpecializationsCatchesAFixedSize) {
  std::unique_ptr<Graph> g = ParseAndFold(R"(graph @main {
  dim batch in [1, 4]
  input %x : f32[4,8] dims "batch, 8"
  const %target : i64[3] = [4, 2, 4]
  %r = Reshape(%x, %target) @fixed
  %y = Relu(%r)
  output %y
})");
  absl::Status st = CheckSpecializations(*g);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("at batch=1"), std::string::npos) << st;
}

}  // namespace
}  // namespace kiln
