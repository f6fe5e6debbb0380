// Internal fp32 GEMM for the CPU reference ops (MatMul, Gemm, Conv): packed,
// cache-blocked, vectorised micro-kernels, parallel over output tiles.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/types/span.h"

namespace kiln::ops::cpu {

// A logical matrix X(r, c) = data[r * row_stride + c * col_stride]. Transposed
// operands are expressed by swapping the strides.
struct MatrixRef {
  const float* data = nullptr;
  int64_t row_stride = 0;
  int64_t col_stride = 1;
};

// Writes row `p`, columns [j0, j0 + n) of a virtual K x N matrix contiguously into
// `dst` (implicit im2col for convolution).
using RowSource = std::function<void(int64_t p, int64_t j0, int64_t n, float* dst)>;

// One problem: C = alpha * A * B + beta * C, with A m x k, B k x n, C m x n
// row-major with leading dimension ldc. beta == 0 never reads C.
struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  MatrixRef a;
  MatrixRef b;       // ignored when b_rows is set
  RowSource b_rows;  // optional: B given row by row
  float* c = nullptr;
  int64_t ldc = 0;
  float alpha = 1.f;
  float beta = 0.f;
};

// Runs all problems (parallel over output tiles of all of them). Output regions
// of different problems must not overlap.
void Gemm(absl::Span<const GemmProblem> problems);
inline void Gemm(const GemmProblem& problem) { Gemm(absl::MakeConstSpan(&problem, 1)); }

// The name of the micro-kernel in use ("avx512", "avx2", "generic").
const char* GemmKernelName();
// Selects a micro-kernel by name (tests); "" restores the best one. Returns false,
// changing nothing, when this CPU cannot run it. Not safe during a running Gemm.
bool UseGemmKernel(const std::string& name);

}  // namespace kiln::ops::cpu
