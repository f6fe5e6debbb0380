// FoldBatchNorm ("fold-batch-norm"): removes inference BatchNormalization nodes
// with constant parameters, folding them into the Conv before them or rewriting
// them as a per-channel Mul + Add that fusion can absorb into an epilogue.
//
// Per channel c: s[c] = scale[c] / sqrt(var[c] + epsilon),
//                t[c] = beta[c] - mean[c] * s[c],   BN(x)[n,c,...] = x[n,c,...] * s[c] + t[c].
//
// Pattern 1: y = BatchNormalization(Conv(x, W [, B]), scale, beta, mean, var)
//   -> y = Conv(x, W', B') with W'[m,...] = W[m,...] * s[m] and
//      B'[m] = (B[m] - mean[m]) * s[m] + beta[m]  (B = 0 when absent).
//   The Conv keeps its name and attributes and now produces y; the new constants
//   are "<W>/bn_folded" and "<B>/bn_folded" ("<conv name>/bias_bn_folded" without B).
//   Preconditions: W (and B when present) constant; the Conv output has the BN
//   as its only use and is not a graph output; floating-point dtypes.
// Pattern 2: y = BatchNormalization(x, scale, beta, mean, var), x of rank >= 2 and
//   not foldable as above -> y = Add(Mul(x, S), T), with constants S = s and
//   T = t of x's dtype shaped [C, 1, ..., 1] (rank(x) - 1 dims, so they broadcast
//   along axis 1), named "<name>/scale" and "<name>/shift". The Mul takes the BN's
//   name, the Add "<name>/bias" and produces y.
// Preconditions for both: scale, beta, mean, var constant; training_mode absent
// or 0; only the first output (Y) present.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class FoldBatchNorm {
 public:
  absl::string_view name() const { return "fold-batch-norm"; }
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
