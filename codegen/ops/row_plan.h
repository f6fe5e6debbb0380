// Row plans shared by the reduction kernels (codegen/ops/reduce.cc) and the row
// kernels (codegen/ops/row.cc): how rows are spread over threads, and the typed
// load/store functions of their generated prefixes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/ops/kernel_util.h"

namespace kiln::codegen::ops {

// How a row kernel spreads rows of `len` elements over threads: `threads` per row, a
// power of two <= 32 (`rows_per_block` rows per block of kRowBlock threads, warp
// shuffles only) when a warp can take the row with at most `cap` elements per
// thread; else one row per block of 64..1024 threads (shuffles, then shared memory),
// the fewest that keep each thread within `cap`. `cache`: the row fits in registers
// (at most `cap` elements per thread).
inline constexpr uint32_t kRowBlock = 128;

struct RowPlan {
  int vec = 1;
  int threads = 32;
  int rows_per_block = 1;
  bool cache = true;
  uint32_t block = kRowBlock;
  uint32_t grid = 1;
};

RowPlan PlanRows(int64_t rows, int64_t len, int vec, int cap);
// kThreads, kRowsPerBlock, kVec and kCache of `p`, as C++ constants.
std::string RowPlanConstants(const RowPlan& p);
// `name(p, i)`: element i of a `dtype` tensor as `domain`'s type.
std::string LoadFn(const std::string& name, DType dtype, Domain domain, const char* idx_t);
// `name(p, i, v)`: stores v (of `domain`) as `dtype`, `finish` applied.
std::string StoreFn(const std::string& name, DType dtype, Domain domain, const char* idx_t, const std::string& finish);
// `name(i)`: the offset of flat index i over `shape` (collapsed) with `strides`.
std::string OffsetFn(const std::string& name, const Shape& shape, const std::vector<int64_t>& strides,
                     const char* idx_t);

}  // namespace kiln::codegen::ops
