// Tests for FoldTransposeIntoMatMul: text graph in, expected text out, outputs
// unchanged on the CPU reference (RunPass), and the cases where it must not fire.
#include "graph/fold_transpose_into_matmul.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "graph/eliminate_dead_code.h"
#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::ExpectSameOutputs;
using ::kiln::pass_test::ExpectVerifies;
using ::kiln::pass_test::MustParse;
using ::kiln::pass_test::Print;
using ::kiln::pass_test::RunPass;

// The pass, then dead-code elimination (as in the canonicalisation round).
struct FoldThenDce {
  absl::StatusOr<bool> Run(Graph& graph) {
    absl::StatusOr<bool> folded = FoldTransposeIntoMatMul().Run(graph);
    if (!folded.ok()) return folded;
    absl::StatusOr<bool> dce = EliminateDeadCode().Run(graph);
    if (!dce.ok()) return dce;
    return *folded || *dce;
  }
};

TEST(FoldTransposeIntoMatMulTest, SwapOnEitherOperandBecomesFlag) {
  const std::string out = RunPass<FoldThenDce>(R"(
graph @main {
  input %x : f32[5,3]
  input %w : f32[4,5]
  %xt = Transpose(%x) {perm = [1, 0]}
  %wt = Transpose(%w) {perm = [1, 0]}
  %y = MatMul(%xt, %wt)
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[5,3]
  input %w : f32[4,5]
  %y : f32[3,4] = MatMul(%x, %w) {trans_a = 1, trans_b = 1}
  output %y
}
)");
}

TEST(FoldTransposeIntoMatMulTest, BatchedSwapAndDefaultPerm) {
  // perm [0, 1, 3, 2] on a 4-D operand; an absent perm on a 2-D operand is [1, 0].
  const std::string out = RunPass<FoldThenDce>(R"(
graph @main {
  input %q : f32[2,3,7,8]
  input %k : f32[2,3,7,8]
  input %w : f32[6,7]
  %kt = Transpose(%k) {perm = [0, 1, 3, 2]}
  %s = MatMul(%q, %kt)
  %wt = Transpose(%w)
  %y = MatMul(%s, %wt)
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %q : f32[2,3,7,8]
  input %k : f32[2,3,7,8]
  input %w : f32[6,7]
  %s : f32[2,3,7,7] = MatMul(%q, %k) {trans_b = 1}
  %y : f32[2,3,7,6] = MatMul(%s, %w) {trans_b = 1}
  output %y
}
)");
}

TEST(FoldTransposeIntoMatMulTest, ToggleClearsAnExistingFlag) {
  // The MatMul already reads its operand transposed: reading a transposed value
  // transposed is reading the original as stored.
  const std::string out = RunPass<FoldThenDce>(R"(
graph @main {
  input %x : f32[3,5]
  input %w : f32[5,4]
  %xt = Transpose(%x) {perm = [1, 0]}
  %y = MatMul(%xt, %w) {trans_a = 1}
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[3,5]
  input %w : f32[5,4]
  %y : f32[3,4] = MatMul(%x, %w)
  output %y
}
)");
}

TEST(FoldTransposeIntoMatMulTest, TransposeKeptForItsOtherReaders) {
  // Without DCE, to see exactly what the pass does: the MatMul reads %x flagged,
  // the Relu still reads the Transpose.
  const std::string out = RunPass<FoldTransposeIntoMatMul>(R"(
graph @main {
  input %x : f32[5,3]
  input %w : f32[5,4]
  %xt = Transpose(%x) {perm = [1, 0]}
  %y = MatMul(%xt, %w)
  %r = Relu(%xt)
  output %y
  output %r
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[5,3]
  input %w : f32[5,4]
  %xt : f32[3,5] = Transpose(%x) {perm = [1, 0]}
  %y : f32[3,4] = MatMul(%x, %w) {trans_a = 1}
  %r : f32[3,5] = Relu(%xt)
  output %y
  output %r
}
)");
}

TEST(FoldTransposeIntoMatMulTest, AttentionKeyTransposeKeepsRowsContiguous) {
  // BERT's key path: Reshape to heads, then Transpose [0,2,3,1] = [0,2,1,3] then
  // swap. The Transpose becomes the row-preserving [0,2,1,3] (its output [B,A,S,D])
  // and QK^T reads it with trans_b; no node is added. The V path's [0,2,1,3] feeds
  // operand B unswapped and is left alone.
  const std::string out = RunPass<FoldTransposeIntoMatMul>(R"(
graph @main {
  input %q : f32[1,2,5,4]
  input %k : f32[1,5,2,4]
  input %v : f32[1,5,2,4]
  %kt = Transpose(%k) {perm = [0, 2, 3, 1]}
  %s = MatMul(%q, %kt)
  %vh = Transpose(%v) {perm = [0, 2, 1, 3]}
  %o = MatMul(%s, %vh)
  output %o
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %q : f32[1,2,5,4]
  input %k : f32[1,5,2,4]
  input %v : f32[1,5,2,4]
  %kt : f32[1,2,5,4] = Transpose(%k) {perm = [0, 2, 1, 3]}
  %s : f32[1,2,5,5] = MatMul(%q, %kt) {trans_b = 1}
  %vh : f32[1,2,5,4] = Transpose(%v) {perm = [0, 2, 1, 3]}
  %o : f32[1,2,5,4] = MatMul(%s, %vh)
  output %o
}
)");
}

TEST(FoldTransposeIntoMatMulTest, RowPreservingRewriteOnOperandAAndSharedReaders) {
  // perm [1,2,0] = [1,0,2] then swap, read as A by two MatMuls (one already
  // flagged): both toggle, the Transpose becomes [1,0,2].
  const std::string out = RunPass<FoldTransposeIntoMatMul>(R"(
graph @main {
  input %x : f32[4,2,3]
  input %w : f32[4,5]
  input %u : f32[5,4]
  %t = Transpose(%x) {perm = [1, 2, 0]}
  %y = MatMul(%t, %w)
  %z = MatMul(%t, %u) {trans_b = 1}
  output %y
  output %z
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[4,2,3]
  input %w : f32[4,5]
  input %u : f32[5,4]
  %t : f32[2,4,3] = Transpose(%x) {perm = [1, 0, 2]}
  %y : f32[2,3,5] = MatMul(%t, %w) {trans_a = 1}
  %z : f32[2,3,5] = MatMul(%t, %u) {trans_a = 1, trans_b = 1}
  output %y
  output %z
}
)");
}

TEST(FoldTransposeIntoMatMulTest, FlaggedConstantIsReLaidOut) {
  // A flag on a constant weight (gemm-to-matmul flags a weight a Constant node
  // produced, before folding): the weight is stored row-major [K, N] instead, one
  // copy shared by both readers, and the flag goes.
  const std::string out = RunPass<FoldThenDce>(R"(
graph @main {
  input %x : f32[2,3]
  input %z : f32[2,3]
  const %w : f32[2,3] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  %y = MatMul(%x, %w) {trans_b = 1}
  %y2 = MatMul(%z, %w) {trans_b = 1}
  output %y
  output %y2
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[2,3]
  input %z : f32[2,3]
  const %w/transposed : f32[3,2] = [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
  %y : f32[2,2] = MatMul(%x, %w/transposed)
  %y2 : f32[2,2] = MatMul(%z, %w/transposed)
  output %y
  output %y2
}
)");
}

TEST(FoldTransposeIntoMatMulTest, FlaggedIntegerConstantKeepsExactValues) {
  const std::string out = RunPass<FoldThenDce>(R"(
graph @main {
  input %x : i64[1,2]
  const %w : i64[3,2] = [9007199254740993, 2, 3, 4, 5, 6]
  %y = MatMul(%x, %w) {trans_b = 1}
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : i64[1,2]
  const %w/transposed : i64[2,3] = [9007199254740993, 3, 5, 2, 4, 6]
  %y : i64[1,3] = MatMul(%x, %w/transposed)
  output %y
}
)");
}

TEST(FoldTransposeIntoMatMulTest, DoesNotFireOnBatchPermutations) {
  // [1,0,2] moves batch dims only; [2,1,0] moves the innermost dim to the front.
  ExpectNoChange<FoldTransposeIntoMatMul>(R"(
graph @main {
  input %x : f32[2,3,4]
  input %w : f32[4,5]
  %t = Transpose(%x) {perm = [1, 0, 2]}
  %y = MatMul(%t, %w)
  output %y
}
)");
  ExpectNoChange<FoldTransposeIntoMatMul>(R"(
graph @main {
  input %x : f32[4,3,2]
  input %w : f32[4,5]
  %t = Transpose(%x) {perm = [2, 1, 0]}
  %y = MatMul(%t, %w)
  output %y
}
)");
}

TEST(FoldTransposeIntoMatMulTest, DoesNotFireWhenTheRewriteWouldAddATranspose) {
  // [0,2,3,1] is also read by an Add (and [1,0,3,2] is a graph output): another
  // layout would need a second Transpose.
  ExpectNoChange<FoldTransposeIntoMatMul>(R"(
graph @main {
  input %q : f32[1,2,5,4]
  input %k : f32[1,5,2,4]
  input %b : f32[1,2,4,5]
  %kt = Transpose(%k) {perm = [0, 2, 3, 1]}
  %s = MatMul(%q, %kt)
  %a = Add(%kt, %b)
  output %s
  output %a
}
)");
  ExpectNoChange<FoldTransposeIntoMatMul>(R"(
graph @main {
  input %x : f32[2,3,4,5]
  input %w : f32[3,2,4,6]
  %t = Transpose(%x) {perm = [1, 0, 3, 2]}
  %y = MatMul(%t, %w)
  output %y
  output %t
}
)");
}

TEST(FoldTransposeIntoMatMulTest, DoesNotFireOnOtherReadersConstantsOrRankOne) {
  // A swap read only by a non-MatMul op.
  ExpectNoChange<FoldTransposeIntoMatMul>(R"(
graph @main {
  input %x : f32[3,5]
  input %b : f32[5,3]
  %t = Transpose(%x) {perm = [1, 0]}
  %y = Add(%t, %b)
  output %y
}
)");
  // Gemm has its own transA / transB (gemm-to-matmul runs first).
  ExpectNoChange<FoldTransposeIntoMatMul>(R"(
graph @main {
  input %x : f32[3,5]
  input %w : f32[3,4]
  %t = Transpose(%x) {perm = [1, 0]}
  %y = Gemm(%t, %w)
  output %y
}
)");
  // Transpose of a constant: constant folding materialises it row-major.
  ExpectNoChange<FoldTransposeIntoMatMul>(R"(
graph @main {
  input %x : f32[2,3]
  const %w : f32[2,3] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  %wt = Transpose(%w) {perm = [1, 0]}
  %y = MatMul(%x, %wt)
  output %y
}
)");
  // Rank 1: the Transpose is the identity; the MatMul has a vector operand.
  ExpectNoChange<FoldTransposeIntoMatMul>(R"(
graph @main {
  input %v : f32[3]
  input %w : f32[3,2]
  %t = Transpose(%v) {perm = [0]}
  %y = MatMul(%t, %w)
  output %y
}
)");
}

TEST(FoldTransposeIntoMatMulTest, MatMulReadingTheSameSwapTwice) {
  std::unique_ptr<Graph> before = MustParse(R"(
graph @main {
  input %x : f32[4,4]
  %t = Transpose(%x) {perm = [1, 0]}
  %y = MatMul(%t, %t)
  output %y
}
)");
  std::unique_ptr<Graph> g = before->Clone();
  auto changed = FoldThenDce().Run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  ExpectVerifies(*g);
  ExpectSameOutputs(*before, *g);
  EXPECT_EQ(Print(*g), R"(graph @main {
  input %x : f32[4,4]
  %y : f32[4,4] = MatMul(%x, %x) {trans_a = 1, trans_b = 1}
  output %y
}
)");
  // A second run finds nothing.
  auto again = FoldTransposeIntoMatMul().Run(*g);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
}

}  // namespace
}  // namespace kiln
