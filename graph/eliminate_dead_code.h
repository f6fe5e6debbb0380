// EliminateDeadCode ("eliminate-dead-code"): removes nodes none of whose outputs
// reach a graph output, then values nothing refers to.
//
// Pattern: any node whose outputs all have no uses and are not graph outputs,
// repeated to a fixed point. Preconditions: none. Never removes graph inputs.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class EliminateDeadCode {
 public:
  absl::string_view name() const { return "eliminate-dead-code"; }
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
