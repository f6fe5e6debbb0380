// FuseNorms ("fuse-norms"): a LayerNormalization or RMSNormalization and the work
// around it that one row kernel (codegen/ops/row.cc) does in its loads and stores
// become one FusedGroup (pattern "layernorm" / "rmsnorm").
//
// Pattern: norm L, not yet fused, and
//  - the Add (residual) writing its input x, when x's shape and the Add's operands
//    broadcast into it (the Add's output becomes an extra group output when read
//    elsewhere: the pre-LN residual stream is);
//  - for each operand of that Add, the row moves (graph/row_moves.h) that write it
//    from outside, the Add their only reader: one Transpose keeping the last axis
//    (ViT's attention output back to batch-first), which the kernel reads through
//    strides, or any chain that copies rows (Swin's window merge Reshape, Transpose,
//    Reshape and the reverse cyclic shift's two Slice/Concat rolls), which it reads
//    through the chain's row map;
//  - the row moves reading L's output, L over the last axis and their chain its only
//    reader: one Transpose (ViT's norm to batch-first before the in_proj GEMM), whose
//    place for each row the kernel stores to, or any chain that copies rows (Swin's
//    cyclic shift and window partition before the QKV GEMM), when it keeps the row
//    count and the group writes nothing else (no extra output, no saved statistics):
//    the kernel then runs over the result's rows and reads each one's source row.
// Math: unchanged (the group's body is its members, which the CPU reference
// evaluates); each moved row is read or written once where the chain copied the
// whole activation once per step.
//
// Reported: an Add of integers or of operands that do not broadcast ("dtype: ",
// "shape: "), and row moves after a norm whose group writes more than the norm
// ("outputs: ").
//
// Runs after the matmul passes (their epilogues take the residual Add first) and
// before fuse-concat, which would otherwise take the cyclic shift's Concats as copies
// of their own; fuse-pointwise runs it again for the norms an expansion leaves.
// Static shapes for the row moves (graph/row_moves.h); dynamic graphs get the Add and
// the lone Transposes.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fusion/fusion_report.h"
#include "graph/graph.h"

namespace kiln {

class FuseNorms {
 public:
  explicit FuseNorms(FusionReport* report = nullptr) : report_(report) {}
  absl::string_view name() const { return "fuse-norms"; }
  absl::StatusOr<bool> Run(Graph& graph);

 private:
  FusionReport* report_;
};

}  // namespace kiln
