// Axis helpers: normalising a possibly negative axis, and viewing a shape as
// [outer, len, inner] around one axis. Internal to kiln.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace kiln::ops {

// Normalises a possibly negative axis into [0, rank); error names the node.
absl::StatusOr<int64_t> NormalizeAxis(const Node& node, int64_t axis, int64_t rank);

// A shape viewed as [outer, len, inner] around `axis` (in [0, rank)); element
// (o, l, i) is at (o * len + l) * inner + i.
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};
AxisSplit SplitAtAxis(const Shape& shape, int64_t axis);

}  // namespace kiln::ops
