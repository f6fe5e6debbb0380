// Matching helpers of the pattern passes (recognize-layer-norm, recognize-rms-norm,
// recognize-rope, fuse-attention, the conv and Gemm rewrites): single-use links
// between the nodes of an exported decomposition, one-element constants, last-axis
// means and per-channel vectors, the rewrite loop.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

// `node` is a default-domain `op` with one output and `num_inputs` present
// inputs.
bool IsOp(const Node* node, absl::string_view op, int num_inputs);
// The producer of `v` when it is `op` and `v` is used once and is no graph
// output.
Node* InternalProducer(const Graph& graph, const Value* v, absl::string_view op, int num_inputs);
// The single reader of `v` when it has one use and is no graph output, else nullptr.
Node* OnlyReader(const Graph& graph, const Value* v);
// Whether `slice` is a Slice with constant arguments taking x[..., 1 - i, :] for
// i = 0, 1 of its input x: the two halves of a size-2 axis -2 swapped (start 1,
// step -1), every other axis whole (recognize-rope's rotate_half view).
bool SwapsHalves(const Node* slice);
// The operand of binary `node` other than `v`, or nullptr when `v` is neither.
Value* OtherOperand(const Node* node, const Value* v);
// The single consumer of `v` when it is `op` and `v` is internal to the
// pattern.
Node* InternalConsumer(const Graph& graph, const Value* v, absl::string_view op, int num_inputs = 2);
// The permutation of Transpose `t` (absent: reversed dims), negative axes normalised;
// empty when malformed or `t`'s input is untyped.
std::vector<int64_t> PermOf(const Node& t);
// The value of a one-element floating-point constant.
std::optional<float> ScalarConstant(const Value* v);
// ReduceMean(x) over exactly the last axis with keepdims = 1.
bool IsLastAxisMean(const Node* node);
// A constant with `h` elements shaped [h] or [1, ..., 1, h], of rank <= `rank`.
bool IsLastAxisVector(const Value* v, int64_t h, int rank);
// The other operand of binary `node` when `operand` is one and the other is a
// last-axis vector constant.
Value* VectorOperand(const Node* node, const Value* operand, int64_t h, int rank);

// The rewrite passes' loop: `rewrite(graph, node)` on every node `qualifies(*node)`
// accepts (it may remove the node), then FinishRewrites; whether any node was.
template <typename Qualifies, typename Rewrite>
absl::StatusOr<bool> RewriteEachMatch(Graph& graph, const Qualifies& qualifies, const Rewrite& rewrite) {
  bool changed = false;
  for (Node* node : graph.nodes()) {
    if (!qualifies(*node)) continue;
    rewrite(graph, node);
    changed = true;
  }
  if (changed) {
    if (absl::Status s = graph.FinishRewrites(); !s.ok()) return s;
  }
  return changed;
}

// A new i64 constant [v.size()] holding `v` (a shape, split sizes, slice bounds).
Value* IntsConstant(Graph& graph, const std::string& name, const std::vector<int64_t>& v);

// `v` (a constant with h elements) as a [h] constant of `dtype`, reused when it
// already is one; `fill` everywhere, named `name`, when `v` is null.
Value* AsVector(Graph& graph, Value* v, DType dtype, int64_t h, float fill, const std::string& name);

}  // namespace kiln
