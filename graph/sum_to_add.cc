// Sum -> Add chain (see sum_to_add.h).
#include "graph/sum_to_add.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"

namespace kiln {

absl::StatusOr<bool> SumToAdd::Run(Graph& graph) {
  std::vector<Node*> sums;
  for (Node* n : graph.nodes()) {
    if (n->op_type() == "Sum" && n->domain().empty() && n->num_outputs() == 1 && n->num_inputs() >= 1) {
      sums.push_back(n);
    }
  }
  bool changed = false;
  for (Node* sum : sums) {
    std::vector<Value*> xs;
    bool typed = true;
    for (int i = 0; i < sum->num_inputs(); ++i) {
      Value* x = sum->input(i);
      typed = typed && x != nullptr && x->has_type();
      xs.push_back(x);
    }
    if (!typed) continue;
    Value* y = sum->output(0);
    const std::string name = sum->name();
    if (xs.size() == 1) {
      if (graph.IsGraphOutput(y)) continue;
      graph.ReplaceAllUsesWith(y, xs[0]);
      graph.RemoveNode(sum);
      changed = true;
      continue;
    }
    graph.RemoveNode(sum);
    Value* acc = xs[0];
    for (size_t i = 1; i < xs.size(); ++i) {
      const bool last = i + 1 == xs.size();
      Value* out = last ? y : graph.AddValue(absl::StrCat(name, "/add", i));
      Node* add = graph.AddNode("Add", {acc, xs[i]}, {out}, last ? name : absl::StrCat(name, "/add", i));
      KILN_RETURN_IF_ERROR(InferNode(*add));
      acc = out;
    }
    changed = true;
  }
  if (changed) {
    graph.RemoveUnusedValues();
    KILN_RETURN_IF_ERROR(graph.TopologicalSort());
  }
  return changed;
}

}  // namespace kiln
