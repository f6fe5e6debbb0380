// Canonicalize: the graph-level clean-up that runs before fusion, so that fusion
// sees one spelling of each idiom (MatMul + epilogue, Conv with folded BN, Gelu,
// LayerNormalization) whatever opset or exporter produced the model.
//
// Runs, to a fixed point: RemoveIdentity, SumToAdd, SwapReshapeElementwise, GemmToMatMul, FoldBatchNorm,
// RecognizeGelu, RecognizeLayerNorm, constant folding (InferShapes with
// fold_constants), FoldTransposeIntoMatMul and EliminateDeadCode. Returns
// whether anything changed.
// Preconditions: the graph is typed (InferShapes has run). Postconditions: typed,
// topologically sorted; graph inputs and outputs keep their names and values.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace kiln {

// One canonicalisation pass: its name, why it sits where it does, and how to run it.
struct CanonicalPass {
  std::string name;
  std::string why;
  std::function<absl::StatusOr<bool>(Graph&)> run;
};
// The passes of one round, in order (fusion/pipeline.cc lists them with the rest).
const std::vector<CanonicalPass>& CanonicalPasses();

// `after_pass`, when set, is called after every pass of every round (--dump-after).
absl::StatusOr<bool> Canonicalize(
    Graph& graph, const std::function<void(const std::string& pass, const Graph& graph)>& after_pass = nullptr);

}  // namespace kiln
