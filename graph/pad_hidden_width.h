// PadHiddenWidth ("pad-hidden-width"): a small hidden layer between two MatMuls whose
// width N is not a multiple of 8, widened to that multiple when the second MatMul
// reads it zero-padded already, so the Pad between them goes.
//
// Squeeze-excitation in EfficientNet: fc1 maps the pooled [N, 1, 1, C] to C/4 channels
// (4, 6, 10, 20, 28, 48), SiLU, then fc2 back to C. pad-conv-channels pads fc2's input
// to 8 channels (a Pad and zero weight rows), and conv1x1-to-matmul makes both FCs
// MatMuls. fc1's product is then not 16-byte aligned (the Hopper family's TMA refuses
// it, so it runs on cuBLASLt with its SiLU as a separate kernel) and the Pad is a
// kernel of its own. With fc1's weight and bias zero-padded to the 8-multiple, its
// padded columns are zeros, the activations keep them finite, and fc2's zero rows
// multiply them away: one GEMM with its bias and SiLU, then fc2, and no Pad.
//
// Pattern: Y = MatMul(P, W2) with W2 a constant [N8, M] whose rows N.. are all zero,
// P = Pad(H) (mode constant, value absent or 0) padding only the end of the last axis,
// from N (N % 8 != 0) to N8; H at the end of a chain of element-wise nodes from
// M1 = MatMul(X, W1), W1 a constant [K, N] read by nothing else, no layout flags. Every
// value of the chain has M1's shape and is read only inside the chain (the last only
// by the Pad). Chain nodes: Add, Sub, Mul (of chain values, or constants that are
// scalars or [N] along the last axis), Relu, LeakyRelu, Sigmoid, HardSigmoid,
// HardSwish, Tanh, Gelu, Clip (constant bounds): finite on finite inputs, so padded
// columns never become inf or NaN (which zero rows would not cancel).
// Rewrite: W1 and the [N] constants zero-padded to N8, every chain value retyped to
// [..., N8], and the MatMul reads H directly (the Pad is removed).
// Runs in the layout stage after conv1x1-to-matmul, before precision lowering and
// fusion.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class PadHiddenWidth {
 public:
  absl::string_view name() const { return "pad-hidden-width"; }
  // Returns whether any hidden layer was widened.
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
