// PatchifyConv ("patchify-conv"): a Conv whose kernel tiles its input without overlap
// (a ViT's patch embedding: 16x16 kernel, stride 16) becomes a MatMul over patches.
//
// Pattern: Y = Conv(X [N, C, H, W], Wt [OC, C, KH, KW] constant [, B [OC]]) with
// strides == kernel_shape, KH * KW >= 2, no padding (pads 0, auto_pad NOTSET or
// VALID), dilations 1, group 1, H % KH == 0 and W % KW == 0, floating dtypes.
// Rewrite (names "<conv>/patches", ...):
//   P  = Reshape(X, [N, C, H/KH, KH, W/KW, KW])
//   P  = Transpose(P, perm [0, 2, 4, 1, 3, 5])          [N, OH, OW, C, KH, KW]
//   P  = Reshape(P, [N OH OW, C KH KW])
//   M  = MatMul(P, Wm), Wm = Wt as [OC, C KH KW], transposed: a new constant
//   M  = Add(M, B) when B is present
//   Y  = Transpose(Reshape(M, [N, OH, OW, OC]), perm [0, 3, 1, 2])
// The Conv's output value (name, graph output) is kept.
// Why: cuDNN runs the patch embedding of ViT-B/16 (3 channels, 224x224, stride 16)
// slowly on the H100, a large share of the model's time, where the same work as a
// 196x768x768 GEMM costs a small fraction of that (the model ran faster with this
// pass: benchmarks/results/models_vit_patchify_h100_2026-11-23g.csv); the MatMul also
// reaches fusion (bias and activation epilogues) and the GEMM families. 1x1 convs
// (kernel == stride == 1) are left alone: they are channel mixes that the conv kernels
// already run as GEMMs in NHWC.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class PatchifyConv {
 public:
  absl::string_view name() const { return "patchify-conv"; }
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
