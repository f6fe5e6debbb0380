// Slice's plan, shared by the CPU reference (graph/ops/slice.cc), the GPU kernel
// generator and fusion. Internal to kiln.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace kiln::ops {

// Slice's plan per input axis: first element, step and number of elements taken.
struct AxisSlice {
  int64_t start = 0;
  int64_t step = 1;
  int64_t count = 0;
};
// The plan of a Slice node whose starts/ends/axes/steps are constants (defined in
// slice.cc; used by its inference and by the GPU kernel generator).
absl::StatusOr<std::vector<AxisSlice>> ConstantSlicePlan(const Node& node);

}  // namespace kiln::ops
