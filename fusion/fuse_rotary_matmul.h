// FuseRotaryMatMul ("fuse-rotary-matmul"): rotary position embedding (RoPE) on the
// heads of a merged Q/K/V product moves into that product's GEMM: the epilogue finds
// each element's rotation partner (the column D/2 away in the same head) in the same
// thread's accumulators and writes the rotated Q and K, so the Split copy and the two
// rotation kernels go, and the attention reads Q, K and V in place.
//
// Pattern (after fuse-siblings and recognize-rope, Llama's attention input):
//   P = MatMul(X, W)                     [..., N], 16-bit, a plain MatMul that only the
//                                        Split reads
//   q, k, v = Split(P, axis = -1)        (any number of pieces)
// where at least one piece x reaches, through a chain of Reshapes and Transposes each
// read only by the next,
//   xh [..., 2, h]                       (recognize-rope's head view of x)
//   y = Add(Mul(xh, cos), Mul(Mul(Slice(xh, start 1, step -1, axis -2), sign), sin))
// with sign the constant [[-1], [1]], cos and sin constants broadcasting into xh, and
// every intermediate read only there (no graph output). In P, xh's last axis must be
// contiguous columns and its axis -2 the two halves h columns apart, each rotated
// piece starting at a multiple of 2h columns, one h for all of them, N % 2h == 0.
// Rewrite (exact: the same products and sum, element by element):
//   R = Add(Mul(P, C), Mul(Partner(P), S))      the group "rotary-matmul", anchor the
//                                               MatMul
//   Partner(P) = Reshape(Slice(Reshape(P, [..., N/2h, 2, h]), start 1, step -1,
//                axis -2), P's shape)           (the column h away within its 2h)
// C and S are constant tables over P's last two dims (a sequence's rows and the
// columns; 1 along the others, and along the rows too where they do not vary): cos
// and sign * sin for rotated elements, 1 and 0 for the others (the V columns). Each
// piece becomes Slice(R, its columns); a rotated piece's head-view chain now reads that
// Slice, and its y is replaced by the chain's xh.
// Not fired, silently: a Split of anything else or with no rotated piece; reported
// ("layout: "): a rotation whose halves are not h contiguous columns of P; ("head
// dim: ") h not a multiple of 8 or 2h not dividing 256, which the Hopper family's
// epilogue does not pair; ("tables: ") cos or sin that differ between entries of P's
// leading dims (the tables cover one entry's rows and columns, built in memory of that
// size, not P's).
//
// Preconditions: a typed static graph with constant tables; after fuse-siblings (the
// merged product) and before fuse-attention (which then reads the Slices of R).
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fusion/fusion_report.h"
#include "graph/graph.h"

namespace kiln {

class FuseRotaryMatMul {
 public:
  explicit FuseRotaryMatMul(FusionReport* report = nullptr) : report_(report) {}
  absl::string_view name() const { return "fuse-rotary-matmul"; }
  absl::StatusOr<bool> Run(Graph& graph);

 private:
  FusionReport* report_;
};

}  // namespace kiln
