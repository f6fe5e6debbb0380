// PadMatMulWidth: see pad_matmul_width.h.
#include "graph/pad_matmul_width.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/dtype.h"
#include "graph/op_registry.h"

namespace kiln {

absl::StatusOr<bool> PadMatMulWidth::Run(Graph& graph) {
  bool changed = false;
  for (Node* mm : graph.nodes()) {
    if (mm->op_type() != "MatMul" || !mm->domain().empty() || mm->num_inputs() != 2) continue;
    if (mm->has_attr("trans_a") || mm->has_attr("trans_b")) continue;
    Value* w = mm->input(1);
    Value* y = mm->output(0);
    if (w == nullptr || y == nullptr || !w->is_constant() || w->rank() != 2 || w->uses().size() != 1) continue;
    if (!IsFloating(w->dtype()) || mm->input(0)->rank() < 2) continue;
    const int64_t n = w->shape()[1];
    if (n % 8 == 0 || n < kMinPaddedWidth) continue;
    const int64_t n8 = (n + 7) / 8 * 8;
    const std::string name = mm->name();
    const std::string base = y->name();
    Value* a = mm->input(0);
    Value* padded_w = graph.AddConstant(absl::StrCat(w->name(), "/padded"), w->constant().PaddedInnermost(n8));
    // A new MatMul writes the padded product; a Slice writes the old output value
    // (its name, readers and place among the graph outputs stay).
    graph.RemoveNode(mm);
    Value* padded_y = graph.AddValue(absl::StrCat(base, "/padded"));
    Node* matmul = graph.AddNode("MatMul", {a, padded_w}, {padded_y}, name);
    KILN_RETURN_IF_ERROR(InferNode(*matmul));
    Value* starts = graph.AddConstant(absl::StrCat(base, "/starts"), Tensor::FromInt64(DType::kInt64, {1}, std::vector<int64_t>{0}));
    Value* ends = graph.AddConstant(absl::StrCat(base, "/ends"), Tensor::FromInt64(DType::kInt64, {1}, std::vector<int64_t>{n}));
    Value* axes = graph.AddConstant(absl::StrCat(base, "/axes"), Tensor::FromInt64(DType::kInt64, {1}, std::vector<int64_t>{-1}));
    Node* slice = graph.AddNode("Slice", {padded_y, starts, ends, axes}, {y}, absl::StrCat(name, "/unpad"));
    KILN_RETURN_IF_ERROR(InferNode(*slice));
    changed = true;
  }
  if (changed) {
    graph.RemoveUnusedValues();
    KILN_RETURN_IF_ERROR(graph.TopologicalSort());
  }
  return changed;
}

}  // namespace kiln
