// FuseConcat: a Concat with the strided views that feed it, one "concat" group.
#include "fusion/fuse_concat.h"

#include <algorithm>
#include <vector>

#include "fusion/group_util.h"
#include "graph/fused_group.h"

namespace kiln {

absl::StatusOr<bool> FuseConcat::Run(Graph& graph) {
  std::vector<Node*> concats;
  for (Node* n : graph.nodes()) {
    if (n->op_type() == "Concat" && !IsFusedGroup(*n) && n->num_outputs() == 1 && n->output(0)->has_type()) {
      concats.push_back(n);
    }
  }
  bool changed = false;
  for (Node* concat : concats) {
    // The views above the Concat's inputs (through values that only views read), then
    // less each view read from outside the group, until none is.
    std::vector<Node*> members;
    std::vector<Value*> todo(concat->inputs().begin(), concat->inputs().end());
    while (!todo.empty()) {
      Value* x = todo.back();
      todo.pop_back();
      Node* view = x == nullptr ? nullptr : x->producer();
      // A view of a constant the group body would inline (one element) has no group
      // input to read from; it stays outside.
      if (view == nullptr || !IsStridedView(*view) || graph.IsGraphOutput(x) ||
          InlinedIntoGroupBody(*view->input(0)) || std::find(members.begin(), members.end(), view) != members.end()) {
        continue;
      }
      members.push_back(view);
      todo.push_back(view->input(0));
    }
    members.push_back(concat);
    for (bool pruned = true; pruned;) {
      pruned = false;
      for (auto m = members.begin(); m != members.end() && !pruned; ++m) {
        if (*m != concat && HasOutsideUse(graph, (*m)->output(0), members)) {
          members.erase(m);
          pruned = true;
        }
      }
    }
    if (members.size() < 2) continue;
    changed |= FormAndReportGroup(graph, report_, name(), members, "concat", nullptr);
  }
  return changed;
}

}  // namespace kiln
