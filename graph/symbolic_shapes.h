// Symbolic shape inference for dynamic shapes (issue 34): the dims of node
// outputs as expressions over the graph's dim symbols (graph/dim_expr.h), and
// the folding of shape arithmetic (Shape -> Gather -> Concat -> Reshape) into
// constants whose elements are such expressions.
//
// InferShapes (graph/infer_shapes.h) runs these after each node's static
// inference, which sees the largest case (every symbol at its maximum). A dim
// the rules cannot express (an op without a symbolic rule reading a dynamic
// dim, a conv's spatial dim, a split along a dynamic axis) is an Unimplemented
// error naming the node and the dim.
#pragma once

#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/dim_expr.h"
#include "graph/graph.h"

namespace kiln {

// The dims of `v`: dims() when dynamic, else its static shape as constants.
std::vector<DimExpr> SymbolicShape(const Value& v);
// `dims` evaluated at the symbols' `values` (indexed by id).
absl::StatusOr<Shape> EvaluateDims(const std::vector<DimExpr>& dims, absl::Span<const int64_t> values);
// The elements of an integer constant of rank 0 or 1 as expressions (its
// symbolic data, else its values); nullopt for anything else.
std::optional<std::vector<DimExpr>> SymbolicValues(const Value* v);
// Whether any input of `node` is dynamic or carries symbolic data.
bool ReadsSymbols(const Node& node);

// Sets the dims of every output of `node` (typed by InferNode at the largest
// case) from its inputs' dims and symbolic data.
absl::Status InferNodeDims(Node& node, absl::Span<const DimSymbol> symbols);

// For a node InferShapes would fold (its inputs constant, or a Shape/Size) that
// reads symbols: each output's elements as expressions, when the op is integer
// shape arithmetic that kiln folds symbolically; nullopt when it is not (the
// node then stays in the graph and runs on the bound sizes).
absl::StatusOr<std::optional<std::vector<std::vector<DimExpr>>>> FoldSymbolically(const Node& node,
                                                                                  absl::Span<const DimSymbol> symbols);

// "[batch, seq, 768]".
std::string DimsToString(absl::Span<const DimExpr> dims, absl::Span<const DimSymbol> symbols);

}  // namespace kiln
