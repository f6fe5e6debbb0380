// FusePad: a constant-mode Pad with the Cast and strided views feeding it, one "pad"
// group.
#include "fusion/fuse_pad.h"

#include <vector>

#include "fusion/group_util.h"
#include "graph/fused_group.h"

namespace kiln {
namespace {

// Absent, or a constant the group body holds inline (the kernel reads it there).
bool IsConstantInput(const Node& n, int i) {
  return !n.has_input(i) || (n.input(i)->is_constant() && InlinedIntoGroupBody(*n.input(i)));
}

// A Pad the "pad" kernel takes: constant mode, constant pads, value and axes.
bool IsConstantPad(const Node& n) {
  if (n.op_type() != "Pad" || IsFusedGroup(n) || n.num_outputs() != 1 || !n.has_input(0) || !n.has_input(1) ||
      !n.output(0)->has_type()) {
    return false;
  }
  absl::StatusOr<std::string> mode = n.GetString("mode", "constant");
  return mode.ok() && *mode == "constant" && IsConstantInput(n, 1) && IsConstantInput(n, 2) && IsConstantInput(n, 3);
}

bool IsFloatCast(const Node& n) {
  return n.op_type() == "Cast" && !IsFusedGroup(n) && n.num_outputs() == 1 && n.has_input(0) &&
         n.input(0)->has_type() && n.output(0)->has_type() && IsFloating(n.input(0)->dtype()) &&
         IsFloating(n.output(0)->dtype());
}

}  // namespace

absl::StatusOr<bool> FusePad::Run(Graph& graph) {
  std::vector<Node*> pads;
  for (Node* n : graph.nodes()) {
    if (IsConstantPad(*n)) pads.push_back(n);
  }
  bool changed = false;
  for (Node* pad : pads) {
    std::vector<Node*> members;
    bool cast_taken = false;
    for (Value* x = pad->input(0); x != nullptr;) {
      Node* n = x->producer();
      if (n == nullptr || graph.IsGraphOutput(x) || Consumers(x).size() != 1) break;
      // A chain starting at a constant the group body would inline has no group input
      // to read from; it stays outside.
      if (InlinedIntoGroupBody(*n->input(0))) break;
      if (IsFloatCast(*n) && !cast_taken) {
        cast_taken = true;
      } else if (!IsStridedView(*n)) {
        break;
      }
      members.insert(members.begin(), n);
      x = n->input(0);
    }
    if (members.empty()) continue;
    members.push_back(pad);
    changed |= FormAndReportGroup(graph, report_, name(), members, "pad", nullptr);
  }
  return changed;
}

}  // namespace kiln
