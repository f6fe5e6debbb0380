// Gather of 0..n-1 along an axis of n -> Reshape.
#include "graph/gather_to_reshape.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/pattern_match.h"

namespace kiln {
namespace {

bool Qualifies(const Node& node) {
  if (node.op_type() != "Gather" || !node.domain().empty() || node.num_inputs() != 2 || node.num_outputs() != 1) {
    return false;
  }
  const Value* x = node.input(0);
  const Value* idx = node.input(1);
  const Value* y = node.output(0);
  if (x == nullptr || idx == nullptr || !x->has_type() || !y->has_type() || !idx->is_constant() ||
      (idx->dtype() != DType::kInt64 && idx->dtype() != DType::kInt32) || x->rank() == 0) {
    return false;
  }
  const absl::StatusOr<int64_t> axis = node.GetInt("axis", 0);
  if (!axis.ok() || *axis < -x->rank() || *axis >= x->rank()) return false;
  const int64_t n = x->shape()[*axis < 0 ? *axis + x->rank() : *axis];
  const std::vector<int64_t> indices = idx->constant().ToInt64();
  if (static_cast<int64_t>(indices.size()) != n) return false;
  for (int64_t i = 0; i < n; ++i) {
    if (indices[i] != i && indices[i] != i - n) return false;
  }
  return true;
}

void Rewrite(Graph& graph, Node* gather) {
  const std::string name = gather->name();
  Value* x = gather->input(0);
  Value* y = gather->output(0);
  graph.RemoveNode(gather);
  graph.AddNode("Reshape", {x, IntsConstant(graph, absl::StrCat(name, "/shape"), y->shape())}, {y}, name);
}

}  // namespace

absl::StatusOr<bool> GatherToReshape::Run(Graph& graph) { return RewriteEachMatch(graph, Qualifies, Rewrite); }

}  // namespace kiln
