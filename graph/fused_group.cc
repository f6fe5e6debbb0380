// Forming fused groups and reading their bodies back.
#include "graph/fused_group.h"

#include <algorithm>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/infer_shapes.h"
#include "graph/text_format.h"

namespace kiln {

bool InlinedIntoGroupBody(const Value& v) {
  if (!v.is_constant()) return false;
  if (v.numel() <= kMaxInlinedConstantElements) return true;
  return (v.dtype() == DType::kInt64 || v.dtype() == DType::kInt32) && v.numel() <= kMaxInlinedIntegerArgumentElements;
}

bool IsFusedGroup(const Node& node) { return node.op_type() == kFusedGroupOp; }

namespace {

// Shape inference over a body (no folding: its constants stay as the members read
// them), which also checks that every member takes what it is given.
absl::Status TypeCheckBody(Graph& body) {
  InferShapesOptions options;
  options.fold_constants = false;
  return InferShapes(body, options);
}

}  // namespace

std::vector<std::string> FusedGroupMembers(const Node& node) {
  if (!IsFusedGroup(node)) return {};
  auto it = node.attributes().find("members");
  if (it == node.attributes().end() || it->second.kind() != AttrKind::kStrings) return {};
  return it->second.strings();
}

bool IsConvex(const Graph& graph, const std::vector<Node*>& members) {
  absl::flat_hash_set<const Node*> in(members.begin(), members.end());
  // Walk forward from the members' outputs through non-members only; reaching a
  // member means a path leaves the set and re-enters it.
  std::vector<const Node*> stack;
  absl::flat_hash_set<const Node*> seen;
  for (const Node* m : members) {
    for (const Value* y : m->outputs()) {
      for (const Use& u : y->uses()) {
        if (!in.contains(u.node) && seen.insert(u.node).second) stack.push_back(u.node);
      }
    }
  }
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Value* y : n->outputs()) {
      for (const Use& u : y->uses()) {
        if (in.contains(u.node)) return false;
        if (seen.insert(u.node).second) stack.push_back(u.node);
      }
    }
  }
  return true;
}

absl::StatusOr<Node*> FormFusedGroup(Graph& graph, const std::vector<Node*>& members, absl::string_view pattern,
                                     const Node* anchor, const std::string& name) {
  if (members.empty()) return absl::FailedPreconditionError("fused group: no members");
  absl::flat_hash_set<const Node*> member_set(members.begin(), members.end());
  for (const Node* m : members) {
    if (IsFusedGroup(*m)) return absl::FailedPreconditionError(absl::StrCat(m->Describe(), " is already a group"));
  }
  if (anchor != nullptr && !member_set.contains(anchor)) {
    return absl::FailedPreconditionError(absl::StrCat("fused group: anchor ", anchor->Describe(), " is not a member"));
  }
  if (!IsConvex(graph, members)) {
    return absl::FailedPreconditionError(absl::StrCat("fused group (", pattern, ") of ", members.size(),
                                                      " nodes is not convex: a path leaves it and comes back"));
  }
  // Members in graph order.
  std::vector<Node*> ordered;
  for (Node* n : graph.nodes()) {
    if (member_set.contains(n)) ordered.push_back(n);
  }
  if (ordered.size() != member_set.size()) {
    return absl::FailedPreconditionError("fused group: a member is not a node of the graph");
  }

  auto body = std::make_unique<Graph>();
  // A dynamic graph's group body has its dim symbols: its values keep their dims, and
  // graph/specialize.h binds the body with the graph.
  body->set_dim_symbols(graph.dim_symbols());
  absl::flat_hash_map<const Value*, Value*> mapped;  // outer value -> body value
  std::vector<Value*> group_inputs, group_outputs;
  auto typed = [&](Value* outer, Value* inner) {
    inner->SetType(outer->dtype(), outer->shape());
    inner->SetDims(outer->dims());
    mapped[outer] = inner;
    return inner;
  };
  for (const Node* n : ordered) {
    for (Value* v : n->inputs()) {
      if (v == nullptr || mapped.contains(v)) continue;
      if (v->producer() != nullptr && member_set.contains(v->producer())) continue;  // mapped when produced
      if (InlinedIntoGroupBody(*v)) {
        Value* c = body->AddConstant(v->name(), v->constant());
        c->SetSymbolicData(v->symbolic_data());
        mapped[v] = c;
        continue;
      }
      Value* inner = typed(v, body->AddValue(v->name()));
      body->AddInput(inner);
      group_inputs.push_back(v);
    }
    std::vector<Value*> inner_inputs;
    for (Value* v : n->inputs()) inner_inputs.push_back(v == nullptr ? nullptr : mapped.at(v));
    std::vector<Value*> inner_outputs;
    for (Value* y : n->outputs()) inner_outputs.push_back(typed(y, body->AddValue(y->name())));
    Node* copy = body->AddNode(n->op_type(), inner_inputs, inner_outputs, n->name());
    copy->set_domain(n->domain());
    for (const auto& [attr, value] : n->attributes()) copy->SetAttr(attr, value);
  }
  for (const Node* n : ordered) {
    for (Value* y : n->outputs()) {
      bool outside = graph.IsGraphOutput(y);
      for (const Use& u : y->uses()) outside |= !member_set.contains(u.node);
      if (!outside) continue;
      body->AddOutput(mapped.at(y));
      group_outputs.push_back(y);
    }
  }
  if (group_outputs.empty()) return absl::FailedPreconditionError("fused group: nothing outside reads its outputs");

  std::vector<std::string> member_names;
  for (const Node* n : ordered) member_names.push_back(n->name());
  const std::string anchor_name = anchor != nullptr ? anchor->name() : "";
  if (absl::Status st = TypeCheckBody(*body); !st.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("fused group (", pattern, "): its body does not type-check: ",
                                                      st.message()));
  }
  std::string group_name = name;
  if (group_name.empty()) group_name = absl::StrCat("group_", ordered.front()->name());

  for (Node* n : ordered) graph.RemoveNode(n);
  Node* group = graph.AddNode(kFusedGroupOp, group_inputs, group_outputs, group_name);
  group->set_domain(kKilnDomain);
  group->SetAttr("body", Attribute(std::shared_ptr<const Graph>(std::move(body))));
  group->SetAttr("pattern", Attribute(std::string(pattern)));
  group->SetAttr("anchor", Attribute(anchor_name));
  group->SetAttr("members", Attribute(member_names));
  graph.RemoveUnusedValues();
  KILN_RETURN_IF_ERROR(graph.TopologicalSort());
  return group;
}

absl::StatusOr<std::vector<Node*>> InlineFusedGroupNodes(Graph& graph, Node* group, bool reuse_outer_constants) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Graph> body, FusedGroupBody(*group));
  if (body->inputs().size() != static_cast<size_t>(group->num_inputs()) ||
      body->outputs().size() != static_cast<size_t>(group->num_outputs())) {
    return group->Error("its body's inputs/outputs do not match the node's");
  }
  absl::flat_hash_map<const Value*, Value*> mapped;  // body value -> outer value
  for (int i = 0; i < group->num_inputs(); ++i) mapped[body->inputs()[i]] = group->input(i);
  for (int i = 0; i < group->num_outputs(); ++i) mapped[body->outputs()[i]] = group->output(i);
  graph.RemoveNode(group);  // its outputs keep their values, now without a producer
  for (const Value* c : body->constants()) {
    if (mapped.contains(c)) continue;
    // The outer constant the body copied, when asked and it is still there (shared
    // with nodes outside the group), else a constant again.
    Value* same = reuse_outer_constants ? graph.FindValue(c->name()) : nullptr;
    if (same != nullptr && same->is_constant() && same->constant().dtype() == c->constant().dtype() &&
        same->constant().shape() == c->constant().shape() &&
        std::memcmp(same->constant().raw_data(), c->constant().raw_data(), c->constant().nbytes()) == 0) {
      mapped[c] = same;
    } else {
      mapped[c] = graph.AddConstant(c->name(), c->constant());
      mapped[c]->SetSymbolicData(c->symbolic_data());
    }
  }
  std::vector<Node*> inlined;
  for (const Node* n : body->nodes()) {
    std::vector<Value*> inputs;
    for (const Value* v : n->inputs()) inputs.push_back(v == nullptr ? nullptr : mapped.at(v));
    std::vector<Value*> outputs;
    for (const Value* y : n->outputs()) {
      auto it = mapped.find(y);
      Value* outer = it != mapped.end() ? it->second : graph.AddValue(y->name());
      outer->SetType(y->dtype(), y->shape());
      outer->SetDims(y->dims());
      mapped[y] = outer;
      outputs.push_back(outer);
    }
    Node* copy = graph.AddNode(n->op_type(), inputs, outputs, n->name());
    copy->set_domain(n->domain());
    for (const auto& [attr, value] : n->attributes()) copy->SetAttr(attr, value);
    inlined.push_back(copy);
  }
  KILN_RETURN_IF_ERROR(graph.TopologicalSort());
  return inlined;
}

absl::Status InlineFusedGroup(Graph& graph, Node* group) {
  return InlineFusedGroupNodes(graph, group, /*reuse_outer_constants=*/false).status();
}

absl::StatusOr<std::shared_ptr<const Graph>> FusedGroupBody(const Node& group) {
  if (!IsFusedGroup(group)) return group.Error("not a FusedGroup node");
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Graph> body, group.GetGraph("body"));
  if (body == nullptr) return group.Error("its body is empty");
  return body;
}

absl::Status ReadFusedGroupBody(Node& group) {
  if (!IsFusedGroup(group)) return absl::OkStatus();
  auto it = group.attributes().find("body");
  if (it == group.attributes().end() || it->second.kind() != AttrKind::kString) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<Graph>> body = ParseGraph(it->second.s());
  if (!body.ok()) return group.Error(absl::StrCat("its body does not parse: ", body.status().message()));
  if (absl::Status st = TypeCheckBody(**body); !st.ok()) {
    return group.Error(absl::StrCat("its body does not type-check: ", st.message()));
  }
  group.SetAttr("body", Attribute(std::shared_ptr<const Graph>(*std::move(body))));
  return absl::OkStatus();
}

}  // namespace kiln
