// Tf32Math: see tf32_math.h.
#include "graph/tf32_math.h"

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"

namespace kiln {
namespace {

bool IsMarkedOp(const Node& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") return false;
  const std::string& op = node.op_type();
  if (op != "MatMul" && op != "Gemm" && op != "Conv") return false;
  return node.num_outputs() == 1 && node.output(0) != nullptr && node.output(0)->has_type() &&
         node.output(0)->dtype() == DType::kFloat32;
}

}  // namespace

bool MarkedForTf32(const Node& node) { return node.GetInt("tf32", 0).value_or(0) == 1; }

void MarkForTf32(Node& node) { node.SetAttr("tf32", int64_t{1}); }

absl::StatusOr<bool> Tf32Math::Run(Graph& graph) {
  bool changed = false;
  absl::flat_hash_map<const Value*, Value*> k_major;  // constant B -> its [..., N, K] copy
  for (Node* node : graph.nodes()) {
    if (!IsMarkedOp(*node)) continue;
    if (!MarkedForTf32(*node)) {
      MarkForTf32(*node);
      changed = true;
    }
    if (node->op_type() != "MatMul" || node->num_inputs() != 2) continue;
    Value* b = node->input(1);
    if (b == nullptr || !b->is_constant() || b->rank() < 2) continue;
    KILN_ASSIGN_OR_RETURN(int64_t tb, node->GetInt("trans_b", 0));
    if (tb != 0) continue;
    Value*& copy = k_major[b];
    if (copy == nullptr) copy = graph.AddConstant(absl::StrCat(b->name(), "/k_major"), b->constant().SwappedLastTwo());
    node->SetInput(1, copy);
    node->SetAttr("trans_b", int64_t{1});
    KILN_RETURN_IF_ERROR(InferNode(*node));
    changed = true;
  }
  if (!k_major.empty()) graph.RemoveUnusedValues();
  return changed;
}

}  // namespace kiln
