// Row-major strides and multidirectional (numpy) broadcasting of shapes and of
// element offsets. Internal to kiln (graph/ops and the GPU kernel generators).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace kiln::ops {

// Multidirectional (numpy) broadcast of two shapes; error names the node.
absl::StatusOr<Shape> BroadcastShapes(const Node& node, const Shape& a, const Shape& b);

// Row-major strides of `shape`.
std::vector<int64_t> Strides(const Shape& shape);

// For each element of `out_shape` (row-major), the offset of the element of a
// tensor of `in_shape` broadcast to it. in_shape must broadcast to out_shape.
std::vector<int64_t> BroadcastOffsets(const Shape& in_shape, const Shape& out_shape);

}  // namespace kiln::ops
