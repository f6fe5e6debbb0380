// Transposes of MatMul operands folded into the MatMul's layout flags.
#include "graph/fold_transpose_into_matmul.h"

#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

// The layout flag of MatMul operand `index` (0: A, 1: B).
const char* FlagName(int index) { return index == 0 ? "trans_a" : "trans_b"; }

// A standard MatMul whose input `index` (0 or 1) may take a toggled flag: two
// inputs, and that operand's flag absent, 0 or 1.
bool FoldableUse(const Node& node, int index) {
  if (node.op_type() != "MatMul" || (!node.domain().empty() && node.domain() != "ai.onnx")) return false;
  if (node.num_inputs() != 2 || node.num_outputs() != 1 || index < 0 || index > 1) return false;
  const absl::StatusOr<int64_t> flag = node.GetInt(FlagName(index), 0);
  return flag.ok() && (*flag == 0 || *flag == 1);
}

void ToggleFlag(Node& node, int index) {
  const char* name = FlagName(index);
  if (*node.GetInt(name, 0) == 1) {
    node.RemoveAttr(name);
  } else {
    node.SetAttr(name, Attribute(int64_t{1}));
  }
}

// The Transpose's permutation (absent: reversed dims), or empty when malformed.
std::vector<int64_t> PermOf(const Node& t) {
  const int64_t rank = t.input(0)->rank();
  std::vector<int64_t> reversed(rank);
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  absl::StatusOr<std::vector<int64_t>> perm = t.GetInts("perm", reversed);
  if (!perm.ok() || static_cast<int64_t>(perm->size()) != rank) return {};
  return *perm;
}

// [0, ..., r-3, r-1, r-2].
std::vector<int64_t> SwapLastTwo(int64_t rank) {
  std::vector<int64_t> swap(rank);
  std::iota(swap.begin(), swap.end(), 0);
  std::swap(swap[rank - 1], swap[rank - 2]);
  return swap;
}

bool Candidate(const Node& t) {
  if (t.op_type() != "Transpose" || (!t.domain().empty() && t.domain() != "ai.onnx")) return false;
  if (t.num_inputs() != 1 || !t.has_input(0) || t.num_outputs() != 1) return false;
  const Value* x = t.input(0);
  const Value* y = t.output(0);
  return x->has_type() && y->has_type() && x->rank() >= 2 && !x->is_constant();
}

// (1): every MatMul reading t as A or B reads x with its flag toggled.
bool FoldSwap(Node& t) {
  Value* x = t.input(0);
  Value* y = t.output(0);
  const std::vector<Use> uses = y->uses();  // copied: SetInput edits the list
  bool changed = false;
  for (const Use& u : uses) {
    if (!FoldableUse(*u.node, u.index)) continue;
    u.node->SetInput(u.index, x);
    ToggleFlag(*u.node, u.index);
    changed = true;
  }
  return changed;
}

// (2): when every reader of t is a MatMul operand, t becomes Transpose(x, q) with
// its last two dims swapped back, and the readers toggle their flags.
bool FoldRowPreserving(const Graph& graph, Node& t, std::vector<int64_t> perm) {
  Value* y = t.output(0);
  if (graph.IsGraphOutput(y) || y->uses().empty()) return false;
  for (const Use& u : y->uses()) {
    if (!FoldableUse(*u.node, u.index)) return false;
  }
  const size_t r = perm.size();
  std::swap(perm[r - 1], perm[r - 2]);
  Shape shape = y->shape();
  std::swap(shape[r - 1], shape[r - 2]);
  t.SetAttr("perm", perm);
  y->SetType(y->dtype(), std::move(shape));
  for (const Use& u : y->uses()) ToggleFlag(*u.node, u.index);
  return true;
}

// (3): flagged constant operands become re-laid-out constants without the flag.
bool RelayOutConstants(Graph& graph) {
  absl::flat_hash_map<const Value*, Value*> relaid;  // constant -> its swapped copy
  bool changed = false;
  for (Node* n : graph.nodes()) {
    for (int i = 0; i < 2; ++i) {
      if (!FoldableUse(*n, i) || *n->GetInt(FlagName(i), 0) != 1) continue;
      Value* c = n->input(i);
      if (c == nullptr || !c->is_constant() || c->rank() < 2) continue;
      Value*& copy = relaid[c];
      if (copy == nullptr) {
        copy = graph.AddConstant(absl::StrCat(c->name(), "/transposed"), c->constant().SwappedLastTwo());
      }
      n->SetInput(i, copy);
      n->RemoveAttr(FlagName(i));
      changed = true;
    }
  }
  return changed;
}

}  // namespace

absl::StatusOr<bool> FoldTransposeIntoMatMul::Run(Graph& graph) {
  bool changed = RelayOutConstants(graph);
  for (Node* t : graph.nodes()) {
    if (!Candidate(*t)) continue;
    const std::vector<int64_t> perm = PermOf(*t);
    if (perm.empty()) continue;
    const int64_t r = static_cast<int64_t>(perm.size());
    if (perm == SwapLastTwo(r)) {
      changed |= FoldSwap(*t);
    } else if (perm[r - 2] == r - 1) {
      changed |= FoldRowPreserving(graph, *t, perm);
    }
  }
  return changed;
}

}  // namespace kiln
