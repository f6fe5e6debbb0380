// The generated per-node kernels' test cases of fused groups (codegen/ops/
// op_kernel_cases.h): the pointwise, row, concat and pad groups, and groups that read
// through views. Header-only, for tests.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_kernel_case_table.h"

namespace kiln::codegen::test {

inline void CaseTable::FusedGroups() {
  // ---- Fused groups (fusion/fuse_pointwise.h) ----
  for (DType t : {f32, f16, bf16}) {
    const std::string ty(DTypeName(t));
    // bias + GELU, vectorised with the bias loaded along the last dim.
    const Shape xs = {33, 64};
    c.push_back(GroupCase(absl::StrCat("BiasGeluGroup", ty), "pointwise",
                          absl::StrCat("graph @g {\n  input %x : ", ty, Dims(xs), "\n  input %b : ", ty,
                                       "[64]\n  %t = Add(%x, %b) @add\n  %y = Gelu(%t) @gelu\n  output %y\n}\n"),
                          {R(t, xs), R(t, {64})}, {"add", "gelu"}, 1));
    // Softmax(scores * k + mask[B,1,1,S]) over S = 128 (vectors) and S = 33 (scalars).
    for (int64_t len : {128, 33}) {
      const Shape ss = {2, 3, 5, len}, ms = {2, 1, 1, len};
      c.push_back(GroupCase(absl::StrCat("SoftmaxGroup", len, ty), "softmax",
                            absl::StrCat("graph @g {\n  input %s : ", ty, Dims(ss), "\n  input %m : ", ty, Dims(ms),
                                         "\n  const %k : ", ty,
                                         "[] = [0.125]\n  %a = Mul(%s, %k) @scale\n  %b = Add(%a, %m) @mask\n"
                                         "  %y = Softmax(%b) {axis = -1} @softmax\n  output %y\n}\n"),
                            {R(t, ss, -8.f, 8.f), R(t, ms, -4.f, 0.f)}, {"scale", "mask", "softmax"}, 1));
    }
    // Residual Add + LayerNorm writing the sum too: vectorised (768), scalar (33),
    // streamed (40000).
    for (int64_t len : {768, 33, 40000}) {
      if (len == 40000 && t != bf16) continue;
      const Shape xs2 = {len > 1000 ? 2 : 5, len};
      c.push_back(GroupCase(
          absl::StrCat("LayerNormGroup", len, ty), "layernorm",
          absl::StrCat("graph @g {\n  input %x : ", ty, Dims(xs2), "\n  input %r : ", ty, Dims(xs2),
                       "\n  input %s : ", ty, "[", len, "]\n  input %b : ", ty, "[", len,
                       "]\n  %sum = Add(%x, %r) @add\n  %y = LayerNormalization(%sum, %s, %b) {epsilon = 1e-05} @ln\n"
                       "  output %y\n  output %sum\n}\n"),
          {R(t, xs2), R(t, xs2), R(t, {len}), R(t, {len})}, {"add", "ln"}, 2));
    }
  }
  // A mask broadcast along the softmax axis (one value per row) and a LogSoftmax.
  c.push_back(GroupCase("SoftmaxGroupRowMaskF16", "softmax",
                        "graph @g {\n  input %s : f16[4,3,64]\n  input %m : f16[4,3,1]\n  %b = Add(%s, %m) @mask\n"
                        "  %y = LogSoftmax(%b) {axis = 2} @softmax\n  output %y\n}\n",
                        {R(f16, {4, 3, 64}), R(f16, {4, 3, 1})}, {"mask", "softmax"}, 1));
  // Residual Add + RMSNorm writing the sum too (Llama's pre-norm stream), in registers
  // (2048) and streamed (40000).
  for (int64_t len : {2048, 40000}) {
    const Shape xs = {len > 2048 ? 2 : 5, len};
    c.push_back(GroupCase(absl::StrCat("RmsNormGroup", len, "F16"), "rmsnorm",
                          absl::StrCat("graph @g {\n  input %x : f16", Dims(xs), "\n  input %r : f16", Dims(xs),
                                       "\n  input %s : f16[", len,
                                       "]\n  %sum = Add(%x, %r) @add\n  %y = RMSNormalization(%sum, %s) "
                                       "{epsilon = 1e-06} @rms\n  output %y\n  output %sum\n}\n"),
                          {R(f16, xs), R(f16, xs), R(f16, {len})}, {"add", "rms"}, 2));
  }
  // LayerNorm over the last two dims with a residual broadcast inside the row (strided
  // loads), an inlined scalar scale, and the statistics outputs.
  c.push_back(GroupCase("LayerNormGroupAxis1F32", "layernorm",
                        "graph @g {\n  input %x : f32[3,4,16]\n  input %r : f32[16]\n  const %s : f32[1] = [1.5]\n"
                        "  %sum = Add(%x, %r) @add\n  %y, %mean, %inv = LayerNormalization(%sum, %s) {axis = 1} @ln\n"
                        "  output %y\n  output %inv\n  output %mean\n}\n",
                        {R(f32, {3, 4, 16}), R(f32, {16})}, {"add", "ln"}, 3));
  // Pointwise groups reading through strided views (fuse-pointwise rule 3): GPT-2's
  // logits, Cast(Slice(padded)) with an odd kept width (scalar path) and an aligned
  // one (vectors from an offset start); a Transpose and an Expand into an Add.
  for (int64_t keep : {21, 16}) {
    c.push_back(GroupCase(absl::StrCat("SliceCastGroup", keep), "pointwise",
                          absl::StrCat("graph @g {\n  input %x : f16[5,24]\n  const %st : i64[1] = [", 24 - keep,
                                       "]\n  const %en : i64[1] = [24]\n  const %ax : i64[1] = [1]\n"
                                       "  %s = Slice(%x, %st, %en, %ax) @slice\n  %y = Cast(%s) {to = 1} @cast\n"
                                       "  output %y\n}\n"),
                          {R(f16, {5, 24})}, {"slice", "cast"}, 1));
  }
}

inline void CaseTable::ViewGroups() {
  // RoPE as recognize-rope leaves it for fuse-pointwise: x viewed [..., 2, D/2], the
  // halves swapped by a Slice of step -1 (a negative stride from an offset), the sign,
  // x * cos + rotate_half(x) * sin; D = 64 (vectors) and D = 16 (Llama's tiny width).
  for (int64_t half : {32, 8}) {
    const Shape xs = {2, 3, 5, 2, half}, ts = {1, 1, 5, 2, half};
    c.push_back(
        GroupCase(absl::StrCat("RopeGroupD", 2 * half), "pointwise",
                  absl::StrCat("graph @g {\n  input %x : f16", Dims(xs), "\n  input %cos : f16", Dims(ts),
                               "\n  input %sin : f16", Dims(ts),
                               "\n  input %sign : f16[2,1]\n  const %st : i64[1] = [1]\n"
                               "  const %en : i64[1] = [-9223372036854775808]\n  const %ax : i64[1] = [3]\n"
                               "  const %sp : i64[1] = [-1]\n"
                               "  %sw = Slice(%x, %st, %en, %ax, %sp) @swap\n  %r = Mul(%sw, %sign) @rotate_half\n"
                               "  %a = Mul(%x, %cos) @x_cos\n  %b = Mul(%r, %sin) @rot_sin\n  %y = Add(%a, %b) @add\n"
                               "  output %y\n}\n"),
                  {R(f16, xs), R(f16, ts), R(f16, ts), K(Tensor::FromFloat(f16, {2, 1}, {-1.f, 1.f}))},
                  {"swap", "rotate_half", "x_cos", "rot_sin", "add"}, 1));
  }
  // The same reading x through the head split's Transpose first (a view of a view).
  c.push_back(GroupCase(
      "RopeGroupThroughTransposeBF16", "pointwise",
      "graph @g {\n  input %x0 : bf16[2,5,3,2,16]\n  input %cos : bf16[1,1,5,2,16]\n  input %sign : bf16[2,1]\n"
      "  const %st : i64[1] = [1]\n  const %en : i64[1] = [-9223372036854775808]\n  const %ax : i64[1] = [3]\n"
      "  const %sp : i64[1] = [-1]\n  %t = Transpose(%x0) {perm = [0, 2, 1, 3, 4]} @heads\n"
      "  %sw = Slice(%t, %st, %en, %ax, %sp) @swap\n  %r = Mul(%sw, %sign) @rotate_half\n"
      "  %a = Mul(%t, %cos) @x_cos\n  %y = Add(%a, %r) @add\n  output %y\n}\n",
      {R(bf16, {2, 5, 3, 2, 16}), R(bf16, {1, 1, 5, 2, 16}), K(Tensor::FromFloat(bf16, {2, 1}, {-1.f, 1.f}))},
      {"heads", "swap", "rotate_half", "x_cos", "add"}, 1));
  // ViT's residual LayerNorm reading the out_proj result through the Transpose back
  // to batch-first (rows where the Transpose's input holds them), writing the sum too.
  c.push_back(GroupCase("LayerNormGroupThroughTransposeF16", "layernorm",
                        "graph @g {\n  input %p : f16[5,3,64]\n  input %r : f16[3,5,64]\n  input %s : f16[64]\n"
                        "  input %b : f16[64]\n  %t = Transpose(%p) {perm = [1, 0, 2]} @transpose\n"
                        "  %sum = Add(%t, %r) @add\n  %y = LayerNormalization(%sum, %s, %b) {epsilon = 1e-06} @ln\n"
                        "  output %sum\n  output %y\n}\n",
                        {R(f16, {5, 3, 64}), R(f16, {3, 5, 64}), R(f16, {64}), R(f16, {64})},
                        {"transpose", "add", "ln"}, 2));
  // ViT's pre-attention norm written to batch-first through a Transpose keeping the
  // rows, alone and after a residual Add that the group also stores.
  c.push_back(GroupCase("LayerNormGroupIntoTransposeF16", "layernorm",
                        "graph @g {\n  input %x : f16[3,5,64]\n  input %s : f16[64]\n  input %b : f16[64]\n"
                        "  %y = LayerNormalization(%x, %s, %b) {epsilon = 1e-06} @ln\n"
                        "  %t = Transpose(%y) {perm = [1, 0, 2]} @transpose\n  output %t\n}\n",
                        {R(f16, {3, 5, 64}), R(f16, {64}), R(f16, {64})}, {"ln", "transpose"}, 1));
  c.push_back(GroupCase("LayerNormGroupAddIntoTransposeBF16", "layernorm",
                        "graph @g {\n  input %x : bf16[2,3,4,40]\n  input %r : bf16[2,3,4,40]\n"
                        "  input %s : bf16[40]\n  %sum = Add(%x, %r) @add\n"
                        "  %y = LayerNormalization(%sum, %s) {epsilon = 1e-05} @ln\n"
                        "  %t = Transpose(%y) {perm = [2, 0, 1, 3]} @transpose\n  output %sum\n  output %t\n}\n",
                        {R(bf16, {2, 3, 4, 40}), R(bf16, {2, 3, 4, 40}), R(bf16, {40})}, {"add", "ln", "transpose"},
                        2));
  // Swin's shifted-window block around its attention (fusion/fuse_norms.h), a map of
  // 8x8 in windows of 4 shifted by 2, two images: norm1 written through the cyclic
  // shift (torch.roll's Slice/Concat per axis) and the window partition (Reshape,
  // Transpose, Reshape); the projection read back through the window merge and the
  // reverse shift into the residual Add and norm2, the sum stored too. Vectors (C =
  // 32) and scalars (C = 12).
  for (int64_t ch : {32, 12}) {
    const DType t = ch == 32 ? f16 : bf16;
    const std::string ty(DTypeName(t)), cs = absl::StrCat(ch);
    const std::string consts =
        absl::StrCat("  input %s : ", ty, "[", cs, "]\n  input %b : ", ty, "[", cs,
                     "]\n  const %h : i64[1] = [1]\n  const %w : i64[1] = [2]\n  const %zero : i64[1] = [0]\n"
                     "  const %max : i64[1] = [9223372036854775807]\n");
    auto roll = [&](const std::string& in, const std::string& out, const std::string& at, const std::string& ax) {
      return absl::StrCat("  %", out, "1 = Slice(%", in, ", %at, %max, %", ax, ") @", out, "_tail\n  %", out,
                          "0 = Slice(%", in, ", %zero, %at, %", ax, ") @", out, "_head\n  %", out, " = Concat(%", out,
                          "1, %", out, "0) {axis = ", ax == "h" ? 1 : 2, "} @", out, "\n");
    };
    c.push_back(GroupCase(
        absl::StrCat("SwinShiftedNorm1Group", ty), "layernorm",
        absl::StrCat(
            "graph @g {\n  input %x : ", ty, "[2,8,8,", cs, "]\n", consts,
            "  const %at : i64[1] = [2]\n  const %win : i64[6] = [2, 2, 4, 2, 4, ", cs,
            "]\n  const %flat : i64[3] = [8, 16, ", cs,
            "]\n  %y = LayerNormalization(%x, %s, %b) {epsilon = 1e-05} @ln\n", roll("y", "rh", "at", "h"),
            roll("rh", "rw", "at", "w"),
            "  %p = Reshape(%rw, %win) @partition\n  %pt = Transpose(%p) {perm = [0, 1, 3, 2, 4, 5]} @windows\n"
            "  %o = Reshape(%pt, %flat) @flatten\n  output %o\n}\n"),
        {R(t, {2, 8, 8, ch}), R(t, {ch}), R(t, {ch})},
        {"ln", "rh_tail", "rh_head", "rh", "rw_tail", "rw_head", "rw", "partition", "windows", "flatten"}, 1));
    c.push_back(GroupCase(
        absl::StrCat("SwinShiftedNorm2Group", ty), "layernorm",
        absl::StrCat(
            "graph @g {\n  input %p : ", ty, "[8,16,", cs, "]\n  input %r : ", ty, "[2,8,8,", cs, "]\n", consts,
            "  const %at : i64[1] = [-2]\n  const %win : i64[6] = [2, 2, 2, 4, 4, ", cs,
            "]\n  const %full : i64[4] = [2, 8, 8, ", cs,
            "]\n  %v = Reshape(%p, %win) @unflatten\n  %vt = Transpose(%v) {perm = [0, 1, 3, 2, 4, 5]} @merge\n"
            "  %m = Reshape(%vt, %full) @merged\n",
            roll("m", "rh", "at", "h"), roll("rh", "rw", "at", "w"),
            "  %sum = Add(%r, %rw) @add\n  %y = LayerNormalization(%sum, %s, %b) {epsilon = 1e-05} @ln\n"
            "  output %sum\n  output %y\n}\n"),
        {R(t, {8, 16, ch}), R(t, {2, 8, 8, ch}), R(t, {ch}), R(t, {ch})},
        {"unflatten", "merge", "merged", "rh_tail", "rh_head", "rh", "rw_tail", "rw_head", "rw", "add", "ln"}, 2));
  }
  // Row moves through Transposes whose perm is not its own inverse, on both sides.
  c.push_back(
      GroupCase("LayerNormGroupCyclicMovesF32", "layernorm",
                "graph @g {\n  input %x0 : f32[3,2,4,8]\n  input %r : f32[8,3,8]\n  input %s : f32[8]\n"
                "  const %rows : i64[3] = [8, 3, 8]\n  const %split : i64[4] = [2, 4, 3, 8]\n"
                "  %t = Transpose(%x0) {perm = [1, 2, 0, 3]} @in_cycle\n  %x = Reshape(%t, %rows) @in_rows\n"
                "  %sum = Add(%x, %r) @add\n  %y = LayerNormalization(%sum, %s) {epsilon = 1e-05} @ln\n"
                "  %ys = Reshape(%y, %split) @out_split\n  %o = Transpose(%ys) {perm = [2, 0, 1, 3]} @out_cycle\n"
                "  output %o\n}\n",
                {R(f32, {3, 2, 4, 8}), R(f32, {8, 3, 8}), R(f32, {8})},
                {"in_cycle", "in_rows", "add", "ln", "out_split", "out_cycle"}, 1));
  // Concat groups (fusion/fuse_concat.h): torch.roll along one axis, Swin's patch
  // merging (step-2 Slices of shared step-2 row Slices), a Transpose beside a plain
  // input.
  c.push_back(GroupCase("RollConcatGroupF16", "concat",
                        "graph @g {\n  input %x : f16[2,7,9,16]\n  const %ax : i64[1] = [1]\n"
                        "  const %zero : i64[1] = [0]\n  const %three : i64[1] = [3]\n"
                        "  const %max : i64[1] = [9223372036854775807]\n"
                        "  %a = Slice(%x, %three, %max, %ax) @tail\n  %b = Slice(%x, %zero, %three, %ax) @head\n"
                        "  %y = Concat(%a, %b) {axis = 1} @roll\n  output %y\n}\n",
                        {R(f16, {2, 7, 9, 16})}, {"tail", "head", "roll"}, 1));
  c.push_back(
      GroupCase("PatchMergeConcatGroupBF16", "concat",
                "graph @g {\n  input %x : bf16[1,8,6,5]\n  const %zero : i64[1] = [0]\n  const %one : i64[1] = [1]\n"
                "  const %two : i64[1] = [2]\n  const %max : i64[1] = [9223372036854775807]\n"
                "  %r0 = Slice(%x, %zero, %max, %one, %two) @r0\n  %r1 = Slice(%x, %one, %max, %one, %two) @r1\n"
                "  %a = Slice(%r0, %zero, %max, %two, %two) @a\n  %b = Slice(%r1, %zero, %max, %two, %two) @b\n"
                "  %c = Slice(%r0, %one, %max, %two, %two) @c\n  %d = Slice(%r1, %one, %max, %two, %two) @d\n"
                "  %y = Concat(%a, %b, %c, %d) {axis = -1} @merge\n  output %y\n}\n",
                {R(bf16, {1, 8, 6, 5})}, {"r0", "r1", "a", "b", "c", "d", "merge"}, 1));
  c.push_back(GroupCase("TransposeConcatGroupF32", "concat",
                        "graph @g {\n  input %x : f32[3,5,4]\n  input %w : f32[3,2,5]\n"
                        "  %t = Transpose(%x) {perm = [0, 2, 1]} @t\n  %y = Concat(%w, %t) {axis = 1} @cat\n"
                        "  output %y\n}\n",
                        {R(f32, {3, 5, 4}), R(f32, {3, 2, 5})}, {"t", "cat"}, 1));
  // Pad groups (fusion/fuse_pad.h): an image input's Cast, Transpose to channels-last
  // and channel Pad; a Transpose and a Pad on two sides with a fill value.
  c.push_back(GroupCase("CastTransposePadGroupF16", "pad",
                        "graph @g {\n  input %x : f32[2,3,5,7]\n  const %pads : i64[8] = [0, 0, 0, 0, 0, 0, 0, 5]\n"
                        "  %h : f16[2,3,5,7] = Cast(%x) {to = 10} @cast\n"
                        "  %t = Transpose(%h) {perm = [0, 2, 3, 1]} @nhwc\n  %y = Pad(%t, %pads) @pad\n"
                        "  output %y\n}\n",
                        {R(f32, {2, 3, 5, 7})}, {"cast", "nhwc", "pad"}, 1));
  c.push_back(GroupCase("TransposePadValueGroupBF16", "pad",
                        "graph @g {\n  input %x : bf16[3,4,6]\n  const %pads : i64[6] = [0, 1, 0, 0, 2, 3]\n"
                        "  const %v : bf16[] = [0.5]\n  %t = Transpose(%x) {perm = [0, 2, 1]} @t\n"
                        "  %y = Pad(%t, %pads, %v) @pad\n  output %y\n}\n",
                        {R(bf16, {3, 4, 6})}, {"t", "pad"}, 1));
  c.push_back(GroupCase("TransposeAddGroupBF16", "pointwise",
                        "graph @g {\n  input %x : bf16[3,8,5]\n  input %r : bf16[3,5,8]\n"
                        "  %t = Transpose(%x) {perm = [0, 2, 1]} @transpose\n  %y = Add(%t, %r) @add\n"
                        "  %z = Relu(%y) @relu\n  output %z\n}\n",
                        {R(bf16, {3, 8, 5}), R(bf16, {3, 5, 8})}, {"transpose", "add", "relu"}, 1));
  c.push_back(
      GroupCase("ExpandMulGroupF16", "pointwise",
                "graph @g {\n  input %x : f16[4,1,16]\n  input %r : f16[4,3,16]\n  const %sh : i64[3] = [4, 3, 16]\n"
                "  %e = Expand(%x, %sh) @expand\n  %y = Mul(%e, %r) @mul\n  output %y\n}\n",
                {R(f16, {4, 1, 16}), R(f16, {4, 3, 16})}, {"expand", "mul"}, 1));
}

}  // namespace kiln::codegen::test
