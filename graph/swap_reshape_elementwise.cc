// SwapReshapeElementwise: see swap_reshape_elementwise.h.
#include "graph/swap_reshape_elementwise.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/symbolic_shapes.h"

namespace kiln {
namespace {

// Whether constant `c` broadcasts the same way against `a` and `b` (a scalar, or a
// vector along a last dim both share).
bool SameBroadcast(const Value& c, const Shape& a, const Shape& b) {
  if (c.numel() == 1) return true;
  const Shape& s = c.shape();
  if (s.empty() || a.empty() || b.empty() || s.back() != a.back() || s.back() != b.back()) return false;
  for (size_t d = 0; d + 1 < s.size(); ++d) {
    if (s[d] != 1) return false;
  }
  return s.size() <= a.size() && s.size() <= b.size();
}

// The Reshape U reads, when U matches the pattern; nullptr otherwise.
Node* SwappableReshape(const Graph& graph, const Node& u) {
  if (!u.domain().empty() || u.num_outputs() != 1 || u.op_type() == "Reshape") return nullptr;
  const OpDef* def = OpRegistry::Global().Find(u.op_type());
  if (def == nullptr || !def->is_elementwise) return nullptr;
  Node* reshape = nullptr;
  for (int i = 0; i < u.num_inputs(); ++i) {
    const Value* v = u.input(i);
    if (v == nullptr) continue;
    if (v->is_constant()) continue;
    if (reshape != nullptr || v->producer() == nullptr || v->producer()->op_type() != "Reshape" ||
        !v->producer()->domain().empty()) {
      return nullptr;
    }
    reshape = v->producer();
  }
  if (reshape == nullptr) return nullptr;
  const Value* y = reshape->output(0);
  const Value* x = reshape->input(0);
  if (graph.IsGraphOutput(y) || y->uses().size() != 1 || !x->has_type() || !y->has_type()) return nullptr;
  for (int i = 0; i < u.num_inputs(); ++i) {
    const Value* v = u.input(i);
    if (v != nullptr && v->is_constant() && !SameBroadcast(*v, x->shape(), y->shape())) return nullptr;
    // On a dynamic graph the shared last dim must be that size at every size.
    if (v != nullptr && v->is_constant() && v->numel() != 1 && x->is_dynamic() &&
        !SymbolicShape(*x).back().IsConstant()) {
      return nullptr;
    }
  }
  return reshape;
}

}  // namespace

absl::StatusOr<bool> SwapReshapeElementwise::Run(Graph& graph) {
  bool changed = false;
  // One rewrite at a time (it removes nodes), until none matches: a chain after the
  // Reshape moves node by node.
  while (true) {
    Node* u = nullptr;
    Node* reshape = nullptr;
    for (Node* n : graph.nodes()) {
      reshape = SwappableReshape(graph, *n);
      if (reshape != nullptr) {
        u = n;
        break;
      }
    }
    if (u == nullptr) break;
    Value* x = reshape->input(0);
    Value* shape = reshape->input(1);
    const Value* reshaped = reshape->output(0);
    Value* out = u->output(0);
    std::vector<Value*> inputs;
    for (int i = 0; i < u->num_inputs(); ++i) inputs.push_back(u->input(i) == reshaped ? x : u->input(i));
    const std::string op = u->op_type(), name = u->name(), reshape_name = reshape->name();
    const auto attrs = u->attributes();
    const auto reshape_attrs = reshape->attributes();
    graph.RemoveNode(u);
    graph.RemoveNode(reshape);
    Value* pre = graph.AddValue(absl::StrCat(out->name(), "/before_reshape"));
    Node* moved = graph.AddNode(op, inputs, {pre}, name);
    for (const auto& [k, v] : attrs) moved->SetAttr(k, v);
    KILN_RETURN_IF_ERROR(InferNode(*moved));
    Node* r = graph.AddNode("Reshape", {pre, shape}, {out}, reshape_name);
    for (const auto& [k, v] : reshape_attrs) r->SetAttr(k, v);
    KILN_RETURN_IF_ERROR(InferNode(*r));
    KILN_RETURN_IF_ERROR(graph.TopologicalSort());
    changed = true;
  }
  if (changed) graph.RemoveUnusedValues();
  return changed;
}

}  // namespace kiln
