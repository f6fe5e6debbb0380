// RemoveIdentity ("remove-identity"): drops Identity nodes, inference-mode Dropout
// nodes, and Pads, Slices, scales by 1, Casts and Expands that change nothing; their
// consumers read the input directly.
//
// Pattern: Identity(x) -> y, Dropout(x [, ratio [, training_mode]]) -> y [, mask],
// Pad(x, pads all 0, ...) -> y, or Slice(x, starts, ends, ...) -> y taking all of x in
// order (Swin's window padding and its crop, when the feature map is a whole number
// of windows), Mul(x, c), Mul(c, x) or Div(x, c) with c a one-element floating
// constant equal to 1 (Whisper's legacy export scales Q and K by sqrt(1)), Cast(x) to
// x's own dtype or Expand(x, shape) to x's own shape (the legacy exporter's padding
// mask: a bool Cast to bool, an Expand of the [B, 1, S, S] mask to [B, 1, S, S]).
// Math: y = x (Dropout at inference is the identity; `ratio` is ignored; x * 1 and
// x / 1 are x exactly, signed zeros, infinities and NaN included).
// Preconditions, otherwise the node is kept:
//  - y is not a graph output (a graph output keeps its name, and renaming x is
//    not possible when x is itself a graph input, constant or another output);
//  - Dropout: the mask output is absent or has no uses and is not a graph output;
//    training_mode is absent or a constant false (a non-constant one is kept);
//  - Pad, Slice: constant pads (starts, ends, axes, steps), typed x and y of one
//    shape and dtype;
//  - Mul, Div, Cast, Expand: x typed with y's shape and dtype (a 1 that broadcasts x
//    is kept).
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class RemoveIdentity {
 public:
  absl::string_view name() const { return "remove-identity"; }
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
