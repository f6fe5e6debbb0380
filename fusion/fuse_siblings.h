// FuseSiblings ("fuse-siblings"): matmuls that share work become one kernel.
//
// (a) Shared input, constant weights: MatMuls M1..Mn (n >= 2, not yet fused) that
// read the same value A as input 0 and constant 2-D weights W_i : [K, N_i] of one
// dtype (Q/K/V projections, gate/up of a gated MLP) are rewritten as ONE MatMul of A
// and a new constant W = concat(W_1..W_n, axis 1) : [K, N_1+...+N_n], followed by a
// Split along the last axis whose outputs are the original output values (so every
// reader is unchanged). Math: column block i of A*W is exactly A*W_i. This is a graph
// rewrite, not a group: the new MatMul is an ordinary anchor for the later passes.
// It is reported as a group entry with pattern "siblings", the new MatMul's name and
// the original MatMul names. Note for the memory planner: the Split outputs are
// column blocks of a row-major [.., N] tensor, i.e. strided, so they are NOT views
// (a Split along the last axis copies); the saving is one A read and one launch per
// extra sibling, and the copy disappears once codegen writes the blocks from the
// epilogue. Biases: when EVERY sibling's product is read only by an Add of a
// constant bias [N_i] or [1, N_i] (either operand order), the biases are
// concatenated into one constant [N_1+...+N_n] added before the Split, whose
// outputs are then the Adds' outputs (the Adds are removed and listed as members):
// the merged MatMul gets one bias epilogue instead of n separate Add kernels.
// Not fired (reported): a sibling whose weight is computed ("unsupported op: "),
// not 2-D ("shape: "), or of another dtype ("dtype: "). MatMuls reading A as their
// second input are not siblings.
//
// (b) Dual matmul: Add(P, Q) where P and Q are outputs of two different MatMul/Gemm
// nodes (not yet fused) of the same shape and dtype, equal to the Add's output shape,
// each read only by the Add, becomes one FusedGroup {P's node, Q's node, Add},
// pattern "dual-matmul", anchor the first MatMul in graph order: one kernel with two
// mainloops into one accumulator. Not fired (reported): shapes differ ("shape: ", e.g.
// a broadcast Add), dtypes differ ("dtype: "), a product read elsewhere ("other
// consumers: ": the separate products never exist in a dual-mainloop kernel).
//
// Preconditions: a typed graph. Runs first among the fusion passes: (a) must see
// plain MatMuls before prologue/epilogue groups swallow them, and (b)'s groups are
// extended by FuseEpilogue ("dual-matmul+epilogue").
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fusion/fusion_report.h"
#include "graph/graph.h"

namespace kiln {

class FuseSiblings {
 public:
  explicit FuseSiblings(FusionReport* report = nullptr) : report_(report) {}
  absl::string_view name() const { return "fuse-siblings"; }
  absl::StatusOr<bool> Run(Graph& graph);

 private:
  absl::StatusOr<bool> MergeSharedInput(Graph& graph);
  absl::StatusOr<bool> FuseDualMatMuls(Graph& graph);

  FusionReport* report_;
};

}  // namespace kiln
