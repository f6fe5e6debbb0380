// Structural checks of a Graph: def-use consistency, ordering, ownership, and
// optionally types and op definitions. Passes run it in tests and debug builds.
//
// Always checked:
//  - every value a graph refers to belongs to it, and value names are unique;
//  - graph inputs are listed once, are not constants and have no producer;
//  - constants have no producer and their type matches their data;
//  - every node input is a graph input, a constant, or an output of an EARLIER node;
//  - no value is produced twice, and each output records its producer and index;
//  - use lists agree with node inputs (no missing, extra or foreign uses);
//  - every graph output is produced by a node, a graph input or a constant.
// With `require_types`: every value the graph refers to has a type, and nodes of
// registered ops have an arity their OpDef accepts (required inputs present).
// With `require_known_ops`: every op is registered (the arity check applies too).
//
// The status is InvalidArgument listing every problem found, one per line, each
// naming the node ("node 'conv1' (Conv): ...") or the value ("value 'x' ...").
#pragma once

#include "absl/status/status.h"
#include "graph/graph.h"

namespace kiln {

struct VerifyOptions {
  bool require_types = false;
  bool require_known_ops = false;
};

absl::Status VerifyGraph(const Graph& graph, const VerifyOptions& options = {});

}  // namespace kiln
