// RecognizeRmsNorm ("recognize-rms-norm"): the exporters' decomposition of RMSNorm
// (Llama's LlamaRMSNorm, T5's T5LayerNorm) becomes one RMSNormalization.
//
// Pattern (x32 = x, or Cast(x, to = float) read only by the square and the scaling):
//   sq  = Pow(x32, 2) | Mul(x32, x32)
//   ms  = ReduceMean(sq, axes = [-1], keepdims = 1)
//   s   = Sqrt(Add(ms, eps))                       # Add operands in either order
//   y   = Mul(x32, Reciprocal(s)) | Mul(x32, Div(1, s)) | Div(x32, s)   # Mul either order
//   [y  = Cast(y, to = x's dtype)]                 # only when x32 is a Cast
//   [y  = Mul(y, w)]                               # either order
// -> y = RMSNormalization(x, w) {axis = -1, epsilon = eps}, w = 1 when absent.
// Math: RMSNormalization computes x / sqrt(mean(x^2) + eps) * w over the last axis in
// fp32; with the casts the exported graph rounds to x's dtype once before the
// weight, RMSNormalization after it (one rounding moves).
// Preconditions: the ReduceMean reduces only the last axis with keepdims = 1; eps is
// a one-element constant; w is a constant with H = x.shape[-1] elements ([H] or
// [1, ..., 1, H]); x is floating point and y keeps its dtype and shape; every
// intermediate is used by the pattern alone and is not a graph output. The
// RMSNormalization takes the name of the pattern's last node and writes its value.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class RecognizeRmsNorm {
 public:
  absl::string_view name() const { return "recognize-rms-norm"; }
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
