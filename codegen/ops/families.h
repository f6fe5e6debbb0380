// Per-node kernel generators by family, dispatched from codegen/op_kernels.cc.
// Each Generate* handles the ops its Is* accepts and returns Unimplemented for a
// form it cannot generate.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "codegen/op_kernels.h"
#include "graph/graph.h"

namespace kiln::codegen::ops {

// Element-wise ops with multidirectional broadcasting (codegen/ops/pointwise.cc).
bool IsPointwiseOp(absl::string_view op);
absl::StatusOr<std::vector<KernelLaunch>> GeneratePointwise(const Node& node);
// A FusedGroup whose members are all element-wise over the group's output shape
// (fusion's "pointwise" groups): one kernel for the whole group.
absl::StatusOr<std::vector<KernelLaunch>> GeneratePointwiseGroup(const Node& group);

// Data movement: views, Transpose, Concat, Split, Slice, Gather, Pad, Tile, Expand,
// Identity, Dropout (codegen/ops/movement.cc).
bool IsMovementOp(absl::string_view op);
absl::StatusOr<std::vector<KernelLaunch>> GenerateMovement(const Node& node);

// Reductions, Softmax/LogSoftmax, LayerNormalization, global pools, ArgMax/ArgMin
// (codegen/ops/reduce.cc).
bool IsReduceOp(absl::string_view op);
absl::StatusOr<std::vector<KernelLaunch>> GenerateReduce(const Node& node);

// Windowed ops: MaxPool, AveragePool, LRN (codegen/ops/pool.cc).
bool IsPoolOp(absl::string_view op);
absl::StatusOr<std::vector<KernelLaunch>> GeneratePool(const Node& node);

// Tensor-core GEMM (codegen/ops/gemm.cc, template codegen/templates/gemm_sm80.cuh,
// mma.sync m16n8k16 for sm_80 and later): a MatMul of f16 or bf16 operands of rank
// >= 2 (batch dims of each operand equal to the output's or all broadcast), or a
// FusedGroup whose body is such a MatMul of group inputs followed by an element-wise
// chain over its output shape (group inputs of the chain broadcast against
// [batch..., M, N]; scalar constants become literals), with one output.
struct GemmConfig {
  int bm = 128, bn = 128, bk = 32;  // block tile
  int warps_m = 2, warps_n = 2;     // warp grid (warp tile (bm/warps_m) x (bn/warps_n))
  int stages = 3;                   // cp.async pipeline depth
};
inline constexpr int64_t kGemmMaxSharedBytes = 99 * 1024;
// Dynamic shared memory of a config (bytes).
int64_t GemmSharedBytes(const GemmConfig& config);
// InvalidArgument, explaining which constraint fails: tile divisibility by the warp
// grid and the mma shape, stages, threads <= 1024, shared memory <= 99 KiB.
absl::Status VerifyGemmConfig(const GemmConfig& config);
// The shape heuristic: 128x128x32 (2x2 warps, 3 stages) when there are enough large
// tiles to fill the GPU, else 64x64x32 (2x2 warps, 4 stages).
GemmConfig PickGemmConfig(int64_t m, int64_t n, int64_t k, int64_t batch);
// One launch; `config` overrides the heuristic (benchmarks). Unimplemented for any
// other form; InvalidArgument for an invalid `config`.
absl::StatusOr<std::vector<KernelLaunch>> GenerateMatMulGroup(const Node& node, const GemmConfig* config = nullptr);

}  // namespace kiln::codegen::ops
