// Whole-graph shape inference with constant folding.
#include "graph/infer_shapes.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/evaluate.h"
#include "graph/op_registry.h"

namespace kiln {
namespace {

bool Foldable(const Node& node) {
  if (node.op_type() == "Shape" || node.op_type() == "Size") return true;
  for (const Value* in : node.inputs()) {
    if (in && !in->is_constant()) return false;
  }
  return true;
}

}  // namespace

absl::Status InferShapes(Graph& graph, const InferShapesOptions& options) {
  KILN_RETURN_IF_ERROR(graph.TopologicalSort());
  for (Node* node : graph.nodes()) {
    KILN_RETURN_IF_ERROR(InferNode(*node));
    if (!options.fold_constants || !Foldable(*node)) continue;
    int64_t bytes = 0;
    for (const Value* out : node->outputs()) bytes += out->numel() * DTypeSize(out->dtype());
    if (bytes > options.max_folded_bytes) continue;
    // Shape and Size read only their input's type, so a null input is fine there.
    std::vector<const Tensor*> inputs;
    for (const Value* in : node->inputs()) inputs.push_back(in ? in->constant_or_null() : nullptr);
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, EvaluateNode(*node, inputs));
    std::vector<Value*> outs = node->outputs();
    graph.RemoveNode(node);
    for (size_t i = 0; i < outs.size(); ++i) graph.SetConstant(outs[i], std::move(outputs[i]));
  }
  return absl::OkStatus();
}

}  // namespace kiln
