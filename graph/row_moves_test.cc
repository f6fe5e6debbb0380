// Tests for RowMoves: the chains swin.legacy writes around a shifted-window attention
// (graph/swin_block_test_graph.h, cut from the zoo file) are walked to their end, and
// each result row's source row, by RowMap, is the row the CPU reference copies there. Where a chain must stop: a
// Reshape that changes the last dim, a Slice read by two nodes, a Concat along the last axis.
#include "graph/row_moves.h"

#include <gtest/gtest.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "graph/evaluate.h"
#include "graph/pass_test_util.h"
#include "graph/swin_block_test_graph.h"

namespace kiln {
namespace {

using ::kiln::pass_test::MustParse;

using ::kiln::test::kSwinShiftedBlock;

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
  auto g = MustParse(kSwinShiftedBlock);
  // x is read by norm1 and by the residual Add: no step starts at it.
  EXPECT_TRUE(RowMovesFrom(*g, g->FindValue("x")).empty());
  const std::vector<RowMoveStep> steps = RowMovesFrom(*g, g->FindValue("n1"));
  EXPECT_EQ(Names(RowMoveNodes(steps)),
            (std::vector<std::string>{"Slice_1", "Slice_2", "Concat_3", "Slice_3", "Slice_4", "Concat_4", "Reshape_2",
                                      "Transpose_1", "Reshape_3"}));
  EXPECT_TRUE(MovesRows(steps));
  ASSERT_NO_FATAL_FAILURE(ExpectMapMatchesReference(steps));
  // The same chain walked back from the QKV MatMul's input.
  const std::vector<RowMoveStep> into_q = RowMovesInto(*g, g->FindValue("r3"));
  ASSERT_EQ(into_q.size(), 5u);
  EXPECT_EQ(into_q.front().in->name(), "n1");
}

TEST(RowMovesTest, SwinWindowMergeAndReverseShiftBackward) {
  auto g = MustParse(kSwinShiftedBlock);
  const std::vector<RowMoveStep> steps = RowMovesInto(*g, g->FindValue("c35"));
  EXPECT_EQ(Names(RowMoveNodes(steps)),
            (std::vector<std::string>{"Reshape_19", "Transpose_6", "Reshape_20", "Slice_50", "Slice_51", "Concat_34",
                                      "Slice_52", "Slice_53", "Concat_35"}));
  EXPECT_EQ(steps.front().in->name(), "proj");
  ASSERT_NO_FATAL_FAILURE(ExpectMapMatchesReference(steps));
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
