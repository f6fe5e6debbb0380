// Data movement (any dtype): strided copies, fills, axis permutes and views.
#include "graph/ops/data_movement.h"

#include <algorithm>
#include <cstring>

#include "common/parallel.h"
#include "graph/ops/broadcast.h"

namespace kiln::ops {

namespace {

// True when table[j] == table[0] + j * step for every j.
bool IsAffine(const std::vector<int64_t>& table, int64_t step) {
  for (size_t j = 1; j < table.size(); ++j) {
    if (table[j] != table[0] + static_cast<int64_t>(j) * step) return false;
  }
  return true;
}

// One row of single elements: dst[dt[j]] = src[st[j]].
template <typename T>
void CopyRowElements(const uint8_t* src, const int64_t* st, uint8_t* dst, const int64_t* dt,
                     int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    std::memcpy(dst + dt[j] * sizeof(T), src + st[j] * sizeof(T), sizeof(T));
  }
}

constexpr int64_t kCopyGrainBytes = 1 << 16;

}  // namespace

OffsetTables StridedTables(const Shape& shape, absl::Span<const int64_t> strides) {
  OffsetTables tables(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    tables[d].resize(shape[d]);
    for (int64_t j = 0; j < shape[d]; ++j) tables[d][j] = j * strides[d];
  }
  return tables;
}

void CopyElements(const void* src_ptr, const OffsetTables& src_at, void* dst_ptr,
                  const OffsetTables& dst_at, const Shape& shape, size_t elem_size) {
  const auto* src = static_cast<const uint8_t*>(src_ptr);
  auto* dst = static_cast<uint8_t*>(dst_ptr);
  const int64_t es = static_cast<int64_t>(elem_size);
  const int rank = static_cast<int>(shape.size());
  if (NumElements(shape) == 0) return;
  if (rank == 0) {
    std::memcpy(dst, src, elem_size);
    return;
  }
  // Merge trailing axes that are contiguous in both buffers into one run of
  // `run` elements starting at (src0, dst0) relative to the row's offsets.
  int64_t run = 1, src0 = 0, dst0 = 0;
  int k = rank;
  while (k > 0 && IsAffine(src_at[k - 1], run) && IsAffine(dst_at[k - 1], run)) {
    src0 += src_at[k - 1][0];
    dst0 += dst_at[k - 1][0];
    run *= shape[k - 1];
    --k;
  }
  if (k == 0) {  // One contiguous block.
    const int64_t bytes = run * es;
    ParallelFor(bytes, kCopyGrainBytes, [&](int64_t b, int64_t e) {
      std::memcpy(dst + dst0 * es + b, src + src0 * es + b, e - b);
    });
    return;
  }
  // Axis k-1 is the row axis, iterated with its tables; axes [0, k-1) are outer.
  // Work items are (row, j) pairs, each a run of `run` elements.
  const int row_axis = k - 1;
  const int64_t row_len = shape[row_axis];
  const int64_t* st = src_at[row_axis].data();
  const int64_t* dt = dst_at[row_axis].data();
  int64_t rows = 1;
  for (int d = 0; d < row_axis; ++d) rows *= shape[d];
  const int64_t run_bytes = run * es;
  const int64_t grain = std::max<int64_t>(1, kCopyGrainBytes / run_bytes);
  ParallelFor(rows * row_len, grain, [&](int64_t begin, int64_t end) {
    // Multi-index of the first row over the outer axes, and its offsets.
    std::vector<int64_t> index(row_axis, 0);
    int64_t s_off = src0, d_off = dst0;
    int64_t rem = begin / row_len;
    for (int d = row_axis - 1; d >= 0; --d) {
      index[d] = rem % shape[d];
      rem /= shape[d];
      s_off += src_at[d][index[d]];
      d_off += dst_at[d][index[d]];
    }
    int64_t j0 = begin % row_len;
    for (int64_t i = begin; i < end;) {
      const int64_t j1 = std::min(row_len, j0 + (end - i));
      const uint8_t* s = src + s_off * es;
      uint8_t* t = dst + d_off * es;
      if (run > 1) {
        for (int64_t j = j0; j < j1; ++j) std::memcpy(t + dt[j] * es, s + st[j] * es, run_bytes);
      } else {
        const int64_t n = j1 - j0;
        switch (elem_size) {
          case 1: CopyRowElements<uint8_t>(s, st + j0, t, dt + j0, n); break;
          case 2: CopyRowElements<uint16_t>(s, st + j0, t, dt + j0, n); break;
          case 4: CopyRowElements<uint32_t>(s, st + j0, t, dt + j0, n); break;
          case 8: CopyRowElements<uint64_t>(s, st + j0, t, dt + j0, n); break;
          default:
            for (int64_t j = j0; j < j1; ++j) std::memcpy(t + dt[j] * es, s + st[j] * es, es);
        }
      }
      i += j1 - j0;
      j0 = 0;
      if (i >= end) break;
      // Advance the odometer over the outer axes to the next row.
      for (int d = row_axis - 1; d >= 0; --d) {
        s_off -= src_at[d][index[d]];
        d_off -= dst_at[d][index[d]];
        if (++index[d] < shape[d]) {
          s_off += src_at[d][index[d]];
          d_off += dst_at[d][index[d]];
          break;
        }
        index[d] = 0;
        s_off += src_at[d][0];
        d_off += dst_at[d][0];
      }
    }
  });
}

void CopyToDense(const void* src, const OffsetTables& src_at, void* dst, const Shape& shape,
                 size_t elem_size) {
  CopyElements(src, src_at, dst, StridedTables(shape, Strides(shape)), shape, elem_size);
}

void FillElements(void* dst_ptr, int64_t n, const void* value, size_t elem_size) {
  auto* dst = static_cast<uint8_t*>(dst_ptr);
  if (n <= 0) return;
  const auto* v = static_cast<const uint8_t*>(value);
  bool all_same = true;
  for (size_t b = 1; b < elem_size; ++b) all_same = all_same && v[b] == v[0];
  if (all_same) {
    std::memset(dst, v[0], static_cast<size_t>(n) * elem_size);
    return;
  }
  // Write one element, then double the filled prefix.
  std::memcpy(dst, v, elem_size);
  const size_t total = static_cast<size_t>(n) * elem_size;
  size_t filled = elem_size;
  while (filled < total) {
    const size_t chunk = std::min(filled, total - filled);
    std::memcpy(dst + filled, dst, chunk);
    filled += chunk;
  }
}

Tensor PermuteAxes(const Tensor& t, absl::Span<const int64_t> perm) {
  const Shape& in = t.shape();
  const std::vector<int64_t> in_strides = Strides(in);
  Shape shape(perm.size());
  std::vector<int64_t> strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    shape[i] = in[perm[i]];
    strides[i] = in_strides[perm[i]];
  }
  Tensor out(t.dtype(), shape);
  CopyToDense(t.raw_data(), StridedTables(shape, strides), out.mutable_raw_data(), shape, DTypeSize(t.dtype()));
  return out;
}

absl::Status EvalView(const Node&, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  out[0] = in[0]->Reshaped(out[0].shape());
  return absl::OkStatus();
}

}  // namespace kiln::ops
