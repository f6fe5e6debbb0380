// Tests for GemmToMatMul: text graph in, expected text out, outputs unchanged.
#include "graph/gemm_to_matmul.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::ExpectSameOutputs;
using ::kiln::pass_test::ExpectVerifies;
using ::kiln::pass_test::MustParse;
using ::kiln::pass_test::Print;
using ::kiln::pass_test::RunPass;

TEST(GemmToMatMulTest, LinearLayerFoldsTransposedWeight) {
  // nn.Linear on a 2-D input as torch.onnx exports it: Gemm(x, W[out,in], b, transB=1).
  const std::string out = RunPass<GemmToMatMul>(R"(
graph @main {
  input %x : f32[2,3]
  const %w : f32[2,3] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  const %b : f32[2] = [0.5, -0.5]
  %y = Gemm(%x, %w, %b) {alpha = 1.0, beta = 1.0, transB = 1} @fc
  %r = Relu(%y)
  output %r
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[2,3]
  const %b : f32[2] = [0.5, -0.5]
  const %w/transposed : f32[3,2] = [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
  %y/matmul : f32[2,2] = MatMul(%x, %w/transposed)
  %y : f32[2,2] = Add(%y/matmul, %b)
  %r : f32[2,2] = Relu(%y)
  output %r
}
)");
}

TEST(GemmToMatMulTest, FoldsAlphaAndBetaIntoConstantsFlagsComputedA) {
  const std::string out = RunPass<GemmToMatMul>(R"(
graph @main {
  input %a : f32[3,2]
  const %w : f32[3,2] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  const %c : f32[1,2] = [1.0, -1.0]
  %y = Gemm(%a, %w, %c) {alpha = 2.0, beta = 0.5, transA = 1}
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %a : f32[3,2]
  const %w/scaled : f32[3,2] = [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
  const %c/scaled : f32[1,2] = [0.5, -0.5]
  %y/matmul : f32[2,2] = MatMul(%a, %w/scaled) {trans_a = 1}
  %y : f32[2,2] = Add(%y/matmul, %c/scaled)
  output %y
}
)");
}

TEST(GemmToMatMulTest, ComputedOperandsGetLayoutFlagsAndMulNodes) {
  std::unique_ptr<Graph> g = MustParse(R"(
graph @main {
  input %a : f32[2,3]
  input %b : f32[4,3]
  input %c : f32[4]
  %y = Gemm(%a, %b, %c) {alpha = 0.5, beta = 3.0, transB = 1} @gemm
  output %y
}
)");
  std::unique_ptr<Graph> before = g->Clone();
  auto changed = GemmToMatMul().Run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  ExpectVerifies(*g);
  EXPECT_EQ(Print(*g), R"(graph @main {
  input %a : f32[2,3]
  input %b : f32[4,3]
  input %c : f32[4]
  const %gemm/alpha : f32[] = [0.5]
  const %gemm/beta : f32[] = [3.0]
  %y/matmul : f32[2,4] = MatMul(%a, %b) {trans_b = 1}
  %y/alpha : f32[2,4] = Mul(%y/matmul, %gemm/alpha)
  %c/beta : f32[4] = Mul(%c, %gemm/beta)
  %y : f32[2,4] = Add(%y/alpha, %c/beta)
  output %y
}
)");
  // Names trace back to the Gemm; no Transpose node is made.
  std::vector<std::string> names;
  for (const Node* n : g->nodes()) names.push_back(n->name());
  EXPECT_EQ(names, (std::vector<std::string>{"gemm", "gemm/alpha", "gemm/beta", "gemm/bias"}));
  ExpectSameOutputs(*before, *g);
}

TEST(GemmToMatMulTest, EveryTransposeCombinationOfComputedOperands) {
  // transA / transB on computed operands become the MatMul's layout flags; the
  // operands are read where they are stored. Outputs equal the Gemm's (RunPass
  // evaluates both graphs on the CPU reference) for every combination.
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      SCOPED_TRACE(absl::StrCat("transA=", ta, " transB=", tb));
      const std::string a = ta ? "f32[5,3]" : "f32[3,5]", b = tb ? "f32[4,5]" : "f32[5,4]";
      const std::string out = RunPass<GemmToMatMul>(absl::StrCat(R"(
graph @main {
  input %a : )", a, R"(
  input %b : )", b, R"(
  input %c : f32[3,4]
  %y = Gemm(%a, %b, %c) {transA = )", ta, ", transB = ", tb, R"(}
  output %y
}
)"));
      std::string flags;
      if (ta) flags = tb ? " {trans_a = 1, trans_b = 1}" : " {trans_a = 1}";
      if (!ta && tb) flags = " {trans_b = 1}";
      EXPECT_EQ(out, absl::StrCat(R"(graph @main {
  input %a : )", a, R"(
  input %b : )", b, R"(
  input %c : f32[3,4]
  %y/matmul : f32[3,4] = MatMul(%a, %b))", flags, R"(
  %y : f32[3,4] = Add(%y/matmul, %c)
  output %y
}
)"));
    }
  }
}

TEST(GemmToMatMulTest, ConstantAFoldedComputedBFlagged) {
  // A constant operand is re-laid out row-major at compile time (no flag); the
  // computed one is flagged.
  const std::string out = RunPass<GemmToMatMul>(R"(
graph @main {
  const %a : f32[2,3] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  input %b : f32[4,2]
  %y = Gemm(%a, %b) {transA = 1, transB = 1}
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %b : f32[4,2]
  const %a/transposed : f32[3,2] = [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
  %y : f32[3,4] = MatMul(%a/transposed, %b) {trans_b = 1}
  output %y
}
)");
}

TEST(GemmToMatMulTest, NoBiasWhenBetaIsZeroOrCAbsent) {
  const std::string out = RunPass<GemmToMatMul>(R"(
graph @main {
  input %a : f32[2,3]
  input %b : f32[3,2]
  input %c : f32[2,2]
  %y = Gemm(%a, %b, %c) {beta = 0.0}
  %z = Gemm(%a, %b)
  output %y
  output %z
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %a : f32[2,3]
  input %b : f32[3,2]
  input %c : f32[2,2]
  %y : f32[2,2] = MatMul(%a, %b)
  %z : f32[2,2] = MatMul(%a, %b)
  output %y
  output %z
}
)");
}

TEST(GemmToMatMulTest, DoesNotFireOnIntegerGemm) {
  const std::string in = R"(
graph @main {
  input %a : i32[2,3]
  input %b : i32[3,2]
  %y = Gemm(%a, %b) {alpha = 2.0}
  output %y
}
)";
  ExpectNoChange<GemmToMatMul>(in);
}

}  // namespace
}  // namespace kiln
