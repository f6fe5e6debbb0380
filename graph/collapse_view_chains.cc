// Chains of layout views that keep the element order -> one Reshape.
#include "graph/collapse_view_chains.h"

#include <algorithm>
#include <optional>
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

// A chain that moves elements as one permutation of its start split into factors:
// the split shape (outermost first) and, per factor of the chain's output in order,
// its place in that split.
struct PermutedSplit {
  Value* start = nullptr;
  Shape split;
  std::vector<int64_t> perm;
};

// Whether `view`'s factors, taken in the view's order, are the start tensor split
// into dims and permuted: sorted by stride they must tile it densely from offset 0.
std::optional<PermutedSplit> AsPermutedSplit(const StridedView& view) {
  if (view.offset() != 0) return std::nullopt;
  std::vector<ViewFactor> factors;
  for (int d = 0; d < view.rank(); ++d) {
    for (const ViewFactor& f : view.factors(d)) factors.push_back(f);
  }
  std::vector<int64_t> order(factors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return factors[a].stride > factors[b].stride; });
  int64_t dense = 1;
  for (size_t k = order.size(); k-- > 0;) {
    const ViewFactor& f = factors[order[k]];
    if (f.stride != dense) return std::nullopt;
    dense *= f.size;
  }
  PermutedSplit out;
  std::vector<int64_t> place(factors.size());
  for (size_t k = 0; k < order.size(); ++k) {
    out.split.push_back(factors[order[k]].size);
    place[order[k]] = static_cast<int64_t>(k);
  }
  out.perm = place;
  return out;
}

// The longest chain ending at chain[0] with two Transposes or more whose elements
// move as one permuted split of its start (graph/collapse_view_chains.h), or nullopt.
std::optional<PermutedSplit> PermutedChain(const std::vector<Node*>& chain) {
  for (size_t len = chain.size(); len >= 2; --len) {
    Value* start = chain[len - 1]->input(0);
    StridedView view = StridedView::Dense(start->shape());
    bool ok = true;
    int transposes = 0;
    for (size_t i = len; i-- > 0 && ok;) {
      ok = view.Apply(*chain[i]);
      transposes += chain[i]->op_type() == "Transpose";
    }
    if (!ok || transposes < 2) continue;
    std::optional<PermutedSplit> split = AsPermutedSplit(view);
    if (!split) continue;
    split->start = start;
    return split;
  }
  return std::nullopt;
}

// y = Reshape(Transpose(Reshape(start, split), perm), shape(y)) under y's name: one
// copy for the chain's Transposes.
void RewriteAsOneTranspose(Graph& graph, Node* node, const PermutedSplit& p) {
  Value* y = node->output(0);
  const std::string name = node->name();
  graph.RemoveNode(node);
  Value* split = graph.AddValue(absl::StrCat(name, "/split"), y->dtype(), p.split);
  graph.AddNode("Reshape", {p.start, IntsConstant(graph, absl::StrCat(name, "/split_shape"), p.split)}, {split},
                absl::StrCat(name, "/split"));
  Shape permuted;
  for (int64_t k : p.perm) permuted.push_back(p.split[k]);
  if (permuted == y->shape()) {
    graph.AddNode("Transpose", {split}, {y}, name)->SetAttr("perm", Attribute(p.perm));
    return;
  }
  Value* t = graph.AddValue(absl::StrCat(name, "/permuted"), y->dtype(), permuted);
  graph.AddNode("Transpose", {split}, {t}, absl::StrCat(name, "/permuted"))->SetAttr("perm", Attribute(p.perm));
  graph.AddNode("Reshape", {t, IntsConstant(graph, absl::StrCat(name, "/shape"), y->shape())}, {y}, name);
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
    if (start == nullptr) {
      if (std::optional<PermutedSplit> p = PermutedChain(chain)) {
        RewriteAsOneTranspose(graph, node, *p);
        changed = true;
      }
      continue;
    }
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
