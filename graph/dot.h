// Graphviz DOT export of a Graph, for looking at models and pass results
// (`dot -Tsvg graph.dot -o graph.svg`).
//
// Drawing: nodes are boxes labelled "op\nname" (op prefixed by "domain::" when it
// has one); graph inputs are blue inverted houses, graph outputs green houses, and
// constants with at most kDotMaxDrawnConstantElements elements small yellow notes
// showing their data. Larger constants (weights) are not drawn: each consumer lists
// them in its label as "name: type". Edges are labelled with the value's type
// ("?" when untyped) and carry the value name as tooltip. A value that nothing
// defines (a broken graph) is drawn as a red "undefined" marker.
#pragma once

#include <cstdint>
#include <string>

#include "graph/graph.h"

namespace kiln {

inline constexpr int64_t kDotMaxDrawnConstantElements = 16;

std::string ExportDot(const Graph& graph);

}  // namespace kiln
