// Resize's interpolation plan, shared by the CPU reference (graph/ops/resize.cc) and
// the GPU kernel (codegen/ops/resize.cc): per axis and output index, the input
// indices and weights that output position reads. Internal to kiln.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace kiln::ops {

// The taps of one output position along one axis; empty: the position lies outside
// the crop (tf_crop_and_resize) and takes the extrapolation value.
struct ResizeTaps {
  std::vector<int64_t> idx;
  std::vector<double> w;
};

// An output element is the sum over every combination of its axes' taps of the
// product of their weights times the input element at their indices (in double).
struct ResizePlan {
  Shape out;
  std::vector<std::vector<ResizeTaps>> taps;  // [axis][output index]
  float extrapolation = 0.f;
};

// The plan of a Resize node with constant roi / scales / sizes; errors name the node.
absl::StatusOr<ResizePlan> PlanResize(const Node& node);

}  // namespace kiln::ops
