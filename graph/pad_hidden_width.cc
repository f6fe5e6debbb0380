// PadHiddenWidth: see pad_hidden_width.h.
#include "graph/pad_hidden_width.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

// The element-wise ops a chain may hold: finite on finite inputs.
bool ChainOp(const Node& n) {
  static const absl::flat_hash_set<std::string> kOps = {"Add",         "Sub",       "Mul",  "Relu", "LeakyRelu",
                                                         "Sigmoid",     "HardSigmoid", "HardSwish", "Tanh", "Gelu",
                                                         "Clip"};
  return n.domain().empty() && n.num_outputs() == 1 && kOps.contains(n.op_type());
}

// A constant side input the widening can pad: a scalar (left as is) or [..., N] with
// every other dim 1 (padded with zeros).
bool PaddableConstant(const Value& v, int64_t n) {
  if (!v.is_constant() || !v.has_type() || !IsFloating(v.dtype())) return false;
  if (v.numel() == 1) return true;
  if (v.rank() == 0 || v.shape().back() != n) return false;
  return v.numel() == n;
}

// The Pad's pads when it pads only the end of the last axis: that amount, else 0.
int64_t EndPadOfLastAxis(const Node& pad) {
  if (pad.num_inputs() < 2 || pad.num_inputs() > 3 || !pad.input(1)->is_constant()) return 0;
  if (pad.GetString("mode", "constant").value_or("") != "constant") return 0;
  if (pad.has_input(2)) {
    const Value* c = pad.input(2);
    if (!c->is_constant() || c->numel() != 1 || c->constant().ToFloat()[0] != 0.f) return 0;
  }
  const std::vector<int64_t> pads = pad.input(1)->constant().ToInt64();
  const int64_t r = pad.input(0)->rank();
  if (static_cast<int64_t>(pads.size()) != 2 * r) return 0;
  for (int64_t i = 0; i < 2 * r; ++i) {
    if (i != 2 * r - 1 && pads[i] != 0) return 0;
  }
  return pads[2 * r - 1];
}

// Whether rows [n, rows) of the constant [rows, cols] weight are all zero.
bool ZeroRowsFrom(const Value& w, int64_t n) {
  const std::vector<float> v = w.constant().ToFloat();
  const int64_t cols = w.shape()[1];
  for (int64_t i = n * cols; i < static_cast<int64_t>(v.size()); ++i) {
    if (v[i] != 0.f) return false;
  }
  return true;
}

// The chain from the first MatMul to the Pad's input, first MatMul first; empty when
// the pattern does not hold.
struct Chain {
  Node* first = nullptr;
  std::vector<Node*> nodes;  // element-wise, in order from the MatMul
};

Chain FindChain(const Graph& graph, Node* pad) {
  Value* h = pad->input(0);
  const Shape shape = h->shape();
  std::vector<Node*> nodes;
  absl::flat_hash_set<const Value*> chain_values = {h};
  std::vector<Value*> frontier = {h};
  Node* first = nullptr;
  while (!frontier.empty()) {
    Value* v = frontier.back();
    frontier.pop_back();
    Node* p = v->producer();
    if (p == nullptr || graph.IsGraphOutput(v)) return {};
    if (p->op_type() == "MatMul") {
      if (first != nullptr && first != p) return {};
      first = p;
      continue;
    }
    if (!ChainOp(*p) || v->shape() != shape) return {};
    if (std::find(nodes.begin(), nodes.end(), p) == nodes.end()) nodes.push_back(p);
    for (Value* in : p->inputs()) {
      if (in == nullptr) continue;
      if (in->is_constant()) {
        if (!PaddableConstant(*in, shape.back())) return {};
        continue;
      }
      if (in->shape() != shape) return {};
      if (chain_values.insert(in).second) frontier.push_back(in);
    }
  }
  if (first == nullptr) return {};
  // Every chain value is read only by chain nodes (and H only by the Pad).
  for (const Value* v : chain_values) {
    for (const Use& u : v->uses()) {
      if (u.node != pad && std::find(nodes.begin(), nodes.end(), u.node) == nodes.end()) return {};
    }
  }
  const Value* m1 = first->output(0);
  if (!chain_values.contains(m1)) return {};
  // Order the nodes from the MatMul: a node after every producer of its inputs.
  std::vector<Node*> ordered;
  for (Node* n : graph.nodes()) {
    if (std::find(nodes.begin(), nodes.end(), n) != nodes.end()) ordered.push_back(n);
  }
  return {first, ordered};
}

bool Widen(Graph& graph, Node* pad) {
  const int64_t extra = EndPadOfLastAxis(*pad);
  Value* p = pad->output(0);
  if (extra <= 0 || graph.IsGraphOutput(p) || p->uses().size() != 1) return false;
  Node* second = p->uses()[0].node;
  const int64_t n = pad->input(0)->shape().back(), n8 = n + extra;
  if (n % 8 == 0 || n8 % 8 != 0 || n8 - n >= 8) return false;
  if (second->op_type() != "MatMul" || p->uses()[0].index != 0 || second->GetInt("trans_a", 0).value_or(1) != 0 ||
      second->GetInt("trans_b", 0).value_or(1) != 0) {
    return false;
  }
  const Value* w2 = second->input(1);
  if (!w2->is_constant() || w2->rank() != 2 || w2->shape()[0] != n8 || !ZeroRowsFrom(*w2, n)) return false;
  const Chain chain = FindChain(graph, pad);
  if (chain.first == nullptr) return false;
  Node* m1 = chain.first;
  Value* w1 = m1->input(1);
  if (m1->GetInt("trans_a", 0).value_or(1) != 0 || m1->GetInt("trans_b", 0).value_or(1) != 0 || !w1->is_constant() ||
      w1->rank() != 2 || w1->shape()[1] != n || w1->uses().size() != 1 || graph.IsGraphOutput(w1)) {
    return false;
  }
  // Rewrite: the weights and [N] constants padded, the chain retyped, the Pad dropped.
  m1->SetInput(1, graph.AddConstant(absl::StrCat(w1->name(), "/hidden_padded"), w1->constant().PaddedInnermost(n8)));
  auto widen = [n8](Value* v) {
    Shape s = v->shape();
    s.back() = n8;
    v->SetType(v->dtype(), s);
  };
  widen(m1->output(0));
  for (Node* node : chain.nodes) {
    for (int i = 0; i < node->num_inputs(); ++i) {
      Value* in = node->input(i);
      if (in != nullptr && in->is_constant() && in->numel() > 1) {
        node->SetInput(i, graph.AddConstant(absl::StrCat(in->name(), "/hidden_padded"),
                                            in->constant().PaddedInnermost(n8)));
      }
    }
    widen(node->output(0));
  }
  Value* h = pad->input(0);
  graph.RemoveNode(pad);
  second->SetInput(0, h);
  return true;
}

}  // namespace

absl::StatusOr<bool> PadHiddenWidth::Run(Graph& graph) {
  bool changed = false;
  for (Node* node : graph.nodes()) {
    if (node->op_type() != "Pad" || !node->domain().empty() || node->num_outputs() != 1) continue;
    changed |= Widen(graph, node);
  }
  if (changed) KILN_RETURN_IF_ERROR(graph.FinishRewrites());
  return changed;
}

}  // namespace kiln
