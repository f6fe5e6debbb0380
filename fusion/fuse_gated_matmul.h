// FuseGatedMatMul ("fuse-gated-matmul"): a gated FFN, Mul(f(X Wg), h(X Wu)) (Llama's
// SwiGLU: f = SiLU, h = identity; GeGLU: f = GELU), becomes ONE MatMul of X with the
// two weights interleaved, whose epilogue pairs each gate column with its up column
// in registers and writes only the product: one kernel instead of a GEMM writing both
// halves and a pointwise kernel reading them back.
//
// Pattern. A Mul J whose input 0 is computed from a gate product and input 1 from an
// up product by element-wise chains (each possibly empty) where the products are
//   - the outputs of MatMuls G and U that read the same X [..., M, K] as input 0 and
//     constant 2-D weights [K, N] of one 16-bit dtype, with N % 8 == 0 and no layout
//     flags (trans_a / trans_b); or
//   - the two halves of one such MatMul's product [..., M, 2N] (a merged gate_up weight
//     [K, 2N], Phi-3's), cut by a Split into two equal parts along the last axis that
//     alone reads it (either half may be the gate);
// and:
//   - a chain's nodes are Relu, Gelu, Sigmoid, Tanh, Erf, LeakyRelu, HardSwish,
//     HardSigmoid, Add, Sub, Mul, Div or Pow, each output of the product's shape and
//     dtype, reading chain values, the product or constants that broadcast into it
//     (SiLU spelled Mul(g, Sigmoid(g)), GELU's tanh or erf decompositions);
//   - every product and chain value is read only inside the pattern (not a graph
//     output), and J's output has the product's shape.
// Rewrite (exact, so the CPU reference runs the group's members as they are): W' =
// [K, 2N] holds Wg and Wu (a merged weight's column halves) interleaved in blocks of 8 columns (columns 16p..16p+7 are
// Wg's 8p..8p+7, columns 16p+8..16p+15 Wu's); P = MatMul(X, W') [..., M, 2N];
// Reshape(P, [..., M, N/8, 2, 8]); Split along axis -2 into two [..., M, N/8, 1, 8];
// each Reshaped back to [..., M, N], which become the two products. The FusedGroup
// {MatMul, Reshape, Split, both Reshapes, both chains, J}, pattern "gated-matmul",
// anchor the MatMul, output J's. A kernel (the Hopper family,
// codegen/ops/gemm_sm90.h) computes P's tiles and, in each thread's accumulators,
// finds gate and up of one output element in n8 blocks 2p and 2p + 1 of the same
// registers: it evaluates the chains and J there and stores a tile half as wide.
// A target whose GEMM does not take the group runs its members
// (expand-groups-without-kernels).
// Not fired, silently: a Mul of anything else (any input not such a chain, both chains
// from one product, weights of other shapes, computed, or of f32). Reported ("other
// consumers: "): a product or chain value also read outside the pattern.
//
// Preconditions: a typed static graph, before fuse-siblings (which would stack G and
// U with the other MatMuls of X and split them apart again).
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fusion/fusion_report.h"
#include "graph/graph.h"

namespace kiln {

class FuseGatedMatMul {
 public:
  explicit FuseGatedMatMul(FusionReport* report = nullptr) : report_(report) {}
  absl::string_view name() const { return "fuse-gated-matmul"; }
  absl::StatusOr<bool> Run(Graph& graph);

 private:
  FusionReport* report_;
};

}  // namespace kiln
