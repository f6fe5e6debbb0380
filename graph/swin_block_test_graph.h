// swin.legacy's second block of stage 1 as the exporter writes it (cut from the zoo
// file at its tiny width: map 56x56, C = 16, windows of 7, shift 3), in kiln's text
// form: norm1 -> torch.roll by -3 on H then W (Slice(3:), Slice(:3), Concat, with the
// exporter's axes and steps inputs) -> window partition (Reshape, Transpose, Reshape)
// -> QKV MatMul; the projection (input %proj) -> window merge -> roll by +3 ->
// residual Add -> norm2, whose sum the MLP's residual reads again (an output). Shared
// by the row-move tests (graph/row_moves_test.cc) and fuse-norms' (fusion/
// fuse_norms_test.cc).
#pragma once

namespace kiln::test {

inline constexpr char kSwinShiftedBlock[] = R"(
graph @main {
  input %x : f32[1,56,56,16]
  input %proj : f32[64,49,16]
  const %g1 : f32[16] = splat(1.0)
  const %b1 : f32[16] = splat(0.0)
  const %g2 : f32[16] = splat(1.0)
  const %b2 : f32[16] = splat(0.0)
  const %wqkv : f32[16,48] = splat(0.1)
  const %one : i64[1] = [1]
  const %two : i64[1] = [2]
  const %zero : i64[1] = [0]
  const %three : i64[1] = [3]
  const %minus3 : i64[1] = [-3]
  const %max : i64[1] = [9223372036854775807]
  const %Concat_5 : i64[6] = [1, 8, 7, 8, 7, 16]
  const %Concat_6 : i64[3] = [64, 49, 16]
  const %Concat_32 : i64[6] = [1, 8, 8, 7, 7, 16]
  const %Concat_33 : i64[4] = [1, 56, 56, 16]
  %n1 = LayerNormalization(%x, %g1, %b1) {axis = -1, epsilon = 1e-05} @norm1
  %s1 = Slice(%n1, %three, %max, %one, %one) @Slice_1
  %s2 = Slice(%n1, %zero, %three, %one, %one) @Slice_2
  %c3 = Concat(%s1, %s2) {axis = 1} @Concat_3
  %s3 = Slice(%c3, %three, %max, %two, %one) @Slice_3
  %s4 = Slice(%c3, %zero, %three, %two, %one) @Slice_4
  %c4 = Concat(%s3, %s4) {axis = 2} @Concat_4
  %r2 = Reshape(%c4, %Concat_5) @Reshape_2
  %t1 = Transpose(%r2) {perm = [0, 1, 3, 2, 4, 5]} @Transpose_1
  %r3 = Reshape(%t1, %Concat_6) @Reshape_3
  %qkv = MatMul(%r3, %wqkv) @MatMul
  %r19 = Reshape(%proj, %Concat_32) @Reshape_19
  %t6 = Transpose(%r19) {perm = [0, 1, 3, 2, 4, 5]} @Transpose_6
  %r20 = Reshape(%t6, %Concat_33) @Reshape_20
  %s50 = Slice(%r20, %minus3, %max, %one, %one) @Slice_50
  %s51 = Slice(%r20, %zero, %minus3, %one, %one) @Slice_51
  %c34 = Concat(%s50, %s51) {axis = 1} @Concat_34
  %s52 = Slice(%c34, %minus3, %max, %two, %one) @Slice_52
  %s53 = Slice(%c34, %zero, %minus3, %two, %one) @Slice_53
  %c35 = Concat(%s52, %s53) {axis = 2} @Concat_35
  %sum = Add(%x, %c35) @Add
  %n2 = LayerNormalization(%sum, %g2, %b2) {axis = -1, epsilon = 1e-05} @norm2
  output %qkv
  output %n2
  output %sum
}
)";

}  // namespace kiln::test
