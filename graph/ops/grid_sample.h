// GridSample's options, shared by the CPU reference (graph/ops/grid_sample.cc) and
// the GPU kernel (codegen/ops/grid_sample.cc), which follow one algorithm: the grid's
// normalised (x, y) in [-1, 1] maps to input pixels (align_corners: -1 and 1 are the
// corner pixels' centres, else their outer edges); a location outside the input is
// clamped (border) or reflected (reflection) before sampling; then nearest (round
// half to even), bilinear or bicubic (A = -0.75) sampling reads taps outside the
// input as 0 (zeros), clamped (border) or reflected (reflection). Internal to kiln.
#pragma once

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace kiln::ops {

enum class GridMode { kNearest, kLinear, kCubic };
enum class GridPadding { kZeros, kBorder, kReflection };

struct GridSampleOptions {
  GridMode mode = GridMode::kLinear;
  GridPadding padding = GridPadding::kZeros;
  bool align_corners = false;
};

// The node's attributes (mode bilinear/linear, nearest, bicubic/cubic;
// padding_mode; align_corners); errors name the node.
absl::StatusOr<GridSampleOptions> GetGridSampleOptions(const Node& node);

}  // namespace kiln::ops
