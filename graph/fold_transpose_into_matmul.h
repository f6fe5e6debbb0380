// FoldTransposeIntoMatMul ("fold-transpose-into-matmul"): a MatMul reads a
// transposed COMPUTED operand in place through its layout flag (trans_a / trans_b,
// graph/ops/mat_mul.cc) instead of through a materialised Transpose; a CONSTANT
// operand is instead stored in the layout kernels read best (row-major, no flag).
//
// Let t = Transpose(x) {perm} (perm absent: reversed dims), r = rank(x), and let
// swap = [0, ..., r-3, r-1, r-2] (only the last two dims trade places). A MatMul
// that reads t as operand A (input 0) or B (input 1) with flag f (0 or 1) computes
// with swap^f(t).
//
// (1) perm == swap (r >= 2). Every MatMul that reads t as A or B reads x instead,
//     its flag for that operand toggled (set to 1, or removed when it was 1). Math:
//     swap^f(swap(x)) = swap^(1-f)(x). The Transpose stays for its other
//     consumers; when it has none left, eliminate-dead-code removes it.
//
// (2) Transpose(x, perm) == swap(Transpose(x, q)) where q is perm with its last two
//     entries exchanged. Applied when q keeps x's last dim last (perm[r-2] == r-1,
//     perm != swap; so r >= 3). Example: the key transpose of BERT / GPT-2 exports,
//     [0,2,3,1] = [0,2,1,3] then swap. The Transpose node is kept with perm q (its
//     output becomes [.., N, K] instead of [.., K, N]) and every reader toggles its
//     flag. Why: a Transpose that keeps the innermost dim copies contiguous rows
//     (coalesced, like the Q and V head transposes beside it), one that moves it is
//     an element-wise strided gather; and the MatMul reads [.., N, K] natively
//     (cuBLASLt op T, K-major B in a generated GEMM). Same node count, a cheaper
//     copy. Only when EVERY reader of t is a MatMul operand and t is not a graph
//     output: another reader would need the old layout, i.e. a second Transpose, and
//     this pass never adds nodes. (Folding q itself into the MatMul as batch strides
//     would remove the node; MatMul has no such flag.)
//
// (3) A flag on a constant operand (left e.g. by gemm-to-matmul on a weight that a
//     Constant node produced, before constant folding made it a constant): the
//     operand is replaced by a new constant "<name>/transposed" holding swap(c)
//     (shared by every MatMul that reads c flagged) and the flag is removed. So a
//     constant weight always reaches fusion and kernels row-major [K, N], the
//     layout fuse-siblings concatenates and kernels read best.
//
// Not folded: Transpose of a constant (fold-constants materialises it, then (3)
// does not apply as there is no flag); perms that move batch dims without being (1)
// or (2) (e.g. [1,0,2]); readers other than a standard-domain MatMul with two
// inputs and a valid flag (absent, 0 or 1), e.g. Add, Gemm, Softmax. A rank-1
// Transpose is the identity and never matches.
// Preconditions: a typed graph. Postconditions: typed, same outputs; may leave
// unused Transposes and constants for eliminate-dead-code.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class FoldTransposeIntoMatMul {
 public:
  absl::string_view name() const { return "fold-transpose-into-matmul"; }
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
