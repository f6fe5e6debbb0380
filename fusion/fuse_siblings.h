// FuseSiblings ("fuse-siblings"): matmuls that share work become one kernel.
//
// (a) Shared input, constant weights: MatMuls M1..Mn (n >= 2, not yet fused) that
// read the same value X [..., K] as input 0 and constant 2-D weights W_i : [K, N_i]
// of one dtype (Q/K/V projections, gate/up of a gated MLP) are rewritten as ONE
// MatMul whose pieces are the original output values again (every reader is
// unchanged). This is a graph rewrite, not a group: the new MatMul is an ordinary
// anchor for the later passes. It is reported as a group entry with pattern
// "siblings", the new MatMul's name and the original node names.
//   Stacked layout (every N_i equal to N, the common case). The weights are stacked
// into a constant W [S, K, N] (S = n) and X is viewed as X2 = Reshape(X, [M, K])
// (X itself when 2-D; M = the product of X's leading dims): P = MatMul(X2, W) :
// [S, M, N] (ONNX broadcasting: X2 is shared by the S batches, a stride-0 batch for
// the GEMM), then Split(P, axis 0) into S pieces [1, M, N]. Each piece is one
// contiguous byte range of P, so the memory planner makes it a view of P at an
// offset (compiler/memory_planner.h, SplitViewOffsets) and the Split costs no
// kernel; pieces of a byte size that is not a multiple of 256 stay a (contiguous)
// copy. Why stacked rather than concatenated: the GEMM does the same work either
// way (S batches of [M, N] tiles vs one [M, S*N] grid), but only the stacked
// result cuts into contiguous pieces. A
// piece becomes the sibling's output through a Reshape (a view) or, when every
// reader of the output is a Reshape to a constant shape (attention's head split),
// those Reshapes read the piece directly. When X's leading dims are all 1 (batch
// 1, rank >= 3) X is used as it is, W is [S, 1.., K, N] and the pieces already have
// the outputs' shapes: no Reshape at all. Math: batch i of P is X*W_i.
//   Concatenated layout (widths differ): W = concat(W_1..W_n, axis 1) :
// [K, N_1+...+N_n], one 2-D MatMul, and a Split along the last axis. Its outputs
// are column blocks of a row-major [.., N] tensor, i.e. strided: that Split copies.
//   Biases: when a sibling's product is read only by an Add of a constant bias [N_i]
// or [1, N_i] (either operand order), the biases are merged too and added before the
// Split (stacked: one constant [S, 1.., N], a per-batch bias; concatenated:
// [N_1+...+N_n]), whose outputs are then the Adds' outputs (the Adds are removed and
// listed as members): the merged MatMul gets one bias epilogue instead of separate
// Add kernels. A sibling without such an Add gets a zero bias (Whisper's k_proj has
// none, its q_proj and v_proj do); when no sibling has one there is no bias.
// Not fired (reported): a sibling whose weight is computed ("unsupported op: "),
// not 2-D ("shape: "), or of another dtype ("dtype: "), or that carries a layout
// flag (trans_a / trans_b: "shape: "; both layouts are built row-major). MatMuls
// reading X as their second input are not siblings.
//
// (a') Split matmul: a MatMul(X, W) with a constant W [K, S*N], optionally followed
// by an Add of a constant bias [S*N] or [1, S*N], whose result is read only by a
// Split along the last axis into S >= 2 equal parts (GPT-2's c_attn: siblings merged
// by the model's author), possibly through a Reshape that keeps the last dim between
// them (the Conv1D export's [B*T, S*N] -> [B, T, S*N]), gets the same stacked layout,
// with W's column blocks as the W_i. Reported with pattern "split-matmul" (members:
// the MatMul, the Add, the Reshape, the Split). Not fired, silently: unequal parts, another axis, a computed weight, a
// layout flag, an intermediate read elsewhere.
//
// (b) Dual matmul: Add(P, Q) where P and Q are outputs of two different MatMul/Gemm
// nodes (not yet fused) of the same shape and dtype, equal to the Add's output shape,
// each read only by the Add, becomes one FusedGroup {P's node, Q's node, Add},
// pattern "dual-matmul", anchor the first MatMul in graph order: one kernel with two
// mainloops into one accumulator. Not fired (reported): shapes differ ("shape: ", e.g.
// a broadcast Add), dtypes differ ("dtype: "), a product read elsewhere ("other
// consumers: ": the separate products never exist in a dual-mainloop kernel).
//
// Preconditions: a typed graph. Runs right after fuse-gated-matmul (which takes gated
// FFNs' gate/up pairs first) and before the other fusion passes: (a) must see
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
  absl::StatusOr<bool> StackSplitMatMuls(Graph& graph);
  absl::StatusOr<bool> FuseDualMatMuls(Graph& graph);

  FusionReport* report_;
};

}  // namespace kiln
