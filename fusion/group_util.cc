// Helpers shared by the fusion passes (see group_util.h).
#include "fusion/group_util.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/fused_group.h"
#include "graph/op_registry.h"
#include "graph/ops/slice.h"

namespace kiln {

absl::StatusOr<Node*> ExtendFusedGroup(Graph& graph, Node* group, const std::vector<Node*>& extra,
                                       absl::string_view pattern) {
  std::vector<Node*> all = extra;
  all.push_back(group);
  for (const Node* n : extra) {
    if (IsFusedGroup(*n)) return absl::FailedPreconditionError(absl::StrCat(n->Describe(), " is already a group"));
  }
  if (!IsConvex(graph, all)) {
    return absl::FailedPreconditionError(
        absl::StrCat("extending ", group->Describe(), " is not convex: a path leaves it and comes back"));
  }
  KILN_ASSIGN_OR_RETURN(std::string anchor_name, group->GetString("anchor", ""));
  const std::string name = group->name();
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> members,
                        InlineFusedGroupNodes(graph, group, /*reuse_outer_constants=*/true));
  const Node* anchor = nullptr;
  for (const Node* n : members) {
    if (!anchor_name.empty() && n->name() == anchor_name) anchor = n;
  }
  members.insert(members.end(), extra.begin(), extra.end());
  return FormFusedGroup(graph, members, pattern, anchor, name);
}

bool BroadcastsInto(const Shape& operand, const Shape& target) {
  if (operand.size() > target.size()) return false;
  const size_t off = target.size() - operand.size();
  for (size_t i = 0; i < operand.size(); ++i) {
    if (operand[i] != 1 && operand[i] != target[off + i]) return false;
  }
  return true;
}

std::vector<Node*> Consumers(const Value* value) {
  std::vector<Node*> out;
  for (const Use& u : value->uses()) {
    if (std::find(out.begin(), out.end(), u.node) == out.end()) out.push_back(u.node);
  }
  return out;
}

bool HasOutsideUse(const Graph& graph, const Value* value, const std::vector<Node*>& members) {
  if (graph.IsGraphOutput(value)) return true;
  for (const Use& u : value->uses()) {
    if (std::find(members.begin(), members.end(), u.node) == members.end()) return true;
  }
  return false;
}

std::vector<std::string> NodeNames(const std::vector<Node*>& nodes) {
  std::vector<std::string> names;
  names.reserve(nodes.size());
  for (const Node* n : nodes) names.push_back(n->name());
  return names;
}

void ReportGroup(FusionReport* report, absl::string_view pass, const Node& group) {
  if (report == nullptr) return;
  FusionReport::Group g;
  g.pass = std::string(pass);
  g.name = group.name();
  g.pattern = group.GetString("pattern", "").value_or("");
  g.members = FusedGroupMembers(group);
  report->groups.push_back(std::move(g));
}

bool IsStridedView(const Node& n) {
  if (IsFusedGroup(n) || n.num_outputs() != 1 || !n.has_input(0) || !n.output(0)->has_type() ||
      !n.input(0)->has_type()) {
    return false;
  }
  if (n.op_type() == "Transpose" || n.op_type() == "Expand") return true;
  return n.op_type() == "Slice" && ops::ConstantSlicePlan(n).ok();
}

bool IsElementwise(const Node* n) {
  if (n == nullptr || IsFusedGroup(*n) || n->num_outputs() != 1) return false;
  const OpDef* def = OpRegistry::Global().Find(n->op_type());
  return def != nullptr && def->is_elementwise;
}

std::string PointwiseProblem(const Node& n) {
  auto pointwise_dtype = [](DType d) { return IsFloating(d) || d == DType::kBool; };
  const Value* y = n.output(0);
  if (!y->has_type()) return absl::StrCat("shape: ", Quote(n.name()), " is untyped");
  for (const Value* v : n.inputs()) {
    if (v == nullptr) continue;
    if (!pointwise_dtype(v->dtype()) || !pointwise_dtype(y->dtype())) {
      return absl::StrCat("dtype: ", Quote(n.name()), " (", n.op_type(),
                          ") works on integers; pointwise kernels compute floats and masks");
    }
    if (!BroadcastsInto(v->shape(), y->shape())) {
      return absl::StrCat("shape: input ", Quote(v->name()), " of ", Quote(n.name()), " is ", ShapeToString(v->shape()),
                          ", which does not broadcast into ", ShapeToString(y->shape()));
    }
  }
  return "";
}

bool FormAndReportGroup(Graph& graph, FusionReport* report, absl::string_view pass,
                        const std::vector<Node*>& members, absl::string_view pattern, const Node* anchor,
                        const std::string& group_name, std::vector<std::string> candidate) {
  if (candidate.empty()) candidate = NodeNames(members);
  absl::StatusOr<Node*> group = FormFusedGroup(graph, members, pattern, anchor, group_name);
  if (!group.ok()) {
    ReportRejection(report, pass, std::move(candidate), absl::StrCat("not convex: ", group.status().message()));
    return false;
  }
  ReportGroup(report, pass, **group);
  return true;
}

void ReportRejection(FusionReport* report, absl::string_view pass, std::vector<std::string> nodes,
                     std::string reason) {
  if (report == nullptr) return;
  report->rejections.push_back({std::string(pass), std::move(nodes), std::move(reason)});
}

std::string TransposedOperands(const Node& matmul) {
  const bool a = matmul.GetInt("trans_a", 0).value_or(1) != 0;
  const bool b = matmul.GetInt("trans_b", 0).value_or(1) != 0;
  if (a && b) return "A and B (trans_a, trans_b)";
  if (a) return "A (trans_a)";
  if (b) return "B (trans_b)";
  return "";
}

bool IsPlainMatMul(const Node* n) {
  return n != nullptr && n->op_type() == "MatMul" && n->domain().empty() && n->num_inputs() == 2 && n->has_input(0) &&
         n->has_input(1) && TransposedOperands(*n).empty();
}

Tensor ColumnBlock(const Tensor& w, int64_t first, int64_t n) {
  const int64_t k = w.shape()[0], total = w.shape()[1];
  const size_t es = DTypeSize(w.dtype());
  Tensor out(w.dtype(), {k, n});
  auto* dst = static_cast<uint8_t*>(out.mutable_raw_data());
  const auto* src = static_cast<const uint8_t*>(w.raw_data());
  for (int64_t row = 0; row < k; ++row) std::memcpy(dst + row * n * es, src + (row * total + first) * es, n * es);
  return out;
}

std::string Quote(absl::string_view name) { return absl::StrCat("'", name, "'"); }

}  // namespace kiln
