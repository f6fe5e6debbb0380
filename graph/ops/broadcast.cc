// Row-major strides and numpy broadcasting.
#include "graph/ops/broadcast.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kiln::ops {

absl::StatusOr<Shape> BroadcastShapes(const Node& node, const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return node.Error(absl::StrCat("shapes ", ShapeToString(a), " and ", ShapeToString(b),
                                     " cannot be broadcast together"));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

std::vector<int64_t> BroadcastOffsets(const Shape& in_shape, const Shape& out_shape) {
  const size_t rank = out_shape.size();
  const int64_t n = NumElements(out_shape);
  std::vector<int64_t> offsets(n);
  if (in_shape == out_shape) {
    for (int64_t i = 0; i < n; ++i) offsets[i] = i;
    return offsets;
  }
  // Strides of the input aligned to the output's rank; 0 where broadcast.
  std::vector<int64_t> in_strides(rank, 0);
  const std::vector<int64_t> s = Strides(in_shape);
  const size_t lead = rank - in_shape.size();
  for (size_t i = 0; i < in_shape.size(); ++i) in_strides[lead + i] = in_shape[i] == 1 ? 0 : s[i];
  std::vector<int64_t> index(rank, 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    offsets[i] = offset;
    for (int d = static_cast<int>(rank) - 1; d >= 0; --d) {
      if (++index[d] < out_shape[d]) {
        offset += in_strides[d];
        break;
      }
      offset -= in_strides[d] * (out_shape[d] - 1);
      index[d] = 0;
    }
  }
  return offsets;
}

}  // namespace kiln::ops
