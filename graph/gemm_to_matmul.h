// GemmToMatMul ("gemm-to-matmul"): rewrites Gemm as MatMul plus the elementwise
// ops it implies, so that one matmul form (with epilogues) reaches fusion.
//
// Pattern: Y = Gemm(A, B [, C]) {transA, transB, alpha, beta}, i.e.
//   Y = alpha * op(A) @ op(B) + beta * C.
// Rewrite:
//   A' = A^T when transA (a new transposed constant when A is constant, else
//        Transpose(A) {perm = [1, 0]} named "<name>/transpose_a"), else A;
//   B' = B^T when transB, likewise ("<name>/transpose_b"); when B is constant and
//        alpha != 1, alpha is folded into it too (one new constant, no node);
//   M  = MatMul(A', B') named like the Gemm;
//   M  = Mul(M, alpha) "<name>/alpha" with a scalar constant, only when alpha != 1
//        and B is not constant;
//   C' = beta * C folded into a new constant when C is constant, else
//        Mul(C, beta) "<name>/beta" (only when beta != 1);
//   Y  = Add(M, C') "<name>/bias" when C is present and beta != 0.
// The last node produces the Gemm's output value (name and graph output kept).
// Preconditions: floating-point dtypes (integer Gemm scales in double and
// truncates, which MatMul + Mul does not reproduce); typed rank-2 A and B.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class GemmToMatMul {
 public:
  absl::string_view name() const { return "gemm-to-matmul"; }
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
