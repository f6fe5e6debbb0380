// Removal of Identity and inference Dropout nodes.
#include "graph/remove_identity.h"

#include <vector>

namespace kiln {
namespace {

bool Removable(const Graph& graph, const Node& node) {
  if (!node.domain().empty() || node.num_inputs() < 1 || !node.has_input(0) || node.num_outputs() < 1) {
    return false;
  }
  if (graph.IsGraphOutput(node.output(0))) return false;
  if (node.op_type() == "Identity") return node.num_outputs() == 1;
  if (node.op_type() != "Dropout") return false;
  for (int i = 1; i < node.num_outputs(); ++i) {
    if (!node.output(i)->uses().empty() || graph.IsGraphOutput(node.output(i))) return false;
  }
  if (node.has_input(2)) {
    const Tensor* training = node.input(2)->constant_or_null();
    if (training == nullptr) return false;
    for (float v : training->ToFloat()) {
      if (v != 0.f) return false;
    }
  }
  // Opsets < 7 spelled training as is_test = 0.
  if (node.has_attr("is_test")) {
    const absl::StatusOr<int64_t> is_test = node.GetInt("is_test");
    if (!is_test.ok() || *is_test == 0) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<bool> RemoveIdentity::Run(Graph& graph) {
  bool changed = false;
  for (Node* node : graph.nodes()) {
    if (!Removable(graph, *node)) continue;
    Value* in = node->input(0);
    Value* out = node->output(0);
    graph.ReplaceAllUsesWith(out, in);
    graph.RemoveNode(node);
    changed = true;
  }
  if (changed) graph.RemoveUnusedValues();
  return changed;
}

}  // namespace kiln
