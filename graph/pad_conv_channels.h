// PadConvChannels ("pad-conv-channels"): a channels-last Conv whose input has a
// channel count that is not a multiple of 8 (an image stem: C = 3) reads its input
// zero-padded to the next multiple of 8, with its weight zero-padded to match.
//
// cuDNN's NHWC fp16 kernels want C % 8 == 0 (16-byte channel vectors); with C = 3
// it falls back to a slow path: ResNet-50's 7x7 stem, as one fused conv call, took a
// large share of the model's time at batch 128 on the H100. Zero channels add
// nothing to any output (their weights are zero), so the result is unchanged.
//
// Pattern: Conv(X, W[, B]) with channels_last = 1, group = 1, X [N, H, W, C] with
// C % 8 != 0, W a constant [OC, KH, KW, C] read by nothing else.
// Rewrite: X8 = Pad(X, pads [0,0,0,0, 0,0,0,C8-C]) (constant 0), W8 = [OC, KH, KW,
// C8] (W then zeros), Conv(X8, W8[, B]) writing the old output.
// Runs once after to-channels-last, before precision lowering and fusion.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class PadConvChannels {
 public:
  absl::string_view name() const { return "pad-conv-channels"; }
  // Returns whether any Conv was padded.
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
