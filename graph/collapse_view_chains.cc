// Chains of layout views that keep the element order -> one Reshape.
#include "graph/collapse_view_chains.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/eliminate_dead_code.h"
#include "graph/pattern_match.h"
#include "graph/strided_view.h"

namespace kiln {
namespace {

bool IsLayoutView(const Node& node) {
  static const char* const kOps[] = {"Transpose", "Reshape", "Unsqueeze", "Squeeze", "Flatten"};
  bool layout = false;
  for (const char* op : kOps) layout |= node.op_type() == op;
  return layout && node.domain().empty() && IsViewNode(node);
}

// Whether `view` reads its start tensor in row-major order from element 0.
bool IsDense(const StridedView& view) {
  if (view.offset() != 0) return false;
  int64_t dense = 1;
  for (int d = view.rank() - 1; d >= 0; --d) {
    if (view.shape()[d] != 1 && view.Stride(d) != dense) return false;
    dense *= view.shape()[d];
  }
  return true;
}

// The start of the longest chain of layout views ending at `node` (input of
// chain[len - 1], chain nearest first) that has a Transpose and keeps the element
// order, or nullptr.
Value* DenseChainStart(const std::vector<Node*>& chain) {
  for (size_t len = chain.size(); len >= 2; --len) {
    Value* start = chain[len - 1]->input(0);
    StridedView view = StridedView::Dense(start->shape());
    bool ok = true, transposes = false;
    for (size_t i = len; i-- > 0 && ok;) {
      ok = view.Apply(*chain[i]);
      transposes |= chain[i]->op_type() == "Transpose";
    }
    if (ok && transposes && IsDense(view)) return start;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<bool> CollapseViewChains::Run(Graph& graph) {
  bool changed = false;
  for (Node* node : graph.nodes()) {
    if (!IsLayoutView(*node)) continue;
    std::vector<Node*> chain = {node};
    for (Node* p = node->input(0)->producer(); p != nullptr && IsLayoutView(*p); p = p->input(0)->producer()) {
      chain.push_back(p);
    }
    if (chain.size() < 2) continue;
    Value* start = DenseChainStart(chain);
    if (start == nullptr) continue;
    Value* y = node->output(0);
    const std::string name = node->name();
    graph.RemoveNode(node);
    if (start->shape() == y->shape() && !graph.IsGraphOutput(y)) {
      graph.ReplaceAllUsesWith(y, start);
    } else {
      graph.AddNode("Reshape", {start, IntsConstant(graph, absl::StrCat(name, "/collapsed_shape"), y->shape())}, {y},
                    name);
    }
    changed = true;
  }
  if (changed) {
    KILN_RETURN_IF_ERROR(EliminateDeadCode().Run(graph).status());
    KILN_RETURN_IF_ERROR(graph.FinishRewrites());
  }
  return changed;
}

}  // namespace kiln
