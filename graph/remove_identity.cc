// Removal of Identity, inference Dropout and no-op Pad / Slice nodes.
#include "graph/remove_identity.h"

#include <vector>

#include "graph/ops/slice.h"

namespace kiln {
namespace {

// A Pad of constant pads, all zero, or a Slice of constant arguments taking every
// element of its input in order: either leaves its typed input as it is.
bool IsNoOpPadOrSlice(const Node& node) {
  if (node.num_outputs() != 1 || !node.input(0)->has_type() || !node.output(0)->has_type() ||
      node.input(0)->shape() != node.output(0)->shape() || node.input(0)->dtype() != node.output(0)->dtype()) {
    return false;
  }
  if (node.op_type() == "Pad") {
    const Tensor* pads = node.has_input(1) ? node.input(1)->constant_or_null() : nullptr;
    if (pads == nullptr) return false;
    for (int64_t p : pads->ToInt64()) {
      if (p != 0) return false;
    }
    return true;
  }
  const absl::StatusOr<std::vector<ops::AxisSlice>> plan = ops::ConstantSlicePlan(node);
  if (!plan.ok()) return false;
  for (size_t d = 0; d < plan->size(); ++d) {
    const ops::AxisSlice& a = (*plan)[d];
    if (a.start != 0 || a.step != 1 || a.count != node.input(0)->shape()[d]) return false;
  }
  return true;
}

bool Removable(const Graph& graph, const Node& node) {
  if (!node.domain().empty() || node.num_inputs() < 1 || !node.has_input(0) || node.num_outputs() < 1) {
    return false;
  }
  if (graph.IsGraphOutput(node.output(0))) return false;
  if (node.op_type() == "Identity") return node.num_outputs() == 1;
  if (node.op_type() == "Pad" || node.op_type() == "Slice") return IsNoOpPadOrSlice(node);
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
