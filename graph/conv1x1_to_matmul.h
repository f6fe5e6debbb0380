// Conv1x1ToMatMul ("conv1x1-to-matmul"): a channels-last 1x1 Conv (stride 1, no
// padding, group 1) is a channel mix, X [N, H, W, C] times a [C, OC] matrix, and
// becomes that MatMul (plus an Add of its bias).
//
// Pattern: Y = Conv(X [N, H, W, C], Wt [OC, 1, 1, C] constant [, B [OC]]) with
// channels_last = 1, kernel 1x1, strides 1, pads 0, dilations 1, group 1, a floating
// dtype.
// Rewrite (names "<conv>/matmul", "<conv>/bias"):
//   M = MatMul(X, Wm), Wm = Wt as [C, OC] (a new constant, "<weight>/matmul")
//   Y = Add(M, B) when B is present, else M
// The Conv's output value (name, graph output) is kept.
// Why: a 1x1 conv in NHWC is exactly a GEMM with M = N*H*W rows, so it runs on kiln's
// GEMM families and takes their epilogues (bias, SiLU, HardSwish, a residual Add) and
// A-prologues, where the conv kernels' implicit GEMM is the sm_80 mainloop. The convs
// of EfficientNet and MobileNetV3 this targets are mostly 1x1: the expansion convs
// with SiLU epilogues, the squeeze-excitation FCs on [N, 1, 1, C] and the projections.
// Runs after to-channels-last (it needs the NHWC form) and pad-conv-channels (so the
// padded channel count is K), before precision lowering and fusion.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class Conv1x1ToMatMul {
 public:
  absl::string_view name() const { return "conv1x1-to-matmul"; }
  // Returns whether any Conv was rewritten.
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
