// FusePointwise: LayerNorm/Softmax with their element-wise prologue, then maximal
// element-wise DAGs -> FusedGroups.
#include "fusion/fuse_pointwise.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "fusion/group_util.h"
#include "graph/fused_group.h"
#include "graph/op_registry.h"
#include "graph/pattern_match.h"

namespace kiln {
namespace {

// Whether `v` is read only by `reader` and is not a graph output.
bool OnlyReader(const Graph& graph, const Value* v, const Node* reader) {
  if (graph.IsGraphOutput(v)) return false;
  for (const Use& u : v->uses()) {
    if (u.node != reader) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<bool> FusePointwise::Run(Graph& graph) {
  KILN_ASSIGN_OR_RETURN(bool sm, FuseSoftmaxes(graph));
  KILN_ASSIGN_OR_RETURN(bool ew, FuseElementwise(graph));
  return sm || ew;
}

absl::StatusOr<bool> FusePointwise::FuseSoftmaxes(Graph& graph) {
  std::vector<Node*> softmaxes;
  for (Node* n : graph.nodes()) {
    if (n->op_type() == "Softmax") softmaxes.push_back(n);
  }
  bool changed = false;
  for (Node* sm : softmaxes) {
    std::vector<Node*> members = {sm};
    auto reject = [&](const Node* p, std::string reason) {
      ReportRejection(report_, name(), {sm->name(), p->name()}, std::move(reason));
    };
    Node* reader = sm;
    Value* x = sm->input(0);
    Node* p = x->producer();
    const int64_t rank = x->rank();
    KILN_ASSIGN_OR_RETURN(int64_t axis, sm->GetInt("axis", -1));
    if (axis < 0) axis += rank;
    if (axis != rank - 1) {
      if (p != nullptr && IsElementwise(p)) {
        reject(p, absl::StrCat("unsupported op: ", Quote(sm->name()), " normalises axis ", axis,
                               "; the softmax kernel reduces the last axis"));
      }
      continue;
    }
    auto is_scale = [](const Node* n) {
      if (!IsElementwise(n) || n->num_inputs() != 2) return false;
      if (n->op_type() == "Div") return n->input(1)->numel() == 1;
      return n->op_type() == "Mul" && (n->input(0)->numel() == 1 || n->input(1)->numel() == 1);
    };
    // The mask Add.
    if (p != nullptr && p->op_type() == "Add" && IsElementwise(p) && p->num_inputs() == 2) {
      if (!OnlyReader(graph, x, reader)) {
        reject(p, absl::StrCat("other consumers: the masked scores ", Quote(x->name()), " are read elsewhere"));
        continue;
      }
      if (std::string problem = PointwiseProblem(*p); !problem.empty()) {
        reject(p, problem);
        continue;
      }
      // The scores: the full-shape operand (the one from a scale when both are).
      Value* a = p->input(0);
      Value* b = p->input(1);
      Value* scores = nullptr;
      if (a->shape() == x->shape() && b->shape() == x->shape()) {
        scores = (b->producer() != nullptr && is_scale(b->producer())) ? b : a;
      } else {
        scores = a->shape() == x->shape() ? a : b;
      }
      members.push_back(p);
      reader = p;
      x = scores;
      p = x->producer();
    }
    // The scale.
    if (p != nullptr && is_scale(p)) {
      if (!OnlyReader(graph, x, reader)) {
        reject(p, absl::StrCat("other consumers: the scaled scores ", Quote(x->name()), " are read elsewhere"));
      } else if (std::string problem = PointwiseProblem(*p); !problem.empty()) {
        reject(p, problem);
      } else {
        members.push_back(p);
      }
    }
    if (members.size() < 2) continue;
    changed |= FormAndReportGroup(graph, report_, name(), members, "softmax", nullptr);
  }
  return changed;
}

absl::StatusOr<bool> FusePointwise::FuseElementwise(Graph& graph) {
  std::vector<std::vector<Node*>> groups;
  std::vector<Shape> shapes;
  absl::flat_hash_map<const Node*, int> group_of;
  for (Node* n : graph.nodes()) {
    if (!IsElementwise(n)) continue;
    if (std::string problem = PointwiseProblem(*n); !problem.empty()) {
      ReportRejection(report_, name(), {n->name()}, problem);
      continue;
    }
    const Shape& shape = n->output(0)->shape();
    std::vector<int> candidates;
    for (const Value* v : n->inputs()) {
      if (v == nullptr || v->producer() == nullptr) continue;
      auto it = group_of.find(v->producer());
      if (it == group_of.end()) continue;
      if (shapes[it->second] != shape) {
        ReportRejection(report_, name(), {v->producer()->name(), n->name()},
                        absl::StrCat("shape: ", Quote(n->name()), " iterates over ", ShapeToString(shape), " but ",
                                     Quote(v->producer()->name()), "'s group over ",
                                     ShapeToString(shapes[it->second]),
                                     "; a pointwise group has one shape (broadcast inputs are read, not fused)"));
        continue;
      }
      if (std::find(candidates.begin(), candidates.end(), it->second) == candidates.end()) {
        candidates.push_back(it->second);
      }
    }
    auto join = [&](int g, Node* node) {
      groups[g].push_back(node);
      group_of[node] = g;
    };
    auto with = [&](std::vector<int> ids) {
      std::vector<Node*> all = {n};
      for (int g : ids) all.insert(all.end(), groups[g].begin(), groups[g].end());
      return all;
    };
    bool joined = false;
    if (!candidates.empty() && IsConvex(graph, with(candidates))) {
      const int target = candidates[0];
      for (size_t i = 1; i < candidates.size(); ++i) {
        for (Node* m : groups[candidates[i]]) join(target, m);
        groups[candidates[i]].clear();
      }
      join(target, n);
      joined = true;
    } else if (!candidates.empty()) {
      std::stable_sort(candidates.begin(), candidates.end(),
                       [&](int l, int r) { return groups[l].size() > groups[r].size(); });
      for (int g : candidates) {
        if (!joined && IsConvex(graph, with({g}))) {
          join(g, n);
          joined = true;
          continue;
        }
        ReportRejection(report_, name(), {groups[g].front()->name(), n->name()},
                        absl::StrCat("not convex: joining ", Quote(n->name()), " to the group of ",
                                     Quote(groups[g].front()->name()),
                                     " would let a path leave the group and come back"));
      }
    }
    if (!joined) {
      groups.push_back({n});
      shapes.push_back(shape);
      group_of[n] = static_cast<int>(groups.size()) - 1;
    }
  }
  // Strided views feeding a group (rule 3 of the header), and the views feeding those:
  // the group reads through the chain.
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<Node*>& members = groups[g];
    if (members.empty()) continue;
    std::vector<Node*> readers = members;  // members whose inputs are still to be looked at
    while (!readers.empty()) {
      Node* m = readers.back();
      readers.pop_back();
      const bool m_is_view = std::find(members.begin(), members.end(), m) != members.end() && IsStridedView(*m) &&
                             !group_of.contains(m);
      for (const Value* v : m->inputs()) {
        Node* view = v == nullptr ? nullptr : v->producer();
        if (view == nullptr || !IsStridedView(*view) || group_of.contains(view) ||
            std::find(members.begin(), members.end(), view) != members.end()) {
          continue;
        }
        const Node* source = view->input(0)->producer();
        if (HasOutsideUse(graph, v, members) || std::find(members.begin(), members.end(), source) != members.end() ||
            !(IsFloating(v->dtype()) || v->dtype() == DType::kBool) ||
            (!m_is_view && !BroadcastsInto(v->shape(), shapes[g]))) {
          continue;
        }
        std::vector<Node*> with = members;
        with.push_back(view);
        if (!IsConvex(graph, with)) continue;
        // Before its first reader, so that the members stay in graph order.
        members.insert(std::find(members.begin(), members.end(), m), view);
        readers.push_back(view);
      }
    }
  }
  bool changed = false;
  for (const std::vector<Node*>& members : groups) {
    if (members.size() < 2) continue;
    changed |= FormAndReportGroup(graph, report_, name(), members, "pointwise", nullptr);
  }
  return changed;
}

}  // namespace kiln
