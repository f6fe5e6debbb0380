// Tf32Math ("tf32-math"): --precision tf32 keeps fp32 storage and runs the matrix
// products on TF32 tensor cores with fp32 accumulation (PyTorch's allow_tf32): every
// f32 MatMul, Gemm and Conv gets the kiln attribute `tf32 = 1`, which the GPU kernels
// read (codegen: the Hopper GEMM family's tf32 wgmma, cuBLASLt's
// CUBLAS_COMPUTE_32F_FAST_TF32, cuDNN's tensor-op math). The CPU backend computes
// them in fp32 whatever the attribute says: it is the reference.
//
// wgmma's tf32 form reads both operands K-major from shared memory (it has no
// transpose for 32-bit types), so a MatMul whose B is a constant read as [..., K, N]
// (no trans_b: the exporters' Linear weights, W^T stored) gets that constant stored
// [..., N, K] instead, with trans_b = 1. One copy per constant, shared by the MatMuls
// that read it; the [K, N] original stays only where something else reads it.
// Computed B operands and A stored [K, M] keep their layout (the Hopper family then
// leaves the group to cuBLASLt or the SIMT template, gemm_sm90.h).
//
// Runs right after fuse-siblings (so the Q/K/V weights it merges, which it takes
// only row-major, are stored K-major too) and before the passes that form matmul
// groups. The MatMuls inside the dual-matmul groups fuse-siblings forms are not
// marked: they run in exact fp32.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

// Whether `node` carries the mark (`tf32 = 1`), and the marking itself: the one place
// that spells the attribute for the pass, the kernel planners and the tests.
bool MarkedForTf32(const Node& node);
void MarkForTf32(Node& node);

class Tf32Math {
 public:
  absl::string_view name() const { return "tf32-math"; }
  // Returns whether any node was marked or any weight transposed.
  absl::StatusOr<bool> Run(Graph& graph);
};

}  // namespace kiln
