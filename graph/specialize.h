// Binding a dynamic graph (issue 34) to the sizes of one run: the symbol values
// its inputs' shapes give, and the static graph at those values.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace kiln {

// The value of each dim symbol (in graph.dim_symbols() order) that the inputs'
// shapes give. InvalidArgument naming the input, the dim and the compiled range
// when a shape is outside it, disagrees with another input or with a static
// dim, or when an input is missing.
absl::StatusOr<std::vector<int64_t>> BindDims(const Graph& graph, const std::map<std::string, Shape>& input_shapes);

// "batch=2, seq=17".
std::string BindingToString(const Graph& graph, absl::Span<const int64_t> values);

// A static copy of `graph` at these symbol values: inputs typed, symbolic
// constants evaluated, every type inferred again. Nothing is folded, so its
// nodes are the graph's, one to one and in order.
absl::StatusOr<std::unique_ptr<Graph>> Specialize(const Graph& graph, absl::Span<const int64_t> values);

// Per node of `graph` (nodes() order), whether its outputs depend on the run's sizes
// alone: every input is a constant (shape constants hold their expressions) or the
// output of such a node, or the node reads only its input's type (Shape, Size).
// transformers' masks and position ids are built this way; a backend may compute
// them once per run size instead of on every run. All false for a static graph
// (constant folding has left no such node to run).
std::vector<bool> SizeOnlyNodes(const Graph& graph);

// The outputs of the nodes `size_only` marks (SizeOnlyNodes of the graph that
// `specialized` was made from, so one per node of it), evaluated in node order on the
// host by the reference evaluators. `where` prefixes errors.
absl::StatusOr<absl::flat_hash_map<const Value*, Tensor>> EvaluateSizeOnlyNodes(const Graph& specialized,
                                                                                const std::vector<bool>& size_only,
                                                                                const std::string& where);

// Specialises `graph` at each range's ends and at a size inside, and checks
// that every value gets the shape its dims give there. This catches a rewrite
// that fixed a size the ranges vary. The error names the sizes and the first
// value that differs.
absl::Status CheckSpecializations(const Graph& graph);

}  // namespace kiln
