// Conv1dToConv2d ("conv1d-to-conv2d"): a 1-D Conv becomes a 2-D Conv over a map of
// height 1, so that it reaches the channels-last layout and the 2-D conv kernels.
//
// Pattern: Y = Conv(X [N, C, L], Wt [OC, C/group, K] constant [, B [OC]]) of a
// floating dtype, typed.
// Rewrite (names "<conv>/as_2d...", the Conv keeps its name):
//   X2 = Reshape(X, [N, C, 1, L])
//   Y2 = Conv(X2, Wt as [OC, C/group, 1, K] (a new constant) [, B]) with
//        kernel_shape [1, K], strides [1, s], dilations [1, d], pads [0, p0, 0, p1],
//        group and auto_pad as they were (a kernel of height 1 at stride 1 pads
//        nothing along the new axis, so SAME_* pads only along L, as before)
//   Y  = Reshape(Y2, [N, OC, L'])
// The Conv's output value (name, graph output) is kept.
// Math: the 2-D convolution of a height-1 map with a height-1 kernel is the 1-D one.
// Why: Whisper's audio stem (two Conv1d, 80 -> 512 -> 512 channels over 3000 frames)
// ran in ONNX's NCL layout on cuDNN, the layout its slow fp16 kernels take; as 2-D
// convs, to-channels-last gives them the NHWC path the image models use.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class Conv1dToConv2d {
 public:
  absl::string_view name() const { return "conv1d-to-conv2d"; }
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
