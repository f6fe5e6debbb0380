// FuseEpilogue: anchor + element-wise epilogue chain -> one FusedGroup.
#include "fusion/fuse_epilogue.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "fusion/group_util.h"
#include "graph/fused_group.h"
#include "graph/op_registry.h"

namespace kiln {
namespace {

bool Contains(const std::vector<Node*>& nodes, const Node* n) {
  return std::find(nodes.begin(), nodes.end(), n) != nodes.end();
}

bool IsActivation(const std::string& op) {
  static const auto* kOps =
      new absl::flat_hash_set<std::string>{"Relu",      "Gelu",      "Sigmoid",    "Tanh",
                                           "Clip",      "LeakyRelu", "HardSwish", "HardSigmoid"};
  return kOps->contains(op);
}

bool IsArithmetic(const std::string& op) { return op == "Add" || op == "Sub" || op == "Mul" || op == "Div"; }

// The LayerNormalization (or RMSNormalization) that is the only reader of `add`'s
// sum, when `add` adds the full-size operand `other` (a residual, not a broadcast
// bias); else null. Such an add
// is left to the norm (FuseNorms groups {add, norm}): the two tensors are read
// once either way, but in the norm the add is one more stream of a bandwidth-bound
// kernel, while in a GEMM epilogue it is a load on the critical path after the last
// MMA (benchmarks/results/models_residual_in_norm_ab_h100_2026-11-27c.csv).
const Node* ResidualNormReader(const Graph& graph, const Node& add, const Value& other) {
  const Value* sum = add.output(0);
  if (add.op_type() != "Add" || other.shape() != sum->shape() || graph.IsGraphOutput(sum)) return nullptr;
  const std::vector<Node*> readers = Consumers(sum);
  const std::string op = readers.size() == 1 ? readers[0]->op_type() : "";
  if ((op != "LayerNormalization" && op != "RMSNormalization") || readers[0]->input(0) != sum) {
    return nullptr;
  }
  return readers[0];
}

// One step of the chain: the nodes it takes and the value the chain continues from,
// or why the consumer cannot be taken. `candidate` is false for consumers that are
// not element-wise at all (not reported).
struct Step {
  bool candidate = true;
  std::vector<Node*> nodes;
  Value* next = nullptr;
  std::string reason;
};

Step TryStep(const Graph& graph, Node* c, Value* v, const Shape& shape) {
  Step st;
  if (IsFusedGroup(*c)) {
    st.reason = absl::StrCat("unsupported op: ", Quote(c->name()), " is already a fused group");
    return st;
  }
  const OpDef* def = OpRegistry::Global().Find(c->op_type());
  if (def == nullptr || !def->is_elementwise || c->num_outputs() != 1) {
    st.candidate = false;
    return st;
  }
  const std::string& op = c->op_type();
  Value* y = c->output(0);
  if (!IsActivation(op) && !IsArithmetic(op) && op != "Cast") {
    st.reason = absl::StrCat("unsupported op: ", op, " is not an epilogue op");
    return st;
  }
  if (y->shape() != shape) {
    st.reason = absl::StrCat("shape: ", Quote(c->name()), " writes ", ShapeToString(y->shape()),
                             " but the anchor output is ", ShapeToString(shape), "; an epilogue cannot grow the tile");
    return st;
  }
  if (!IsFloating(y->dtype())) {
    st.reason = absl::StrCat("dtype: ", Quote(c->name()), " writes ", DTypeName(y->dtype()),
                             "; epilogues compute and store floats");
    return st;
  }
  if (IsActivation(op)) {
    if (c->input(0) != v) {
      st.reason = absl::StrCat("unsupported op: ", Quote(c->name()), " (", op, ") reads ", Quote(v->name()),
                               " as a bound, not as its data");
      return st;
    }
    for (int i = 1; i < c->num_inputs(); ++i) {
      if (c->has_input(i) && c->input(i)->numel() != 1) {
        st.reason = absl::StrCat("shape: ", Quote(c->name()), " has a bound of shape ",
                                 ShapeToString(c->input(i)->shape()), "; bounds must be one element");
        return st;
      }
    }
    st.nodes = {c};
    st.next = y;
    if (op == "Sigmoid" && !graph.IsGraphOutput(y)) {
      // SiLU: Mul(v, Sigmoid(v)) in either operand order takes both nodes.
      std::vector<Node*> readers = Consumers(y);
      if (readers.size() == 1 && readers[0]->op_type() == "Mul" && readers[0]->num_inputs() == 2) {
        Node* m = readers[0];
        if ((m->input(0) == v && m->input(1) == y) || (m->input(0) == y && m->input(1) == v)) {
          st.nodes.push_back(m);
          st.next = m->output(0);
        }
      }
    }
    return st;
  }
  if (IsArithmetic(op)) {
    if (c->num_inputs() != 2) {
      st.candidate = false;
      return st;
    }
    Value* other = c->input(0) == v ? c->input(1) : c->input(0);
    if (!BroadcastsInto(other->shape(), shape)) {
      st.reason = absl::StrCat("shape: operand ", Quote(other->name()), " of ", Quote(c->name()), " is ",
                               ShapeToString(other->shape()), ", which does not broadcast into the anchor output ",
                               ShapeToString(shape));
      return st;
    }
    if (other->dtype() != v->dtype()) {
      st.reason = absl::StrCat("dtype: operand ", Quote(other->name()), " of ", Quote(c->name()), " is ",
                               DTypeName(other->dtype()), " but the chain is ", DTypeName(v->dtype()));
      return st;
    }
    if (const Node* norm = ResidualNormReader(graph, *c, *other)) {
      st.reason = absl::StrCat("cost: ", Quote(c->name()), " adds a full-size operand and only ",
                               Quote(norm->name()), " (", norm->op_type(), ") reads its sum; the norm takes the add, "
                               "which there costs one more read in a bandwidth-bound kernel instead of a residual "
                               "load on the GEMM's critical path");
      return st;
    }
  }
  st.nodes = {c};  // arithmetic or Cast
  st.next = y;
  return st;
}

// Values produced by `members` (other than `last`) that are read outside them.
int CountExtraOutputs(const Graph& graph, const std::vector<Node*>& members, const Value* last) {
  int extra = 0;
  for (const Node* n : members) {
    for (const Value* y : n->outputs()) {
      if (y != last && HasOutsideUse(graph, y, members)) ++extra;
    }
  }
  return extra;
}

bool IsExtendableGroup(const Node& n) {
  if (!IsFusedGroup(n) || n.num_outputs() != 1) return false;
  const std::string pattern = n.GetString("pattern", "").value_or("");
  return pattern == "prologue+matmul" || pattern == "dual-matmul";
}

struct Anchor {
  Node* node;        // the anchor node, or the group to extend
  std::string name;  // the anchor op's name (for the report)
  std::string pattern;
  bool is_group;
};

}  // namespace

absl::StatusOr<bool> FuseEpilogue::Run(Graph& graph) {
  std::vector<Anchor> anchors;
  for (Node* n : graph.nodes()) {
    const std::string& op = n->op_type();
    if (op == "MatMul" || op == "Gemm") {
      anchors.push_back({n, n->name(), "matmul+epilogue", false});
    } else if (op == "Conv") {
      anchors.push_back({n, n->name(), "conv+epilogue", false});
    } else if (IsExtendableGroup(*n)) {
      anchors.push_back({n, n->GetString("anchor", "").value_or(n->name()),
                         absl::StrCat(n->GetString("pattern", "").value_or(""), "+epilogue"), true});
    }
  }
  bool changed = false;
  for (const Anchor& a : anchors) {
    Value* y = a.node->output(0);
    if (!y->has_type() || !IsFloating(y->dtype())) continue;
    const Shape shape = y->shape();
    absl::flat_hash_map<const Node*, int> position;
    {
      int i = 0;
      for (const Node* n : graph.nodes()) position[n] = i++;
    }
    std::vector<Node*> members = {a.node};
    std::vector<Node*> chain;
    std::vector<std::pair<Node*, std::string>> rejected;  // candidate, reason
    Value* v = y;
    for (bool advanced = true; advanced;) {
      advanced = false;
      std::vector<Node*> readers = Consumers(v);
      std::stable_sort(readers.begin(), readers.end(),
                       [&](const Node* l, const Node* r) { return position[l] < position[r]; });
      Value* from = v;
      for (Node* c : readers) {
        if (Contains(members, c)) continue;
        Step st = TryStep(graph, c, from, shape);
        if (!st.candidate) continue;
        if (!st.reason.empty()) {
          rejected.push_back({c, st.reason});
          continue;
        }
        if (advanced) {
          rejected.push_back({c, absl::StrCat("other consumers: ", Quote(from->name()), " also feeds ",
                                              Quote(c->name()), "; the epilogue follows one chain, so ",
                                              Quote(from->name()), " is stored as an extra output instead")});
          continue;
        }
        std::vector<Node*> tentative = members;
        tentative.insert(tentative.end(), st.nodes.begin(), st.nodes.end());
        if (!IsConvex(graph, tentative)) {
          rejected.push_back({c, absl::StrCat("not convex: an operand of ", Quote(c->name()),
                                              " is computed outside the group from its own results")});
          continue;
        }
        const int extra = CountExtraOutputs(graph, tentative, st.next);
        if (extra > kMaxExtraOutputs) {
          rejected.push_back(
              {c, absl::StrCat("other consumers: taking ", Quote(c->name()), " would make the group store ",
                               extra, " intermediates read elsewhere (limit ", kMaxExtraOutputs, ")")});
          continue;
        }
        members = std::move(tentative);
        chain.insert(chain.end(), st.nodes.begin(), st.nodes.end());
        v = st.next;
        advanced = true;
      }
    }
    for (const auto& [node, reason] : rejected) {
      if (!Contains(members, node)) ReportRejection(report_, name(), {a.name, node->name()}, reason);
    }
    if (chain.empty()) continue;
    absl::StatusOr<Node*> group = a.is_group ? ExtendFusedGroup(graph, a.node, chain, a.pattern)
                                             : FormFusedGroup(graph, members, a.pattern, a.node);
    if (!group.ok()) {
      std::vector<std::string> names = {a.name};
      for (const Node* n : chain) names.push_back(n->name());
      ReportRejection(report_, name(), names, absl::StrCat("not convex: ", group.status().message()));
      continue;
    }
    ReportGroup(report_, name(), **group);
    changed = true;
  }
  return changed;
}

}  // namespace kiln
