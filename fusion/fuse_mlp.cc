// FuseMlp: two chained small-row matmul+epilogue groups, one "mlp" group.
#include "fusion/fuse_mlp.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "fusion/group_util.h"
#include "graph/fused_group.h"

namespace kiln {
namespace {

// A "matmul+epilogue" group with one output whose one MatMul reads group inputs as A
// (input `a`) and a constant 2-D weight as B: the weight's shape, else why not.
struct GroupMatMul {
  int a = -1;
  Shape weight;
};

absl::StatusOr<GroupMatMul> Inspect(const Node& group) {
  if (group.GetString("pattern", "").value_or("") != "matmul+epilogue" || group.num_outputs() != 1) {
    return absl::FailedPreconditionError("not a matmul+epilogue group with one output");
  }
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Graph> body, FusedGroupBody(group));
  const Node* mm = nullptr;
  for (const Node* n : body->nodes()) {
    if (n->op_type() == "MatMul") {
      if (mm != nullptr) return absl::FailedPreconditionError("two MatMuls");
      mm = n;
    }
  }
  if (mm == nullptr || !TransposedOperands(*mm).empty()) return absl::FailedPreconditionError("no plain MatMul");
  GroupMatMul out;
  int b = -1;
  for (size_t i = 0; i < body->inputs().size(); ++i) {
    if (body->inputs()[i] == mm->input(0)) out.a = static_cast<int>(i);
    if (body->inputs()[i] == mm->input(1)) b = static_cast<int>(i);
  }
  if (out.a < 0 || b < 0) return absl::FailedPreconditionError("MatMul operands computed inside the group");
  const Value* w = group.input(b);
  if (!w->is_constant() || w->shape().size() != 2 || !IsFloating(w->dtype()) ||
      !IsFloating(group.input(out.a)->dtype())) {
    return absl::FailedPreconditionError("B is not a constant 2-D float weight");
  }
  out.weight = w->shape();
  return out;
}

}  // namespace

absl::StatusOr<bool> FuseMlp::Run(Graph& graph) {
  std::vector<Node*> seconds;
  for (Node* n : graph.nodes()) {
    if (IsFusedGroup(*n)) seconds.push_back(n);
  }
  absl::flat_hash_set<const Node*> used;
  bool changed = false;
  for (Node* second : seconds) {
    if (used.contains(second)) continue;
    absl::StatusOr<GroupMatMul> g2 = Inspect(*second);
    if (!g2.ok()) continue;
    Value* hidden = second->input(g2->a);
    Node* first = hidden->producer();
    if (first == nullptr || !IsFusedGroup(*first) || used.contains(first) || graph.IsGraphOutput(hidden) ||
        Consumers(hidden) != std::vector<Node*>{second}) {
      continue;
    }
    absl::StatusOr<GroupMatMul> g1 = Inspect(*first);
    if (!g1.ok()) continue;
    const Value* x = first->input(g1->a);
    const int64_t k1 = g1->weight[0], n1 = g1->weight[1], n2 = g2->weight[1];
    if (k1 == 0 || n1 == 0 || hidden->shape().empty() || hidden->shape().back() != g2->weight[0]) continue;
    // One row per image of a pooled map ([N, 1, 1, C]): a gate, not the FFN of a short
    // sequence ([B, S, H] with S > 1), whose GEMMs the tensor-core families run.
    const Shape& xs = x->shape();
    bool pooled = xs.size() >= 3;
    for (size_t d = 1; d + 1 < xs.size(); ++d) pooled = pooled && xs[d] == 1;
    if (!pooled) continue;
    const int64_t rows = x->numel() / k1;
    const std::vector<std::string> names = {first->name(), second->name()};
    auto reject = [&](const std::string& why) { ReportRejection(report_, name(), names, why); };
    if (rows > kMaxRows || k1 > kMaxK || n1 > kMaxHidden) {
      reject(absl::StrCat("shape: ", rows, " rows, K ", k1, ", hidden width ", n1, "; the one-kernel MLP takes at most ",
                          kMaxRows, " rows, K up to ", kMaxK, " and hidden widths up to ", kMaxHidden,
                          " (the tensor-core GEMMs take larger ones)"));
      continue;
    }
    if (k1 * n1 > kMaxWeightElements || n1 * n2 > kMaxWeightElements) {
      reject(absl::StrCat("shape: weights of ", k1 * n1, " and ", n1 * n2, " elements; every CTA of the one-kernel MLP "
                          "reads the first whole, so each is at most ", kMaxWeightElements));
      continue;
    }
    if (!IsConvex(graph, {first, second})) {
      reject("not convex: a path leaves the two groups and comes back");
      continue;
    }
    used.insert(first);
    used.insert(second);
    const std::string group_name = second->name();
    std::vector<std::string> members = {first->name()};
    for (const std::string& m : FusedGroupMembers(*second)) members.push_back(m);
    KILN_ASSIGN_OR_RETURN(std::string anchor_name, second->GetString("anchor", ""));
    KILN_ASSIGN_OR_RETURN(std::vector<Node*> nodes, InlineFusedGroupNodes(graph, first, true));
    KILN_ASSIGN_OR_RETURN(std::vector<Node*> nodes2, InlineFusedGroupNodes(graph, second, true));
    const Node* anchor = nullptr;
    for (Node* n : nodes2) {
      if (n->name() == anchor_name) anchor = n;
      nodes.push_back(n);
    }
    KILN_ASSIGN_OR_RETURN(Node* group, FormFusedGroup(graph, nodes, "mlp", anchor, group_name));
    if (report_ != nullptr) report_->groups.push_back({std::string(name()), group->name(), "mlp", members});
    changed = true;
  }
  if (changed) graph.RemoveUnusedValues();
  return changed;
}

}  // namespace kiln
