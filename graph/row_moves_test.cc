// Tests for RowMoves: the chains swin.legacy writes around a shifted-window attention
// (cut from the zoo file at a map of 8x8, windows of 4, shift 2, two images) are
// walked to their end, and each result row's source row, by RowMap, is the row the
// CPU reference copies there. Where a chain must stop: a Reshape that changes the
// last dim, a Slice read by two nodes, a Concat along the last axis.
#include "graph/row_moves.h"

#include <gtest/gtest.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "graph/evaluate.h"
#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::MustParse;

// swin.legacy's norm1 -> cyclic shift by -2 (torch.roll: Slice(2:), Slice(:2),
// Concat per axis, with the exporter's axes and steps inputs) -> window partition ->
// QKV MatMul; and the projection back through the window merge and the reverse
// shift into the residual Add.
constexpr char kSwinBlock[] = R"(
graph @main {
  input %x : f32[2,8,8,4]
  input %proj : f32[8,16,4]
  const %one : i64[1] = [1]
  const %two_axis : i64[1] = [2]
  const %zero : i64[1] = [0]
  const %s : i64[1] = [2]
  const %ms : i64[1] = [-2]
  const %max : i64[1] = [9223372036854775807]
  const %win : i64[6] = [2, 2, 4, 2, 4, 4]
  const %flat : i64[3] = [8, 16, 4]
  const %win_back : i64[6] = [2, 2, 2, 4, 4, 4]
  const %full : i64[4] = [2, 8, 8, 4]
  const %w : f32[4,12] = splat(0.5)
  %a1 = Slice(%x, %s, %max, %one, %one) @Slice_1
  %a2 = Slice(%x, %zero, %s, %one, %one) @Slice_2
  %a = Concat(%a1, %a2) {axis = 1} @Concat_3
  %b1 = Slice(%a, %s, %max, %two_axis, %one) @Slice_3
  %b2 = Slice(%a, %zero, %s, %two_axis, %one) @Slice_4
  %b = Concat(%b1, %b2) {axis = 2} @Concat_4
  %p = Reshape(%b, %win) @Reshape_2
  %t = Transpose(%p) {perm = [0, 1, 3, 2, 4, 5]} @Transpose_1
  %q = Reshape(%t, %flat) @Reshape_3
  %qkv = MatMul(%q, %w) @MatMul
  %v = Reshape(%proj, %win_back) @Reshape_19
  %vt = Transpose(%v) {perm = [0, 1, 3, 2, 4, 5]} @Transpose_6
  %m = Reshape(%vt, %full) @Reshape_20
  %c1 = Slice(%m, %ms, %max, %one, %one) @Slice_50
  %c2 = Slice(%m, %zero, %ms, %one, %one) @Slice_51
  %c = Concat(%c1, %c2) {axis = 1} @Concat_34
  %d1 = Slice(%c, %ms, %max, %two_axis, %one) @Slice_52
  %d2 = Slice(%c, %zero, %ms, %two_axis, %one) @Slice_53
  %d = Concat(%d1, %d2) {axis = 2} @Concat_35
  %y = Add(%x, %d) @Add
  output %qkv
  output %y
}
)";

std::vector<std::string> Names(const std::vector<Node*>& nodes) {
  std::vector<std::string> names;
  for (const Node* n : nodes) names.push_back(n->name());
  return names;
}

// A tensor of `shape` whose every element is its row's index.
Tensor RowIds(const Shape& shape) {
  const int64_t len = shape.back();
  std::vector<float> v(NumElements(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int64_t>(i) / len);
  return Tensor::FromFloat(DType::kFloat32, shape, v);
}

// Every row of the chain's result, evaluated on row ids, holds the id RowMap names.
void ExpectMapMatchesReference(const std::vector<RowMoveStep>& steps) {
  absl::StatusOr<RowMap> map = RowMap::Of(steps);
  ASSERT_TRUE(map.ok()) << map.status();
  // The chain's nodes on the CPU reference, from row ids at its start.
  const Value* start = steps.front().in;
  const Value* end = steps.back().out;
  std::map<const Value*, Tensor> values = {{start, RowIds(start->shape())}};
  for (const Node* n : RowMoveNodes(steps)) {
    std::vector<const Tensor*> in;
    for (const Value* v : n->inputs())
      in.push_back(v == nullptr ? nullptr : v->is_constant() ? &v->constant() : &values.at(v));
    absl::StatusOr<std::vector<Tensor>> out = EvaluateNode(*n, in);
    ASSERT_TRUE(out.ok()) << out.status();
    values[n->output(0)] = (*out)[0];
  }
  const std::vector<float> got = values.at(end).ToFloat();
  const int64_t len = end->shape().back();
  ASSERT_EQ(map->rows_out(), static_cast<int64_t>(got.size()) / len);
  int wrong = 0;
  for (int64_t r = 0; r < map->rows_out(); ++r) {
    for (int64_t j = 0; j < len; ++j) wrong += got[r * len + j] != static_cast<float>(map->SourceRow(r));
  }
  EXPECT_EQ(wrong, 0);
}

TEST(RowMovesTest, SwinShiftAndWindowPartitionForward) {
  auto g = MustParse(kSwinBlock);
  const std::vector<RowMoveStep> steps = RowMovesFrom(*g, g->FindValue("x"));
  // x is read by the Add too: no step starts at it. From the first roll's output on:
  EXPECT_TRUE(steps.empty());
  const std::vector<RowMoveStep> from_a = RowMovesFrom(*g, g->FindValue("a"));
  EXPECT_EQ(Names(RowMoveNodes(from_a)),
            (std::vector<std::string>{"Slice_3", "Slice_4", "Concat_4", "Reshape_2", "Transpose_1", "Reshape_3"}));
  EXPECT_TRUE(MovesRows(from_a));
  ASSERT_NO_FATAL_FAILURE(ExpectMapMatchesReference(from_a));
}

TEST(RowMovesTest, SwinWindowMergeAndReverseShiftBackward) {
  auto g = MustParse(kSwinBlock);
  const std::vector<RowMoveStep> steps = RowMovesInto(*g, g->FindValue("d"));
  EXPECT_EQ(Names(RowMoveNodes(steps)),
            (std::vector<std::string>{"Reshape_19", "Transpose_6", "Reshape_20", "Slice_50", "Slice_51", "Concat_34",
                                      "Slice_52", "Slice_53", "Concat_35"}));
  EXPECT_EQ(steps.front().in->name(), "proj");
  ASSERT_NO_FATAL_FAILURE(ExpectMapMatchesReference(steps));
  // Both directions of the whole shifted partition, from x.
  const std::vector<RowMoveStep> into_q = RowMovesInto(*g, g->FindValue("q"));
  ASSERT_EQ(into_q.size(), 5u);
  EXPECT_EQ(into_q.front().in->name(), "x");
  ASSERT_NO_FATAL_FAILURE(ExpectMapMatchesReference(into_q));
}

// A Transpose whose perm is not its own inverse, between Reshapes and a step-2 Slice.
TEST(RowMovesTest, CyclicTransposeAndStridedSlice) {
  auto g = MustParse(R"(
graph @main {
  input %x : f32[6,4,2]
  const %split : i64[4] = [2, 3, 4, 2]
  const %flat : i64[3] = [4, 6, 2]
  const %zero : i64[1] = [0]
  const %one : i64[1] = [1]
  const %two : i64[1] = [2]
  const %max : i64[1] = [9223372036854775807]
  %a = Reshape(%x, %split) @split
  %t = Transpose(%a) {perm = [2, 0, 1, 3]} @cycle
  %f = Reshape(%t, %flat) @flat
  %s = Slice(%f, %one, %max, %one, %two) @odd_rows
  output %s
}
)");
  const std::vector<RowMoveStep> steps = RowMovesFrom(*g, g->FindValue("x"));
  EXPECT_EQ(steps.size(), 4u);  // to the graph output, which ends the walk
  const std::vector<RowMoveStep> into = RowMovesInto(*g, g->FindValue("s"));
  EXPECT_EQ(Names(RowMoveNodes(into)), (std::vector<std::string>{"split", "cycle", "flat", "odd_rows"}));
  ASSERT_NO_FATAL_FAILURE(ExpectMapMatchesReference(into));
}

TEST(RowMovesTest, StopsWhereRowsChangeOrValuesAreShared) {
  auto g = MustParse(R"(
graph @main {
  input %x : f32[2,6,4]
  const %one : i64[1] = [1]
  const %two : i64[1] = [2]
  const %zero : i64[1] = [0]
  const %max : i64[1] = [9223372036854775807]
  const %flat : i64[2] = [12, 4]
  const %wide : i64[2] = [6, 8]
  const %last : i64[1] = [2]
  %t = Transpose(%x) {perm = [1, 0, 2]} @keeps_rows
  %r = Reshape(%t, %wide) @changes_the_last_dim
  %s1 = Slice(%x, %two, %max, %one) @read_twice
  %s2 = Slice(%x, %zero, %two, %one) @head
  %c = Concat(%s1, %s2) {axis = 1} @roll
  %u = Relu(%s1) @other_reader
  %l1 = Slice(%x, %two, %max, %last) @lanes
  %l2 = Slice(%x, %zero, %two, %last) @lanes_head
  %l = Concat(%l1, %l2) {axis = 2} @along_the_last_axis
  %f = Reshape(%x, %flat) @only_a_reshape
  output %r
  output %c
  output %u
  output %l
  output %f
}
)");
  const std::vector<RowMoveStep> into_r = RowMovesInto(*g, g->FindValue("r"));
  EXPECT_TRUE(into_r.empty());
  const std::vector<RowMoveStep> into_t = RowMovesInto(*g, g->FindValue("t"));
  EXPECT_EQ(Names(RowMoveNodes(into_t)), std::vector<std::string>{"keeps_rows"});
  EXPECT_TRUE(RowMovesInto(*g, g->FindValue("c")).empty());
  EXPECT_TRUE(RowMovesInto(*g, g->FindValue("l")).empty());
  const std::vector<RowMoveStep> into_f = RowMovesInto(*g, g->FindValue("f"));
  EXPECT_EQ(into_f.size(), 1u);
  EXPECT_FALSE(MovesRows(into_f));
  // x feeds five nodes: nothing moves it as a whole.
  EXPECT_TRUE(RowMovesFrom(*g, g->FindValue("x")).empty());
}

}  // namespace
}  // namespace kiln
