// RecognizeLayerNorm ("recognize-layer-norm"): replaces the decomposed layer
// normalisation that exporters emit below opset 17 with one LayerNormalization.
//
// Pattern (torch.onnx's layer_norm before opset 17; kiln's models/ emit exactly it):
//   mean = ReduceMean(x, axes = [-1])            # axes attribute or constant input
//   d    = Sub(x, mean)
//   var  = ReduceMean(Pow(d, 2) | Mul(d, d), axes = [-1])
//   y    = Div(d, Sqrt(Add(var, eps)))           # Add operands in either order
//   [y   = Mul(y, gamma)]                        # either order
//   [y   = Add(y, beta)]                         # either order
// -> y = LayerNormalization(x, gamma, beta) {axis = -1, epsilon = eps}, with
// gamma = 1 and beta = 0 constants created when the Mul / Add are absent.
// Math: LayerNormalization computes exactly (x - mean) / sqrt(var + eps) * gamma + beta
// over the last axis, var being the biased variance.
// Preconditions: both ReduceMeans reduce only the last axis (-1 or rank-1) with
// keepdims = 1; eps is a one-element constant; gamma and beta are constants with
// H = x.shape[-1] elements shaped [H] or [1, ..., 1, H] (rank <= rank of x);
// x is floating point; every intermediate value has no uses outside the pattern
// and is not a graph output. The LayerNormalization takes the name of the last
// node of the pattern and produces its output value.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class RecognizeLayerNorm {
 public:
  absl::string_view name() const { return "recognize-layer-norm"; }
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
