// EliminateCommonSubexpressions ("eliminate-common-subexpressions"): a node that
// computes exactly what an earlier node computes is removed; its consumers read the
// earlier node's outputs.
//
// Pattern: two nodes of one op type and domain, equal attributes and the same inputs
// in the same order, where "the same input" is the same value, or two small constants
// (at most kMaxComparedConstantBytes) of equal dtype, shape and bytes. Exporters
// repeat such work per layer: the legacy exporter's SDPA decomposition turns the one
// boolean padding mask into an additive one in every layer, `Where(mask, 0, -inf)`,
// each with its own copies of the 0 and -inf constants.
// Math: an op applied to equal inputs gives equal outputs (every op kiln runs is
// deterministic: it has no random ops, and a model with one fails to import).
// Preconditions, otherwise the node is kept:
//  - no attribute is a graph (subgraphs are not compared), and tensor attributes are
//    small constants as above;
//  - no output of the later node is a graph output (the model's output names stay);
//  - both nodes' outputs are typed alike (they are, for equal ops on equal inputs;
//    checked so that a partially typed graph is left alone).
// Nodes are visited in order, so a chain of duplicates (Cast, then Where on it)
// collapses in one run.
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class EliminateCommonSubexpressions {
 public:
  // Constants up to this size are compared by content; larger ones (weights) only
  // by identity, so that the pass does not hash a model's weights.
  static constexpr size_t kMaxComparedConstantBytes = 1024;

  absl::string_view name() const { return "eliminate-common-subexpressions"; }
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
