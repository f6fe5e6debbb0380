// RoiAlign's geometry, shared by the CPU reference (graph/ops/roi_align.cc) and the
// GPU kernel (codegen/ops/roi_align.cc), which follow one algorithm (ONNX's, as
// onnxruntime implements it): each output bin of a region averages (mode avg) or
// takes the largest weighted corner (mode max) of grid_h x grid_w bilinear samples;
// a sample outside [-1, size] reads 0. The adaptive grid (sampling_ratio 0) is
// ceil(region extent / bins) per axis, capped at kMaxRoiAlignGrid samples where
// onnxruntime's is unbounded; a non-finite region samples nothing and pools to 0.
// Internal to kiln.
#pragma once

#include <cmath>
#include <cstdint>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace kiln::ops {

struct RoiAlignOptions {
  bool half_pixel = true;  // coordinate_transformation_mode
  bool max = false;        // mode
  int64_t out_h = 1, out_w = 1, sampling_ratio = 0;
  float spatial_scale = 1.f;
};

absl::StatusOr<RoiAlignOptions> GetRoiAlignOptions(const Node& node);

inline constexpr int64_t kMaxRoiAlignGrid = 1024;

// Samples per bin along one axis of a region `extent` wide split into `bins`.
inline int64_t RoiAlignGrid(float extent, int64_t bins, int64_t sampling_ratio) {
  if (sampling_ratio > 0) return sampling_ratio;
  const float g = std::ceil(extent / static_cast<float>(bins));
  return g > 0.f ? (g < static_cast<float>(kMaxRoiAlignGrid) ? static_cast<int64_t>(g) : kMaxRoiAlignGrid) : 0;
}

}  // namespace kiln::ops
