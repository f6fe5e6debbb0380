// Data movement for any dtype (bytes are copied, never converted): copies through
// per-axis offset tables (strided views, index maps), fills, axis permutations,
// and the evaluation of view ops. Internal to kiln.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace kiln::ops {

// Where the elements of an iteration space of shape S live in a buffer: element
// (j_0, ..., j_{r-1}) is at sum_d tables[d][j_d] (in elements). tables[d] has S[d]
// entries. This covers strided views (transpose, slice with steps, broadcast with
// stride 0) and per-axis index maps (pad modes, tile).
using OffsetTables = std::vector<std::vector<int64_t>>;

// Tables of a strided view: tables[d][j] = j * strides[d]. A view that starts at
// an offset is expressed by offsetting the buffer pointer.
OffsetTables StridedTables(const Shape& shape, absl::Span<const int64_t> strides);

// For each element of the iteration space `shape`, copies the `elem_size` bytes at
// src[src_at] to dst[dst_at]. Trailing axes that are contiguous in both buffers are
// copied as one memcpy run; rows are spread over threads. O(number of elements).
void CopyElements(const void* src, const OffsetTables& src_at, void* dst,
                  const OffsetTables& dst_at, const Shape& shape, size_t elem_size);

// CopyElements into a dense row-major destination of `shape`.
void CopyToDense(const void* src, const OffsetTables& src_at, void* dst, const Shape& shape,
                 size_t elem_size);

// Writes `n` copies of the `elem_size`-byte element `value` to dst.
void FillElements(void* dst, int64_t n, const void* value, size_t elem_size);

// `t` with its axes permuted (any dtype): out.shape[i] = t.shape[perm[i]].
Tensor PermuteAxes(const Tensor& t, absl::Span<const int64_t> perm);

// Evaluation of every view op (Reshape, Flatten, Squeeze, Unsqueeze, Identity):
// the output is input 0's bytes under the inferred shape.
absl::Status EvalView(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out);

}  // namespace kiln::ops
