// Axis normalisation and the [outer, len, inner] view around an axis.
#include "graph/ops/axes.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kiln::ops {

absl::StatusOr<int64_t> NormalizeAxis(const Node& node, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1)) {
    if (!(rank == 0 && (axis == 0 || axis == -1))) {
      return node.Error(absl::StrCat("axis ", axis, " is out of range for rank ", rank));
    }
  }
  return axis < 0 ? axis + rank : axis;
}

AxisSplit SplitAtAxis(const Shape& shape, int64_t axis) {
  AxisSplit s;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis) s.outer *= shape[d];
    else if (d == axis) s.len = shape[d];
    else s.inner *= shape[d];
  }
  return s;
}

}  // namespace kiln::ops
