// Removal of Identity, inference Dropout and no-op Pad / Slice nodes.
#include "graph/remove_identity.h"

#include <vector>

#include "graph/ops/slice.h"
#include "graph/symbolic_shapes.h"
#include "graph/pattern_match.h"

namespace kiln {
namespace {

// A Pad of constant pads, all zero, or a Slice of constant arguments taking every
// element of its input in order: either leaves its typed input as it is.
bool IsNoOpPadOrSlice(const Node& node) {
  if (node.num_outputs() != 1 || !node.input(0)->has_type() || !node.output(0)->has_type() ||
      node.input(0)->shape() != node.output(0)->shape() || node.input(0)->dtype() != node.output(0)->dtype()) {
    return false;
  }
  // In a dynamic graph the shapes are the largest case's: a Slice to the sequence
  // length takes the whole buffer only there.
  if (SymbolicShape(*node.input(0)) != SymbolicShape(*node.output(0))) return false;
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

// Mul(x, 1), Mul(1, x) or Div(x, 1) that keeps x's shape and dtype: the index of x,
// else -1. (Whisper's legacy export scales Q and K by the square root of an SDPA
// scale of 1, after scaling the q projection itself.)
int UnitScaleInput(const Node& node) {
  if (node.num_inputs() != 2 || node.num_outputs() != 1 || !node.output(0)->has_type()) return -1;
  for (int i : {0, 1}) {
    const Value* x = node.input(i);
    const Value* c = node.input(1 - i);
    if (x == nullptr || !x->has_type() || x->shape() != node.output(0)->shape() ||
        x->dtype() != node.output(0)->dtype() || ScalarConstant(c) != 1.f) {
      continue;
    }
    if (node.op_type() == "Mul" || (node.op_type() == "Div" && i == 0)) return i;
  }
  return -1;
}

// Whether input 0 is typed with the output's dtype and shape (a Cast to the dtype it
// has, an Expand to the shape it has).
bool SameTypeAsOutput(const Node& node) {
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  return node.num_outputs() == 1 && x->has_type() && y->has_type() && x->dtype() == y->dtype() &&
         x->shape() == y->shape();
}

// The input whose value the node passes through unchanged, or -1.
int PassThroughInput(const Graph& graph, const Node& node) {
  if (!node.domain().empty() || node.num_inputs() < 1 || !node.has_input(0) || node.num_outputs() < 1) {
    return -1;
  }
  if (graph.IsGraphOutput(node.output(0))) return -1;
  if (node.op_type() == "Identity") return node.num_outputs() == 1 ? 0 : -1;
  if (node.op_type() == "Pad" || node.op_type() == "Slice") return IsNoOpPadOrSlice(node) ? 0 : -1;
  if (node.op_type() == "Mul" || node.op_type() == "Div") return UnitScaleInput(node);
  if (node.op_type() == "Cast" || node.op_type() == "Expand") return SameTypeAsOutput(node) ? 0 : -1;
  if (node.op_type() != "Dropout") return -1;
  for (int i = 1; i < node.num_outputs(); ++i) {
    if (!node.output(i)->uses().empty() || graph.IsGraphOutput(node.output(i))) return -1;
  }
  if (node.has_input(2)) {
    const Tensor* training = node.input(2)->constant_or_null();
    if (training == nullptr) return -1;
    for (float v : training->ToFloat()) {
      if (v != 0.f) return -1;
    }
  }
  // Opsets < 7 spelled training as is_test = 0.
  if (node.has_attr("is_test")) {
    const absl::StatusOr<int64_t> is_test = node.GetInt("is_test");
    if (!is_test.ok() || *is_test == 0) return -1;
  }
  return 0;
}

}  // namespace

absl::StatusOr<bool> RemoveIdentity::Run(Graph& graph) {
  bool changed = false;
  for (Node* node : graph.nodes()) {
    const int through = PassThroughInput(graph, *node);
    if (through < 0) continue;
    Value* in = node->input(through);
    Value* out = node->output(0);
    graph.ReplaceAllUsesWith(out, in);
    graph.RemoveNode(node);
    changed = true;
  }
  if (changed) graph.RemoveUnusedValues();
  return changed;
}

}  // namespace kiln
