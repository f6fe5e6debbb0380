// Tests for FuseNorms: the residual Add, ViT's row-keeping Transposes, and Swin's
// cyclic shift and window partition around a norm (the block as swin.legacy writes
// it, graph/swin_block_test_graph.h), must-not-fire cases, and fused == unfused on
// the CPU reference.
#include "fusion/fuse_norms.h"

#include <gtest/gtest.h>

#include "fusion/fusion_test_util.h"
#include "graph/swin_block_test_graph.h"

namespace kiln {
namespace {

using ::kiln::testing::ExpectOneRejection;
using ::kiln::testing::Groups;
using ::kiln::testing::Summary;

// Runs FuseNorms on `text` (constants randomised with seed 13); see testing::RunFusionPass.
std::unique_ptr<Graph> FuseAndCheck(const std::string& text, FusionReport* report, bool* changed = nullptr) {
  return ::kiln::testing::RunFusionPass<FuseNorms>(text, report, 13, changed);
}

TEST(FuseNormsTest, LayerNormTakesResidualAdd) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[2,3,16]
  input %r : f32[2,3,16]
  const %gamma : f32[16] = splat(1.0)
  const %beta : f32[16] = splat(0.0)
  %h = Add(%x, %r) @residual
  %y = LayerNormalization(%h, %gamma, %beta) {axis = -1, epsilon = 1e-05} @ln
  output %y
  output %h
}
)",
                        &report);
  EXPECT_EQ(Summary(*g), "FusedGroup layernorm [residual, ln] anchor=\n");
  // The residual stream h is read again later: it is an extra output.
  EXPECT_EQ(Groups(*g)[0]->num_outputs(), 2);
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].pattern, "layernorm");
}

// vit.dynamo's second residual (S = 8, B = 2, E = 16): the out_proj result comes back
// from batch-first [S, B, E] by Transpose [1, 0, 2]; the norm's group reads it through
// the Transpose. A Transpose moving the last axis, or one read elsewhere, stays out.
TEST(FuseNormsTest, LayerNormReadsThroughARowKeepingTranspose) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %proj : f32[8,2,16]
  input %stream : f32[2,8,16]
  input %other : f32[2,16,8]
  const %gamma : f32[16] = splat(1.0)
  const %beta : f32[16] = splat(0.0)
  %t = Transpose(%proj) {perm = [1, 0, 2]} @node_transpose_5
  %h = Add(%t, %stream) @node_add_1
  %y = LayerNormalization(%h, %gamma, %beta) {axis = -1, epsilon = 1e-06} @node_layer_norm_1
  %u = Transpose(%other) {perm = [0, 2, 1]} @moves_the_rows
  %h2 = Add(%u, %y) @add_2
  %y2 = LayerNormalization(%h2, %gamma, %beta) {axis = -1, epsilon = 1e-06} @ln_2
  %t3 = Transpose(%proj) {perm = [1, 0, 2]} @read_twice
  %h3 = Add(%t3, %y2) @add_3
  %y3 = LayerNormalization(%h3, %gamma, %beta) {axis = -1, epsilon = 1e-06} @ln_3
  output %y3
  output %t3
}
)",
                        &report);
  EXPECT_EQ(Summary(*g),
            "Transpose @moves_the_rows\nTranspose @read_twice\n"
            "FusedGroup layernorm [node_transpose_5, node_add_1, node_layer_norm_1] anchor=\n"
            "FusedGroup layernorm [add_2, ln_2] anchor=\nFusedGroup layernorm [add_3, ln_3] anchor=\n");
}

// vit.dynamo's pre-attention norm (S = 8, B = 2, E = 16): the LayerNorm output goes to
// batch-first [S, B, E] by Transpose [1, 0, 2] for the in_proj GEMM; the group writes
// each row where the Transpose puts it. A Transpose moving the normalised axis, or a
// norm read by another node too, leaves the Transpose out.
TEST(FuseNormsTest, LayerNormWritesThroughARowKeepingTranspose) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[2,8,16]
  const %gamma : f32[16] = splat(1.0)
  const %beta : f32[16] = splat(0.0)
  const %w : f32[16,16] = splat(0.5)
  %ln = LayerNormalization(%x, %gamma, %beta) {axis = -1, epsilon = 1e-06} @node_layer_norm_2
  %t = Transpose(%ln) {perm = [1, 0, 2]} @node_transpose_6
  %q = MatMul(%t, %w) @node_MatMul_99
  %ln2 = LayerNormalization(%x, %gamma, %beta) {axis = -1, epsilon = 1e-06} @ln_moved
  %u = Transpose(%ln2) {perm = [0, 2, 1]} @moves_the_axis
  %ln3 = LayerNormalization(%x, %gamma, %beta) {axis = -1, epsilon = 1e-06} @ln_twice
  %v = Transpose(%ln3) {perm = [1, 0, 2]} @transpose_twice
  %r = Relu(%ln3) @other_reader
  output %q
  output %u
  output %v
  output %r
}
)",
                        &report);
  EXPECT_EQ(Summary(*g),
            "LayerNormalization @ln_moved\nTranspose @moves_the_axis\nLayerNormalization @ln_twice\n"
            "Transpose @transpose_twice\nRelu @other_reader\n"
            "FusedGroup layernorm [node_layer_norm_2, node_transpose_6] anchor=\nMatMul @node_MatMul_99\n");
}

using ::kiln::test::kSwinShiftedBlock;

TEST(FuseNormsTest, SwinShiftedWindowsRideOnTheNorms) {
  FusionReport report;
  auto g = FuseAndCheck(kSwinShiftedBlock, &report);
  EXPECT_EQ(Summary(*g),
            "FusedGroup layernorm [norm1, Slice_1, Slice_2, Concat_3, Slice_3, Slice_4, Concat_4, Reshape_2, "
            "Transpose_1, Reshape_3] anchor=\nMatMul @MatMul\n"
            "FusedGroup layernorm [Reshape_19, Transpose_6, Reshape_20, Slice_50, Slice_51, Concat_34, Slice_52, "
            "Slice_53, Concat_35, Add, norm2] anchor=\n");
  ASSERT_EQ(report.groups.size(), 2u);
  EXPECT_EQ(report.groups[0].pass, "fuse-norms");
  EXPECT_TRUE(report.rejections.empty()) << report.ToString();
  // norm2's group writes the sum and the norm.
  EXPECT_EQ(Groups(*g)[1]->num_outputs(), 2);
}

// The chain after a norm makes the kernel run over the moved rows: not with an Add
// whose sum the group must also store in x's order (the Add and norm still fuse),
// nor when the norm's output has another reader (the norm stays alone).
TEST(FuseNormsTest, RowMovesAfterTheNormMustNotFire) {
  FusionReport report;
  auto g = FuseAndCheck(R"(
graph @main {
  input %x : f32[1,8,8,16]
  input %r : f32[1,8,8,16]
  const %g : f32[16] = splat(1.0)
  const %one : i64[1] = [1]
  const %zero : i64[1] = [0]
  const %three : i64[1] = [3]
  const %max : i64[1] = [9223372036854775807]
  %sum = Add(%x, %r) @add
  %n = LayerNormalization(%sum, %g) {axis = -1, epsilon = 1e-05} @norm
  %s1 = Slice(%n, %three, %max, %one) @tail
  %s2 = Slice(%n, %zero, %three, %one) @head
  %c = Concat(%s1, %s2) {axis = 1} @roll
  %m = LayerNormalization(%x, %g) {axis = -1, epsilon = 1e-05} @norm_read_twice
  %u1 = Slice(%m, %three, %max, %one) @tail_2
  %u2 = Slice(%m, %zero, %three, %one) @head_2
  %u = Concat(%u1, %u2) {axis = 1} @roll_2
  %e = Exp(%m) @other_reader
  output %c
  output %sum
  output %u
  output %e
}
)",
                        &report);
  EXPECT_EQ(Summary(*g),
            "LayerNormalization @norm_read_twice\nSlice @tail_2\nSlice @head_2\nConcat @roll_2\nExp @other_reader\n"
            "FusedGroup layernorm [add, norm] anchor=\nSlice @tail\nSlice @head\nConcat @roll\n");
  ExpectOneRejection(report, {"norm", "tail", "head", "roll"}, "outputs: ");
}

}  // namespace
}  // namespace kiln
