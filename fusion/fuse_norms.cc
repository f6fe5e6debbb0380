#include "fusion/fuse_norms.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fusion/group_util.h"
#include "graph/fused_group.h"
#include "graph/pattern_match.h"
#include "graph/row_moves.h"

namespace kiln {
namespace {

// A Transpose of `v`'s shape that keeps the last axis in place: rows stay rows.
bool KeepsRows(const Node* t, const Value* v) {
  return t != nullptr && t->op_type() == "Transpose" && IsStridedView(*t) && v->rank() >= 2 &&
         PermOf(*t).back() == v->rank() - 1;
}

bool OverLastAxis(const Node& norm) {
  absl::StatusOr<int64_t> axis = norm.GetInt("axis", -1);
  const int64_t rank = norm.output(0)->rank();
  return axis.ok() && (*axis == -1 || *axis == rank - 1);
}

// Whether the norm writes its statistics (LayerNormalization's optional outputs) for
// a reader.
bool WritesStats(const Graph& graph, const Node& norm) {
  for (int o = 1; o < norm.num_outputs(); ++o) {
    const Value* v = norm.output(o);
    if (v != nullptr && (!v->uses().empty() || graph.IsGraphOutput(v))) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<bool> FuseNorms::Run(Graph& graph) {
  std::vector<Node*> norms;
  for (Node* n : graph.nodes()) {
    if (n->op_type() == "LayerNormalization" || n->op_type() == "RMSNormalization") norms.push_back(n);
  }
  bool changed = false;
  for (Node* ln : norms) {
    Value* x = ln->input(0);
    Node* add = x->producer();
    std::vector<Node*> members;
    bool extra_output = false;
    if (add != nullptr && add->op_type() == "Add" && IsElementwise(add)) {
      if (std::string problem = PointwiseProblem(*add); !problem.empty()) {
        ReportRejection(report_, name(), {ln->name(), add->name()}, problem);
        continue;
      }
      for (Value* in : add->inputs()) {
        if (in == nullptr || in->shape() != x->shape() || HasOutsideUse(graph, in, {add})) continue;
        const std::vector<RowMoveStep> steps = RowMovesInto(graph, in);
        if (MovesRows(steps) && !IsLoneTranspose(steps)) {
          for (Node* n : RowMoveNodes(steps)) members.push_back(n);
        } else if (Node* t = in->producer(); KeepsRows(t, in)) {  // read through its strides
          members.push_back(t);
        }
      }
      members.push_back(add);
      extra_output = HasOutsideUse(graph, x, {ln});
    }
    members.push_back(ln);
    Value* y = ln->output(0);
    const std::vector<RowMoveStep> steps = RowMovesFrom(graph, y);
    const std::vector<Node*> readers = Consumers(y);
    bool chain = false;
    if (OverLastAxis(*ln) && MovesRows(steps) && !IsLoneTranspose(steps)) {
      const Value* end = steps.back().out;
      auto rows = [](const Value* v) { return NumElements(Shape(v->shape().begin(), v->shape().end() - 1)); };
      const bool same_rows = rows(end) == rows(y);
      chain = same_rows && !extra_output && !WritesStats(graph, *ln);
      if (chain) {
        for (Node* n : RowMoveNodes(steps)) members.push_back(n);
      } else {
        std::vector<std::string> names = {ln->name()};
        for (const Node* n : RowMoveNodes(steps)) names.push_back(n->name());
        ReportRejection(report_, name(), names,
                        !same_rows ? "shape: the row moves after the norm change the row count"
                                   : "outputs: the kernel would run over the moved rows, and the group also writes x "
                                     "or the norm's statistics in x's order");
      }
    }
    // Else a Transpose keeping the rows, the norm's only reader: the kernel stores each
    // row where it puts it.
    if (!chain && OverLastAxis(*ln) && readers.size() == 1 && KeepsRows(readers[0], y) &&
        !HasOutsideUse(graph, y, readers)) {
      members.push_back(readers[0]);
    }
    if (members.size() < 2) continue;
    const char* pattern = ln->op_type() == "RMSNormalization" ? "rmsnorm" : "layernorm";
    std::vector<std::string> candidate = {ln->name()};
    if (add != nullptr && std::find(members.begin(), members.end(), add) != members.end()) {
      candidate.push_back(add->name());
    }
    changed |= FormAndReportGroup(graph, report_, name(), members, pattern, nullptr, "", candidate);
  }
  return changed;
}

}  // namespace kiln
