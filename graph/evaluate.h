// CPU reference evaluation of single nodes and whole graphs.
#pragma once

#include <functional>

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace kiln {

// Runs one node's reference evaluator. Inputs follow node.inputs() (nullptr for
// absent optional inputs); outputs get the types inference assigned.
absl::StatusOr<std::vector<Tensor>> EvaluateNode(const Node& node,
                                                 absl::Span<const Tensor* const> inputs);

using TensorMap = absl::flat_hash_map<std::string, Tensor>;

// Runs the whole graph on the CPU reference. `feeds` maps every graph input name
// to a tensor of exactly its dtype and shape; returns the graph outputs in order.
// Intermediates are released after their last use. `observe`, when set, sees each
// node's outputs right after the node runs (e.g. to record value ranges).
using NodeObserver = std::function<void(const Node& node, absl::Span<const Tensor> outputs)>;
absl::StatusOr<std::vector<Tensor>> EvaluateGraph(const Graph& graph, const TensorMap& feeds,
                                                  const NodeObserver& observe = nullptr);

}  // namespace kiln
