// Whole-graph shape inference with constant folding.
#include "graph/infer_shapes.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/evaluate.h"
#include "graph/op_registry.h"
#include "graph/symbolic_shapes.h"

namespace kiln {
namespace {

bool Foldable(const Node& node) {
  if (node.op_type() == "Shape" || node.op_type() == "Size") return true;
  for (const Value* in : node.inputs()) {
    if (in && !in->is_constant()) return false;
  }
  return true;
}

// The folded constant `v` holds the values at the largest sizes; its expressions
// must give the same there.
absl::Status SetFoldedSymbols(Value& v, std::vector<DimExpr> exprs, const std::vector<DimSymbol>& symbols) {
  const std::vector<int64_t> largest = LargestValues(symbols);
  const std::vector<int64_t> values = v.constant().ToInt64();
  bool same = values.size() == exprs.size();
  for (size_t i = 0; same && i < exprs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t at_max, exprs[i].Evaluate(largest));
    same = at_max == values[i];
  }
  if (!same) {
    return absl::InternalError(absl::StrCat("folding '", v.name(), "': the expressions ", DimsToString(exprs, symbols),
                                            " disagree with the values at the largest sizes"));
  }
  v.SetSymbolicData(std::move(exprs));
  return absl::OkStatus();
}

}  // namespace

absl::Status InferShapes(Graph& graph, const InferShapesOptions& options) {
  KILN_RETURN_IF_ERROR(graph.TopologicalSort());
  const std::vector<DimSymbol>& symbols = graph.dim_symbols();
  for (Node* node : graph.nodes()) {
    KILN_RETURN_IF_ERROR(InferNode(*node));
    KILN_RETURN_IF_ERROR(InferNodeDims(*node, symbols));
    if (!options.fold_constants || !Foldable(*node)) continue;
    // Shape arithmetic on the dynamic dims folds into constants that keep each
    // element's expression; anything else that reads them stays and runs.
    std::optional<std::vector<std::vector<DimExpr>>> symbolic;
    if (ReadsSymbols(*node)) {
      KILN_ASSIGN_OR_RETURN(symbolic, FoldSymbolically(*node, symbols));
      if (!symbolic) continue;
    }
    int64_t bytes = 0;
    for (const Value* out : node->outputs()) bytes += out->numel() * DTypeSize(out->dtype());
    if (bytes > options.max_folded_bytes) continue;
    // Shape and Size read only their input's type, so a null input is fine there.
    std::vector<const Tensor*> inputs;
    for (const Value* in : node->inputs()) inputs.push_back(in ? in->constant_or_null() : nullptr);
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, EvaluateNode(*node, inputs));
    std::vector<Value*> outs = node->outputs();
    graph.RemoveNode(node);
    for (size_t i = 0; i < outs.size(); ++i) {
      graph.SetConstant(outs[i], std::move(outputs[i]));
      if (symbolic) KILN_RETURN_IF_ERROR(SetFoldedSymbols(*outs[i], (*symbolic)[i], symbols));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln
