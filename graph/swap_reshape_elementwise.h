// SwapReshapeElementwise ("swap-reshape-elementwise"): an element-wise node that
// reads a Reshape's output runs before the Reshape instead.
//
// Pattern: U(Reshape(x, s), c1, ..., ck) where U is element-wise (OpDef::is_elementwise,
// one output), the Reshape's output is read by U alone and is not a graph output, and
// every ci is a constant that is a scalar or a vector [N] / [1.., N] along a last dim
// N that x and the Reshape's output share.
// Rewrite: Reshape(U(x, c1, ..., ck), s), the Reshape writing U's old output value.
// Math: identical (U is applied per element; the constants broadcast along the same
// last dim before and after).
// Why: epilogue fusion extends a MatMul along its output; exporters put a Reshape
// between a Linear and its activation (GPT-2's Conv1D: Gemm on [B*T, K], Reshape to
// [B, T, N], then gelu), which left the activation as its own kernel.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

class SwapReshapeElementwise {
 public:
  absl::string_view name() const { return "swap-reshape-elementwise"; }
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
