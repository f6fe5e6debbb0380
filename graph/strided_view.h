// StridedView: where the elements of a chain of view ops (Transpose, Reshape and its
// kin Unsqueeze / Squeeze / Flatten, Expand, and Slice or a one-index Gather with
// constant arguments) sit in the tensor the chain starts from, as an offset and
// strides. A kernel that reads the start tensor through these strides needs no copy
// for the chain: fuse-attention reads Q, K and V this way through the exporters' head
// split (Reshape, Transpose), torch's SDPA key reshapes ([B,H,S,D] -> [B*H,S,D] ->
// transposed -> [B,H,D,S]), GQA's repeat_kv (Unsqueeze, Expand, Reshape) and the
// selects of a packed QKV product (torchvision's and Swin's in_proj: Gather of index
// 0, 1 or 2).
//
// Each dim of the view is a list of factors (size, stride), outermost first: element
// i of a dim of factors (n0, s0), (n1, s1) is at (i / n1) * s0 + (i % n1) * s1. One
// factor is a plain strided dim; several arise where a Reshape merges dims that are
// not contiguous in memory (GQA's [Hkv, rep] with strides [S*D, 0] merged into H).
// Expand gives stride-0 factors. A Reshape that would split a factor unevenly is not
// expressible: the view ops then report false and leave the view as it was.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "graph/graph.h"

namespace kiln {

struct ViewFactor {
  int64_t size = 1;
  int64_t stride = 0;
  bool operator==(const ViewFactor& o) const { return size == o.size && stride == o.stride; }
};

class StridedView {
 public:
  // The tensor itself: dense row-major strides.
  static StridedView Dense(const Shape& shape);

  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  // The factors of dim `d` (size-1 factors dropped, contiguous neighbours merged).
  const std::vector<ViewFactor>& factors(int d) const { return dims_[d]; }

  // Where element 0 of the view sits in the start tensor.
  int64_t offset() const { return offset_; }

  // Each returns false (the view unchanged) when the result has no strided form.
  bool Transpose(const std::vector<int64_t>& perm);
  bool Reshape(const Shape& shape);
  bool Expand(const Shape& shape);  // numpy broadcast of the view to `shape`
  // Element `index` of dim `axis` alone: the dim goes (kept as size 1 if `keep_dim`).
  bool Select(int axis, int64_t index, bool keep_dim);
  // `count` elements of dim `axis` from `start`, `step` (> 0) apart.
  bool Slice(int axis, int64_t start, int64_t step, int64_t count);
  // Applies view node `node` (IsViewNode) by its output's shape and attributes.
  bool Apply(const Node& node);

  // The one stride of dim `d`: its factors merge into one (0 for a dim of size 1 or a
  // broadcast one); nullopt when they do not.
  std::optional<int64_t> Stride(int d) const;
  // The factors of the leading rank()-`trailing` dims broadcast (right-aligned, numpy
  // rules) against `batch`, outermost first, one flat index over `batch` reaching them
  // all: dims the view lacks or has as 1 become (n, 0). nullopt when a dim neither
  // matches nor broadcasts.
  std::optional<std::vector<ViewFactor>> BatchFactors(int trailing, const Shape& batch) const;

 private:
  void Normalize(int d);

  bool ApplyGather(const Node& node);
  bool ApplySlice(const Node& node);

  Shape shape_;
  std::vector<std::vector<ViewFactor>> dims_;
  int64_t offset_ = 0;
};

// Whether `node` only re-indexes its first input (Transpose, Reshape, Unsqueeze,
// Squeeze, Flatten, Expand; Slice with constant arguments; Gather of one constant
// index) and has typed input and output, so StridedView::Apply may take it.
bool IsViewNode(const Node& node);

}  // namespace kiln
