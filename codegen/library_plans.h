// Planning of kiln's cuBLASLt and cuDNN calls (codegen/library_kernels.h): what the
// call for a node looks like (shapes, strides, transposes, epilogue), a pure function
// of the node, so that LibraryKernelName decides at compile time without a GPU and
// CreateLibraryKernel plans the same call on the device. Private to the library
// kernels: library_plans.cc (plans), cublaslt_kernel.cc, cudnn_kernel.cc.
//
// Row-major data through column-major cuBLASLt: a row-major [r, c] matrix is the
// column-major c x r matrix with ld = c, so Y = op(A) op(B) is computed as
// Y^T = op(B)^T op(A)^T with cuBLASLt's "A" being our B and its "B" our A.
// Math: CUBLAS_COMPUTE_32F (fp32 accumulation, exact fp32 for f32 data: no TF32);
// cuDNN with fp32 compute type, and FMA-only math for f32 data. A node marked `tf32`
// (--precision tf32, graph/tf32_math.h) with f32 data gets TF32 tensor-core math:
// CUBLAS_COMPUTE_32F_FAST_TF32, and cuDNN's tensor-op math.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "codegen/library_kernels.h"
#include "graph/graph.h"

namespace kiln::codegen::libplan {

// Largest cuBLASLt workspace a heuristic may ask for (cuBLAS itself uses 32 MiB on Hopper).
inline constexpr size_t kCublasLtMaxWorkspace = size_t{32} << 20;
// Largest cuDNN workspace an algorithm may need.
inline constexpr size_t kCudnnMaxWorkspace = size_t{64} << 20;
// Pointer alignment the runtime's arena guarantees (compiler/memory_planner.h).
inline constexpr uint32_t kAssumedAlignment = 256;

inline size_t AlignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }
inline int64_t Prod(const Shape& s) {
  int64_t p = 1;
  for (int64_t d : s) p *= d;
  return p;
}


// "inputs f16[2,3], f16[3,4] -> f16[2,4]".
std::string ShapesOf(const Node& node);

// ---------------------------------------------------------------------------
// MatMul / Gemm plan.

enum class CKind {
  kNone,         // no C (or beta == 0)
  kFull,         // C is [M, N]: passed to cuBLASLt as the C matrix
  kBias,         // C is [N] / [1, N] with beta == 1: bias epilogue
  kMaterialize,  // C is broadcast ([], [1], [1,1], [M,1], or [1,N] with beta != 1):
                 // expanded to [M, N] in the workspace with device copies, then used as C
};

struct GemmPlan {
  DType dtype = DType::kFloat32;
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1.f, beta = 0.f;
  int64_t batch = 1;                              // strided batch count
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;  // elements
  CKind c_kind = CKind::kNone;
  int64_t c_rows = 1, c_cols = 1;  // C's shape as a matrix (kMaterialize)
  // Fused groups: which launch inputs hold A, B and C / the bias, and the activation
  // of the epilogue.
  int in_a = 0, in_b = 1, in_c = 2;
  // kBias with a batch: elements between consecutive batches' biases (0: one bias
  // for every batch; N: a per-batch bias [batch.., 1, N], see PlanFusedMatMul).
  int64_t bias_batch_stride = 0;
  // A residual [M, N] added after the bias (one matrix, batch 1): the launch input
  // passed as cuBLASLt's C with beta 1; -1: none.
  int in_residual = -1;
  enum class Act { kNone, kRelu, kGeluTanh } act = Act::kNone;
  bool tf32 = false;  // f32 data with TF32 math (the node's `tf32` attribute)
};

// Conv plan (1-D convs run as 2-D with H = 1).

struct ConvPlan {
  DType dtype = DType::kFloat32;
  bool tf32 = false;                        // f32 data with TF32 math (the node's `tf32` attribute)
  int batch = 0, c = 0, h = 1, w = 0;       // X [N, C, H, W]
  int m = 0, cg = 0, kh = 1, kw = 0;       // W [M, C/group, KH, KW]
  int oh = 1, ow = 0;                      // Y [N, M, OH, OW]
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  int group = 1;
  bool has_bias = false;
  // channels_last=1 (graph/ops/channels_last.h): X, Y and the bias are NHWC tensors and W
  // is KRSC ([M, KH, KW, C/group]); the fields above keep their NCHW meaning.
  bool nhwc = false;
  // Fused groups (cudnnConvolutionBiasActivationForward): launch inputs of X, W, the
  // bias (-1: none, a zero bias in the workspace is used) and the residual Z (-1: none).
  bool fused = false;
  bool relu = false;
  int in_x = 0, in_w = 1, in_bias = 2, in_z = -1;
};

// The plan of a MatMul, a Gemm, a Conv, or a fused group one call runs (a MatMul or
// Conv chain with the epilogue the library has); Unimplemented saying why not.
absl::StatusOr<GemmPlan> PlanMatMul(const Node& node);
absl::StatusOr<GemmPlan> PlanGemm(const Node& node);
absl::StatusOr<ConvPlan> PlanConv(const Node& node);
absl::StatusOr<GemmPlan> PlanFusedMatMul(const Node& group);
absl::StatusOr<ConvPlan> PlanFusedConv(const Node& group);

// The kernels, planned on the current device (algorithms, workspace); `where` names
// the node in errors.
absl::StatusOr<std::unique_ptr<LibraryKernel>> MakeCublasLtKernel(std::string where, const GemmPlan& plan,
                                                                  cublasLtHandle_t handle);
absl::StatusOr<std::unique_ptr<LibraryKernel>> MakeCudnnConvKernel(std::string where, const ConvPlan& plan,
                                                                   cudnnHandle_t handle);

}  // namespace kiln::codegen::libplan
