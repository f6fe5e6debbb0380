// Shape inference over a whole graph, optionally folding constants on the way.
//
// Nodes are visited in topological order. With `fold_constants`, a node whose
// inputs are all constants (or a Shape/Size node whose input type is known) is
// evaluated on the CPU reference and replaced by constant outputs, so later
// nodes (Reshape, Expand, Slice...) see constant shape arguments. This is how the
// Shape -> Gather -> Concat -> Reshape chains of PyTorch exports become static.
#pragma once

#include "absl/status/status.h"
#include "graph/graph.h"

namespace kiln {

struct InferShapesOptions {
  bool fold_constants = true;
  // Constants larger than this are not materialised by folding (weights produced
  // by ConstantOfShape are always folded).
  int64_t max_folded_bytes = int64_t{1} << 31;
};

absl::Status InferShapes(Graph& graph, const InferShapesOptions& options = {});

}  // namespace kiln
