// RecognizeGelu ("recognize-gelu"): replaces the elementwise decompositions of
// GELU that exporters emit with one Gelu node (graph/ops/gelu.cc, ONNX opset 20).
//
// Pattern, erf form (Gelu approximate = "none"):
//   y = x * 0.5 * (1 + erf(x / sqrt(2)))
// as two Muls over the three factors {x, 0.5, Add(Erf(u), 1)} in any grouping and
// operand order (Mul(Mul(x, 0.5), P), Mul(x, Mul(0.5, P)), Mul(Mul(x, P), 0.5), ...),
// with u = Div(x, sqrt(2)) or Mul(x, 1/sqrt(2)) (either operand order).
// Pattern, tanh form (Gelu approximate = "tanh"):
//   y = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
// the same three-factor product with P = Add(Tanh(u), 1), u = Mul(v, sqrt(2/pi)),
// v = Add(x, Mul(c, 0.044715)), c = Pow(x, 3) or Mul(Mul(x, x), x) (any grouping
// and operand order throughout).
// Constants are one-element float constants within 1e-4 of the values above.
// Preconditions: every intermediate value of the pattern has exactly one use and
// is not a graph output; x is floating point and y has x's shape (the scalar
// constants do not broadcast it). The Gelu takes the name of the final Mul and
// produces its output value.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class RecognizeGelu {
 public:
  absl::string_view name() const { return "recognize-gelu"; }
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
