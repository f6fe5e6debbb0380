// RemoveIdentity ("remove-identity"): drops Identity nodes and inference-mode
// Dropout nodes; their consumers read the input directly.
//
// Pattern: Identity(x) -> y, or Dropout(x [, ratio [, training_mode]]) -> y [, mask].
// Math: y = x (Dropout at inference is the identity; `ratio` is ignored).
// Preconditions, otherwise the node is kept:
//  - y is not a graph output (a graph output keeps its name, and renaming x is
//    not possible when x is itself a graph input, constant or another output);
//  - Dropout: the mask output is absent or has no uses and is not a graph output;
//    training_mode is absent or a constant false (a non-constant one is kept).
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
