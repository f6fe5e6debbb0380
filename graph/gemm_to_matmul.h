// GemmToMatMul ("gemm-to-matmul"): rewrites Gemm as MatMul plus the elementwise
// ops it implies, so that one matmul form (with epilogues) reaches fusion.
//
// Pattern: Y = Gemm(A, B [, C]) {transA, transB, alpha, beta}, i.e.
//   Y = alpha * op(A) @ op(B) + beta * C.
// Rewrite:
//   A' = A^T folded into a new constant ("<A>/transposed") when transA and A is
//        constant, else A itself;
//   B' = likewise for transB; when B is constant and alpha != 1, alpha is folded
//        into it too (one new constant, no node);
//   M  = MatMul(A', B') named like the Gemm, with the layout flag trans_a = 1
//        (trans_b = 1) when transA (transB) holds for a COMPUTED A (B): the MatMul
//        reads the operand in its stored layout, no Transpose node is made (flags:
//        graph/ops/mat_mul.cc);
//   M  = Mul(M, alpha) "<name>/alpha" with a scalar constant, only when alpha != 1
//        and B is not constant;
//   C' = beta * C folded into a new constant when C is constant, else
//        Mul(C, beta) "<name>/beta" (only when beta != 1);
//   Y  = Add(M, C') "<name>/bias" when C is present and beta != 0.
// Constant weights are re-laid out at compile time rather than flagged: a constant
// operand is stored in the layout the kernels read best, row-major [K, N] for B
// (and [M, K] for A), which is also what fuse-siblings concatenates. So nn.Linear's
// Gemm(x, W[out, in], transB=1) becomes MatMul(x, W^T) with no flag.
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
