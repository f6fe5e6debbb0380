// Sliding-window geometry of Conv and the pooling ops: strides, dilations, pads
// and auto_pad resolved to output sizes, lifted to 3 spatial dims, and per-output
// tap ranges. Shared by the CPU reference and the GPU kernel generators. Internal
// to kiln.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace kiln::ops {

// Sliding-window geometry of Conv and the pooling ops, one entry per spatial dim.
struct WindowGeometry {
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end, output;
};

// Reads strides, dilations (when `use_dilations`), pads and auto_pad (NOTSET,
// SAME_UPPER, SAME_LOWER, VALID) from `node` and computes pads and the output
// size for spatial input dims `in` and window `kernel`. With `ceil_mode` the
// window count rounds up, but a window starting in the end padding is dropped.
absl::StatusOr<WindowGeometry> ComputeWindow(const Node& node, const Shape& in, std::vector<int64_t> kernel,
                                             bool use_dilations, bool ceil_mode);

// WindowGeometry lifted to exactly 3 spatial dims (leading unit dims for 1-D and
// 2-D windows), so one loop nest serves every rank.
struct Window3 {
  int64_t in[3], out[3], kernel[3], stride[3], dilation[3], pad_begin[3], pad_end[3];
};
Window3 LiftWindow(const Shape& in_spatial, const WindowGeometry& w);

// For each output index along dim `d` of `g`: the input position of tap 0, the
// taps [lo, hi) that land inside the input, and the taps [lo_pad, hi_pad) that
// land inside the input extended by its pads.
struct TapRange {
  int64_t start, lo, hi, lo_pad, hi_pad;
};
std::vector<TapRange> TapRanges(const Window3& g, int d);

}  // namespace kiln::ops
