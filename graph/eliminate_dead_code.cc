// Dead-code elimination to a fixed point.
#include "graph/eliminate_dead_code.h"

#include <vector>

namespace kiln {

absl::StatusOr<bool> EliminateDeadCode::Run(Graph& graph) {
  bool changed = false;
  // Visiting in reverse topological order removes whole dead chains in one sweep.
  std::vector<Node*> nodes = graph.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* node = *it;
    bool live = false;
    for (const Value* out : node->outputs()) {
      if (!out->uses().empty() || graph.IsGraphOutput(out)) live = true;
    }
    if (!live) {
      graph.RemoveNode(node);
      changed = true;
    }
  }
  const size_t before = graph.values().size();
  graph.RemoveUnusedValues();
  return changed || graph.values().size() != before;
}

}  // namespace kiln
