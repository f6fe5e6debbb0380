// Canonicalize: the graph-level clean-up that runs before fusion, so that fusion
// sees one spelling of each idiom (MatMul + epilogue, Conv with folded BN, Gelu,
// LayerNormalization) whatever opset or exporter produced the model.
//
// Runs, to a fixed point: RemoveIdentity, GemmToMatMul, FoldBatchNorm,
// RecognizeGelu, RecognizeLayerNorm, constant folding (InferShapes with
// fold_constants) and EliminateDeadCode. Returns whether anything changed.
// Preconditions: the graph is typed (InferShapes has run). Postconditions: typed,
// topologically sorted; graph inputs and outputs keep their names and values.
#pragma once

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace kiln {

absl::StatusOr<bool> Canonicalize(Graph& graph);

}  // namespace kiln
