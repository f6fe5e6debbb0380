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
// Element-wise ops whose expression evaluates a special function (exp, log, tanh, erf,
// sqrt, pow: the multi-function unit, a sixteenth of the FMA pipe's rate on the H100).
// The sm90 GEMM's tile costs tell such epilogues apart (codegen/ops/gemm_sm90.h).
bool PointwiseUsesSpecialFunction(absl::string_view op);
absl::StatusOr<std::vector<KernelLaunch>> GeneratePointwise(const Node& node);
// A FusedGroup whose members are all element-wise over the group's output shape
// (fusion's "pointwise" groups): one kernel for the whole group.
absl::StatusOr<std::vector<KernelLaunch>> GeneratePointwiseGroup(const Node& group);

// Data movement: views, Transpose, Concat, Split, Slice, Gather, Pad, Tile, Expand,
// Identity, Dropout, DepthToSpace, SpaceToDepth (codegen/ops/movement.cc).
bool IsMovementOp(absl::string_view op);
absl::StatusOr<std::vector<KernelLaunch>> GenerateMovement(const Node& node);
// A "concat" FusedGroup (fusion/fuse_concat.h): one strided copy per Concat input,
// reading it through the group's Slice / Transpose / Expand members.
absl::StatusOr<std::vector<KernelLaunch>> GenerateConcatGroup(const Node& group);
// A "pad" FusedGroup (fusion/fuse_pad.h): one constant-mode Pad kernel reading each
// element through the group's views from where they start, converting a Cast's
// source dtype to the output's through float.
absl::StatusOr<std::vector<KernelLaunch>> GeneratePadGroup(const Node& group);

// An "mlp" FusedGroup (fusion/fuse_mlp.h): two chained small-row MatMuls with their
// element-wise chains in one kernel (codegen/ops/mlp.cc).
absl::StatusOr<std::vector<KernelLaunch>> GenerateMlpGroup(const Node& group);

// Transpose, Expand and Slice read their input through a strided view: output
// element i (over the output shape) is input element offset + sum_d i_d * strides[d]
// (strides may be 0 or negative-free steps). Pointwise groups read a group input
// through such a member instead of launching the copy (codegen/ops/pointwise.cc).
struct MovementView {
  std::vector<int64_t> strides;
  int64_t offset = 0;
};
absl::StatusOr<MovementView> ViewOf(const Node& node);
// The same over an input that is itself read through `in_strides` from `in_offset`
// (a view of a view).
absl::StatusOr<MovementView> ViewOf(const Node& node, const std::vector<int64_t>& in_strides, int64_t in_offset);

// Reductions, global pools, ArgMax/ArgMin (codegen/ops/reduce.cc); also claims the
// row ops (Softmax/LogSoftmax and the norms), which it hands to GenerateRowOp.
bool IsReduceOp(absl::string_view op);
absl::StatusOr<std::vector<KernelLaunch>> GenerateReduce(const Node& node);
// Row kernels (codegen/ops/row.cc): Softmax/LogSoftmax, LayerNormalization and
// RMSNormalization (GenerateReduce hands them over), and "softmax", "layernorm" and
// "rmsnorm" FusedGroups (fusion/fuse_pointwise.h): one row kernel with the group's
// element-wise prologue in registers.
bool IsRowOp(absl::string_view op);
absl::StatusOr<std::vector<KernelLaunch>> GenerateRowOp(const Node& node);
absl::StatusOr<std::vector<KernelLaunch>> GenerateRowGroup(const Node& group);

// Index-driven ops: GatherElements, GatherND, ScatterElements (Scatter), ScatterND,
// OneHot, Trilu, Compress, EyeLike, ReverseSequence, MaxUnpool
// (codegen/ops/indexing.cc).
bool IsIndexingOp(absl::string_view op);
absl::StatusOr<std::vector<KernelLaunch>> GenerateIndexing(const Node& node);

// Ops over lines along one axis (or whole matrices): CumSum, Hardmax, TopK,
// ReduceLogSumExp, InstanceNormalization, Det (codegen/ops/line.cc).
bool IsLineOp(absl::string_view op);
absl::StatusOr<std::vector<KernelLaunch>> GenerateLine(const Node& node);

// Resize: every mode and coordinate transform the reference takes
// (codegen/ops/resize.cc).
absl::StatusOr<std::vector<KernelLaunch>> GenerateResize(const Node& node);

// Quantized ops: QuantizeLinear, DequantizeLinear, MatMulInteger, QLinearMatMul,
// ConvInteger, QLinearConv (codegen/ops/quantized.cc).
bool IsQuantizedOp(absl::string_view op);
absl::StatusOr<std::vector<KernelLaunch>> GenerateQuantized(const Node& node);

// GridSample (4-D), every mode and padding (codegen/ops/grid_sample.cc).
absl::StatusOr<std::vector<KernelLaunch>> GenerateGridSample(const Node& node);

// RoiAlign, both modes and coordinate transforms (codegen/ops/roi_align.cc).
absl::StatusOr<std::vector<KernelLaunch>> GenerateRoiAlign(const Node& node);

// RNN, GRU, LSTM: a block per (direction, batch entry) (codegen/ops/recurrent.cc).
absl::StatusOr<std::vector<KernelLaunch>> GenerateRecurrent(const Node& node);

// Einsum: a generic kernel for every equation (codegen/ops/einsum.cc).
absl::StatusOr<std::vector<KernelLaunch>> GenerateEinsum(const Node& node);

// Conv as a direct kernel, for the convolutions cuDNN and the generated conv kernels
// do not take (3-D, empty, past 2^31 elements; codegen/ops/conv_direct.cc).
absl::StatusOr<std::vector<KernelLaunch>> GenerateDirectConv(const Node& node);

// ConvTranspose: a direct kernel, every form the reference takes
// (codegen/ops/conv_transpose.cc).
absl::StatusOr<std::vector<KernelLaunch>> GenerateConvTranspose(const Node& node);

// Windowed ops: MaxPool, AveragePool, LRN (codegen/ops/pool.cc).
bool IsPoolOp(absl::string_view op);
absl::StatusOr<std::vector<KernelLaunch>> GeneratePool(const Node& node);

// Tensor-core GEMM (codegen/ops/gemm.cc, template codegen/templates/gemm_sm80.cuh,
// mma.sync m16n8k16 for sm_80 and later). Takes:
//   - a MatMul of f16 or bf16 operands of rank >= 2 (batch dims of each operand equal
//     to the output's or all broadcast), either operand stored transposed (trans_a:
//     A is [..., K, M]; trans_b: B is [..., N, K]);
//   - FusedGroups anchored on such a MatMul (IsMatMulGroup): "matmul+epilogue" (an
//     element-wise chain over [batch..., M, N] after the product; its group inputs
//     broadcast against that shape, scalar constants become literals);
//     "prologue+matmul[+epilogue]" (element-wise chains on A and/or B over the stored
//     operand shape, from one loaded group input of any float dtype, side inputs
//     broadcast into it, applied in registers before the shared-memory store);
//     "dual-matmul[+epilogue]" (Add(MatMul(A1, B1), MatMul(A2, B2)) of one [.., M, N],
//     K1 and K2 free: two mainloops into one accumulator), with one output.
// The same forms with f32 operands run on the SIMT template instead
// (codegen/templates/gemm_simt.cuh: FFMA on the CUDA cores, no TF32), whose configs
// are GemmConfigs under its own rules (the Simt* functions below).
struct GemmConfig {
  int bm = 128, bn = 128, bk = 32;  // block tile
  int warps_m = 2, warps_n = 2;     // warp grid (warp tile (bm/warps_m) x (bn/warps_n))
  int stages = 3;                   // pipeline depth
  int split_k = 1;                  // > 1: K split over gridDim.y, reduced in the kernel
  // The SIMT template only: CTAs per SM the kernel is compiled for
  // (__launch_bounds__'s minimum, so ptxas fits 65536 / (threads * min_ctas) registers).
  int min_ctas = 1;
  // The SIMT template only (" t"): the k-major pipeline (SIMT_KMAJOR), which copies
  // every operand k-major into shared memory by cp.async (transposing where K is
  // contiguous) and reads its fragments one k ahead; fp32 operands without a prologue.
  bool kmajor = false;
};
// How an operand reaches shared memory: cp.async (16 bytes; its contiguous dim a
// multiple of 8, no prologue), or through registers (a prologue, or rows that are not
// 16-byte aligned) 8 elements per load or one. On the SIMT template: kAsync an fp32
// operand of rows of a multiple of 4 floats without a prologue (16-byte loads, by
// cp.async with STAGES > 2), kStagedVector the same with a prologue, else
// kStagedScalar. The im2col gathers are A of an implicit-GEMM convolution
// (codegen/ops/conv.cc): cp.async 16 bytes (C % 8 == 0) or register-staged one
// element per load.
enum class GemmLoad { kAsync, kStagedVector, kStagedScalar, kIm2colAsync, kIm2colScalar };
struct GemmOperand {
  bool trans = false;  // A stored [K, M] / B stored [N, K]
  GemmLoad load = GemmLoad::kAsync;
  int element_bytes = 2;  // of the loaded tensor (4: an fp32 prologue input)
};
struct GemmMainloop {
  GemmOperand a, b;
  int64_t k = 0;  // the mainloop's K (0: unknown; split_k is then not checked against it)
};
// The kernel's form beyond the tile config: one mainloop, or two (dual-matmul).
struct GemmVariant {
  GemmVariant() : mainloops(1) {}
  std::vector<GemmMainloop> mainloops;
  // fp32 operands: the SIMT template (codegen/templates/gemm_simt.cuh) runs the GEMM,
  // and the config functions below apply its rules (Simt* in gemm_simt_config.cc).
  bool simt = false;
  // fp32 operands of MatMuls marked for TF32 math (the `tf32` attribute that
  // --precision tf32 sets, graph/tf32_math.h): the Hopper family runs them on TF32
  // tensor cores where it takes the group (GemmFamilyPlan::tf32); else the sm_80
  // template does where every mainloop has A [M, K] and B [N, K], no prologue and K a
  // multiple of 4 (GEMM_TF32: simt is false, the mainloops' k count 16-bit units, two
  // per element, their loads kAsync); the SIMT template computes the rest in exact fp32.
  bool tf32 = false;
};
inline constexpr int64_t kGemmMaxSharedBytes = 99 * 1024;
// Registers a thread may spend on accumulators, fragments and register-staged
// operands (of 255): the rest holds addresses, indices and the epilogue. Calibrated
// with ptxas (sm_80, 128x128 tiles, 2x2 warps): an estimate of 148 compiles to 228
// registers, 164 to 241, 180 to 250, all without spills; a second mainloop costs
// about 40 more (its addresses live across the first), so a dual kernel at 148 + 40
// spills. GemmCodegenTest.LargeTilesDoNotSpill checks this.
inline constexpr int kGemmRegisterBudget = 184;
inline constexpr int kGemmSecondMainloopRegisters = 40;
// Dynamic shared memory of a config (bytes): STAGES x the largest mainloop's A and B
// tiles, a tile of R rows and C contiguous elements taking R x (C + 8) x 2 bytes (so it
// depends on the layouts: A [BM][BK+8] or [BK][BM+8], B [BK][BN+8] or [BN][BK+8]).
int64_t GemmSharedBytes(const GemmConfig& config, const GemmVariant& variant = {});
// 32-bit registers per thread for accumulators, A/B fragments and the register-staged
// tiles of the largest mainloop, plus kGemmSecondMainloopRegisters for a dual kernel
// (what kGemmRegisterBudget bounds).
int GemmRegisterEstimate(const GemmConfig& config, const GemmVariant& variant = {});
// InvalidArgument, explaining which constraint fails: tile divisibility by the warp
// grid and the mma shape, stages, threads <= 1024, shared memory <= 99 KiB,
// registers (GemmRegisterEstimate) <= kGemmRegisterBudget, one or two mainloops;
// split_k in [1, kGemmMaxSplitK], 1 with two mainloops, and (where the mainloop's k
// is known) every split with at least one k tile: (S-1) * ceil(k_tiles / S) < k_tiles.
absl::Status VerifyGemmConfig(const GemmConfig& config, const GemmVariant& variant = {});
inline constexpr int kGemmMaxSplitK = 32;
// What is wrong with `config`'s split-K for `variant` ("" when nothing): split_k in
// [1, kGemmMaxSplitK], 1 with two mainloops, every split with a k tile. Both
// templates' verifiers ask it.
std::string SplitKProblem(const GemmConfig& config, const GemmVariant& variant);
// The fewest splits of `k_tiles` k tiles with the length `split` splits give each,
// ceil(k_tiles / split) (e.g. 52 k tiles in 4 splits of 13: 4; 9 in 4 splits of 3: 3):
// what the split-K heuristics of both GEMM families launch.
inline int64_t FewestSplits(int64_t k_tiles, int64_t split) {
  const int64_t per = (k_tiles + split - 1) / split;
  return (k_tiles + per - 1) / per;
}
// Split-K heuristic: the split count for `tile` (whose split_k it ignores) on an
// M x N x K GEMM of `batch` entries, on `sm_count` SMs (0: 132, an H100 SXM). When the
// output tiles (x batch) fill at most half the SMs, S = the most splits that keep
// tiles * S <= sm_count and at least `min_k_tiles` k tiles per split (at most
// kGemmMaxSplitK), reduced to the fewest splits with the same k tiles per split; else
// (or when that leaves S < 2) 1. The heuristic asks for kGemmMinSplitKTiles (16: K >=
// 512 per split with BK 32; on the H100 splits of 5 k tiles measured slower than
// smaller unsplit tiles and splits of 20 faster; benchmarks/results/ has the runs),
// the tuning candidates for 4.
inline constexpr int kGemmMinSplitKTiles = 16;
int PickGemmSplitK(const GemmConfig& tile, int64_t m, int64_t n, int64_t k, int64_t batch, int sm_count = 0,
                   int min_k_tiles = kGemmMinSplitKTiles);

// The shape heuristic: 128x128x32 (3 stages) when there are enough large tiles to
// fill the GPU, with 2x2 warps, or 2x4 where `variant` needs more registers than 2x2
// leave (VerifyGemmConfig); else 64x64x32 (2x2 warps, 4 stages). `k` is the summed K
// of a dual-matmul. The tile only (split_k 1): HeuristicGemmConfig adds the split.
GemmConfig PickGemmConfig(int64_t m, int64_t n, int64_t k, int64_t batch, const GemmVariant& variant = {});
// The SIMT template's rules for a GemmConfig (what VerifyGemmConfig, PickGemmConfig,
// HeuristicGemmConfig and GemmCandidateConfigs apply when variant.simt): warp tiles of
// 32 or 64 rows (8 or 16 on the k-major pipeline) and a multiple of 16 columns, BK a
// multiple of 4, STAGES 2 (operands staged through registers into two buffers) or 3 to
// 4 (the cp.async pipeline: every mainloop's A [M, K] and B [K, N] GemmLoad::kAsync,
// i.e. fp32 rows of a multiple of 4 floats without a prologue), split-K as the sm_80
// template's (one mainloop, every split with a k tile), each operand tile's 16-byte
// loads a whole number per thread, shared memory and registers (accumulators, fragments
// and staged loads within kSimtRegisterBudget, the block within an SM's registers; an
// occupancy target " oN" within 65536 / (threads x N)). The heuristic (`sm_count` SMs,
// 0: 132), from sweeps on the H100 and H200 (benchmarks/results/gemm_simt_*), where the
// k-major pipeline takes the operands: M <= 32 and one mainloop, kSimtFewRows8Config (M
// <= 8) or kSimtFewRows16Config with K split in up to 16 (kSimtMinKMajorSplitTiles k
// tiles a split, three CTAs an SM); with B [N, K] and 3.5 tiles (x batch) of 128x128
// per SM, kSimtLargeNkConfig; with 1.9, kSimtLargeConfig; with 1.9 of 128x64,
// kSimtMidConfig; else kSimtSplitConfig with K split in 2 or 4 while the grid stays
// within four CTAs an SM and each split keeps kSimtMinSplitConfigTiles k tiles, where
// that grid reaches 1.9 CTAs an SM; else (one mainloop) 64x64x16 or 64x32x16 on the
// k-major pipeline with K split in up to 8 (kSimtMinKMajorSplitTiles k tiles a split)
// for 1.9 CTAs an SM, or 64x32x16's deepest split; else the split grid from 0.7 CTAs an
// SM; else (a dual kernel short of those grids, or operands the k-major pipeline cannot
// copy) the first of 128x128x8, 128x64x16, 64x64x32 and 64x32x16 (2x2 warps, STAGES 2)
// with 1.9 tiles per SM, or the smallest, its K split (a single mainloop) over up to
// three CTAs per SM with at least kSimtMinSplitKTiles k tiles each (PickGemmSplitK).
// The candidates add pipeline configs where the pipelines take the operands, 8-warp
// tiles and k-major ones. A config's " t" (kmajor) runs the k-major pipeline: every
// mainloop's operands GemmLoad::kAsync in any layout, STAGES 2 to 4, a k tile's stored
// rows (BK elements, BM / 4 or BN / 4 16-byte chunks) and the threads dividing one
// another.
// Calibrated with ptxas (sm_90a): 128x128x16 with 2x2 warps, estimated at 184,
// compiled to 255 registers and spilled; 128x128x8 (168) and 128x256x16 with 2x4 warps
// (176) to 249 and 251 without spills. SimtCompilesForSm80AndSm90aWithoutSpills checks.
inline constexpr int kSimtRegisterBudget = 180;
inline constexpr int kSimtMinSplitKTiles = 8;
// The heuristic's tiles, all on the k-major pipeline (fp32 operands without a
// prologue). Large grids: 128x128x8, 2x4 warps (8 x 8 a lane), 3 stages.
inline constexpr GemmConfig kSimtLargeConfig{128, 128, 8, 2, 4, 3, 1, 1, true};
// Large grids with B [N, K] (from 3.5 tiles an SM): 128x128x8, 2x2 warps (8 x 16 a
// lane), 4 stages, 3-5% ahead of kSimtLargeConfig there on the H100, 20% behind it at
// 2.9 tiles an SM.
inline constexpr GemmConfig kSimtLargeNkConfig{128, 128, 8, 2, 2, 4, 1, 1, true};
// Mid-sized grids, unsplit: 128x64x16, 2x2 warps (8 x 8 a lane), 3 stages.
inline constexpr GemmConfig kSimtMidConfig{128, 64, 16, 2, 2, 3, 1, 1, true};
// Mid-sized grids with K split: 128x64x8, 2x2 warps, 4 stages (kSimtMidConfig split in
// 2 ran 11-25% behind it with B [N, K] on the H100).
inline constexpr GemmConfig kSimtSplitConfig{128, 64, 8, 2, 2, 4, 1, 1, true};
// The fewest k tiles (of 8) a split of kSimtSplitConfig keeps: 384 k's, the rule of
// the pipelined 128x64x16 split before it (512 x 1024 x 1024 ran at 0.92x cublasSgemm
// there in 2 splits of 512 k's, 0.83x in 4 of 256).
inline constexpr int kSimtMinSplitConfigTiles = 48;
// The fewest k tiles a split of the k-major small-grid and few-rows tiles keeps: 128 x
// 768 x 768 ran fastest on 64x32x16 tiles in 4 splits of 12 (0.93x cublasSgemm on the
// H200).
inline constexpr int kSimtMinKMajorSplitTiles = 12;
// GEMMs of a few rows (M <= 8, <= 32), on the k-major pipeline's short warp tiles: 8 x
// 64 x 32 with one row a lane and 16 x 64 x 16 with two, 2 warps (1 x 2), 3 stages,
// K split. They took the small_m set (M 1 to 64, the 64-row tiles kept for M 64) on
// the H100 from a geomean of 0.65x cublasSgemm to 0.95x
// (benchmarks/results/gemm_simt_few_rows_h100_2026-12-06.txt).
inline constexpr GemmConfig kSimtFewRows8Config{8, 64, 32, 1, 2, 3, 1, 1, true};
inline constexpr GemmConfig kSimtFewRows16Config{16, 64, 16, 1, 2, 3, 1, 1, true};
int64_t SimtGemmSharedBytes(const GemmConfig& config, const GemmVariant& variant);
int SimtGemmRegisterEstimate(const GemmConfig& config, const GemmVariant& variant);
absl::Status VerifySimtGemmConfig(const GemmConfig& config, const GemmVariant& variant);
GemmConfig PickSimtGemmConfig(int64_t m, int64_t n, int64_t k, int64_t batch, const GemmVariant& variant,
                              int sm_count = 0);
// The heuristic's config first, then the others of a pool of 26 that fit, then
// split-K forms of those that leave SMs idle (at least 4 k tiles per split).
std::vector<GemmConfig> SimtGemmCandidateConfigs(int64_t m, int64_t n, int64_t k, int64_t batch,
                                                 const GemmVariant& variant, int sm_count = 0);
// One launch; `config` overrides the heuristic (HeuristicGemmConfig with `sm_count`;
// benchmarks, the tuning database, autotuning). Unimplemented for any other form;
// InvalidArgument for an invalid `config`. A split config's launch has a workspace
// (SetGemmGridAndWorkspace).
absl::StatusOr<std::vector<KernelLaunch>> GenerateMatMulGroup(const Node& node, const GemmConfig* config = nullptr,
                                                              int sm_count = 0);

// What decides a GEMM kernel's speed besides its tile config: the tuning problem of
// a node GenerateMatMulGroup takes (codegen/tuning_db.h keys its entries by it).
struct GemmProblem {
  // A batch that folds into the rows (A [batch..., M, K] with B shared) is counted in
  // m: batch * M rows, batch 1, as the kernels compute it.
  int64_t m = 0, n = 0, batch = 1;
  std::vector<int64_t> k;          // per mainloop (two for a dual-matmul)
  DType dtype = DType::kFloat16;   // the tensor-core operands' storage dtype
  // Per mainloop, A then B: 'N' (A [M,K], B [K,N]) or 'T' (trans_a / trans_b), then
  // 'a' / 'b' when that operand is broadcast over a batch > 1; mainloops joined by
  // '+': "NN", "NT", "NTa+NN".
  std::string layout;
  // The group's pattern and member op types in body order, then a hash of what the
  // kernel computes around the mainloop (per operand: prologue code and its loads'
  // dtypes and broadcast shapes; the epilogue's; loaded and output dtypes):
  // "matmul+epilogue[MatMul,Add,Gelu]#5f1c0e8a93b2d467". A plain MatMul: "MatMul[]#...".
  std::string signature;
  GemmVariant variant;  // load modes, for VerifyGemmConfig
  // A gated product (pattern "gated-matmul"): n is B's width, twice C's; only the
  // Hopper family takes it.
  bool gated = false;
  // A rotary product (pattern "rotary-matmul"): the epilogue pairs columns this far
  // apart (0: none); only the Hopper family takes it.
  int64_t rotary_half = 0;
  int64_t KTotal() const;
  double Flops() const;  // 2 * M * N * KTotal * batch
};
// The problem of a node GenerateMatMulGroup takes; its errors otherwise.
absl::StatusOr<GemmProblem> DescribeMatMulGroup(const Node& node);
// Why the sm_80 and SIMT templates refuse a gated or rotary product
// (GemmProblem::gated, rotary_half).
inline constexpr absl::string_view kPairedEpilogueRefusal =
    "a gated or rotary product (gated-matmul, rotary-matmul): only the Hopper family pairs accumulator columns in "
    "its epilogue";
// The heuristic config of a problem: PickGemmConfig's tile; for a single mainloop
// whose tiles (x batch) fill at most half of `sm_count` SMs (0: 132), PickGemmSplitK's
// split when it brings the grid to at least half the SMs (K long enough: BERT-base's
// FFN down at 128 tokens, 128x768x3072, gets 64x64x32 k5), else 32x32x64 tiles (K
// too short to split: 128x768x768 gets 96 of them, which measured faster on the H100
// than 64x64 k5).
GemmConfig HeuristicGemmConfig(const GemmProblem& problem, int sm_count = 0);
// The configs autotuning measures: the heuristic's first, then up to a dozen more
// (tiles 32..256 x 32..256, BK 32 or 64, 2..4 stages, 4 or 8 warps), leaving out those
// VerifyGemmConfig rejects for the problem's variant and tiles at least twice the
// (16-rounded) problem in M or N; then, for a single mainloop whose tiles leave SMs
// idle, split-K forms of the first unsplit ones (PickGemmSplitK's S for that tile
// with at least 4 k tiles per split, and S/2 when that is still >= 2), up to
// kGemmMaxSplitCandidates. Distinct, deterministic.
inline constexpr int kGemmMaxSplitCandidates = 8;
std::vector<GemmConfig> GemmCandidateConfigs(const GemmProblem& problem, int sm_count = 0);
// "128x128x32 w2x2 s3" (BM x BN x BK, WARPS_M x WARPS_N, STAGES), with " kS" after
// it for split_k S > 1 ("64x64x32 w2x2 s4 k5") and " oN" for min_ctas N > 1
// ("128x128x8 w2x4 s4 o2"), and back (InvalidArgument for anything else; the result
// is not verified).
std::string GemmConfigString(const GemmConfig& config);
absl::StatusOr<GemmConfig> ParseGemmConfig(absl::string_view text);
bool operator==(const GemmConfig& a, const GemmConfig& b);

// Convolutions (codegen/ops/conv.cc) of NHWC Conv nodes (the kiln attribute
// channels_last = 1: X [N, H, W, C], W [OC, KH, KW, C/group], Y [N, OH, OW, OC]) of
// f16 or bf16 with 2 spatial dims, and of "conv+epilogue" FusedGroups anchored on
// one (one output; the Conv's X, W and B group inputs; the element-wise chain after
// it composed into the epilogue functor, its inputs broadcast against Y):
//   - group == 1: implicit GEMM on the tensor-core template (gemm_sm80.cuh with
//     GEMM_CONV), M = N*OH*OW, N = OC, K = KH*KW*C; A gathered from X (cp.async when
//     C % 8 == 0, else register-staged one element per load), B = W as [OC, K]
//     (trans_b); the output [M, OC] is Y;
//   - group G > 1, not depthwise: the same per group, one GEMM per blockIdx.z (N =
//     OC/G, K = KH*KW*C/G; group g's channels of X, rows of W, columns of Y);
//   - group == C == OC (depthwise): templates/conv_depthwise.cuh, one thread per
//     (output pixel, 8 channels) with 16-byte loads when C % 8 == 0 and X and Y are
//     2-byte dtypes, else one channel; f32 too.
// Any strides, pads (auto_pad included), dilations and kernel sizes. Unimplemented,
// with the reason, for NCHW convs, 1-D/3-D convs and other dtypes:
// those run on cuDNN.
absl::Status ConvKernelFits(const Node& node);
// Whether the kernel ConvKernelFits accepts is the depthwise one (else implicit GEMM).
absl::StatusOr<bool> ConvKernelIsDepthwise(const Node& node);
// One launch; `config` overrides the GEMM heuristic (implicit-GEMM convs only):
// PickGemmConfig's tiles, or smaller ones (64x32, 32x64, 32x32) when it picks 64x64
// tiles that do not fill one wave of `sm_count` SMs (0: 132, an H100 SXM).
absl::StatusOr<std::vector<KernelLaunch>> GenerateConv(const Node& node, const GemmConfig* config = nullptr,
                                                       int sm_count = 0);
// VerifyGemmConfig, and for the register-staged im2col gather: each thread's run of
// BM*BK/threads consecutive k's of one row must divide BK.
absl::Status VerifyConvGemmConfig(const GemmConfig& config, const GemmVariant& variant);

// Fused attention (codegen/ops/attention.cc, template codegen/templates/
// attention_sm80.cuh, mma.sync m16n8k16 for sm_80 and later; the primitives are in
// codegen/templates/mma_sm80.cuh). Takes "attention" FusedGroups
// (fusion/fuse_attention.h): MatMul(Q, K') -> element-wise score ops -> Softmax over
// the last axis -> MatMul(P, V), optionally a scale on Q, f16 or bf16, D and Dv
// multiples of 8 up to kAttentionMaxHeadDim, K' stored [.., D, Sk] or [.., Sk, D]
// (trans_b), batch dims of Q, K', V and the mask broadcast into the scores'; Q, K', V
// and the output may be read / written through the group's head split / merge
// Transposes ([B, S, H, D] with row pitch H * D). One CTA per (batch entry, BM query
// rows); scores and probabilities stay in registers.
inline constexpr int64_t kAttentionMaxHeadDim = 128;
inline constexpr int64_t kAttentionMaxSharedBytes = 99 * 1024;
// Registers a thread may spend on scores, output accumulators and fragments (the
// estimate below); the rest of 255 holds addresses, indices and the score functor.
// Measured (ptxas -v, sm_80, NVRTC 13.0): D = 64 with 64-key blocks (estimate 92)
// takes 137 registers; D = Dv = 128 with 64-key blocks (estimate 140) took 241-255,
// so 128-wide heads get 32-key blocks (estimate 124; 202-214 registers, no spills).
inline constexpr int kAttentionRegisterBudget = 128;
// Registers of the same estimate for the Hopper kernel (no Q fragments; P's
// fragments beside the scores): what a thread may hold (255, or 65536 / threads
// rounded down to 8 when that is less: 168 at BM 192), less this reserve for the
// addresses, indices and the score functor.
inline constexpr int kAttentionWgmmaRegisterReserve = 63;
struct AttentionConfig {
  int bm = 64;      // query rows per CTA: BM / 16 warps per key group, 16 rows each
  int bn = 64;      // keys per block of the key loop
  int splits = 1;   // key groups per CTA (1, 2, 4): each stage's keys are `splits`
                    // blocks, one per group, the groups' results merged at the end
  // The Hopper kernel (codegen/templates/attention_sm90.cuh, sm_90a only): one
  // warpgroup per 64 rows (BM 64, 128 or 192), wgmma with Q, K, V in 128-byte-swizzled
  // shared memory (D, Dv padded to 64), BN 64 or 128, splits 1.
  bool wgmma = false;
  // With wgmma: each warpgroup runs block j + 1's softmax while the tensor cores add
  // block j's P V (the two products issued together).
  bool overlap = false;
};
// Dynamic shared memory (bytes): Q [BM][DP+8], two K tiles ([KEYS][DP+8] when stored
// [Sk, D], else [DP][KEYS+8]) and two V tiles [KEYS][DVP+8], KEYS = BN * splits, 2
// bytes each, or the key groups' merge buffer ((splits - 1) * BM * 2 threads' row
// statistics and accumulators, DVP / 2 + 4 floats each) if larger; DP and DVP are D
// and Dv rounded up to 16.
int64_t AttentionSharedBytes(const AttentionConfig& config, int64_t d, int64_t dv, bool k_trans);
// 32-bit registers per thread for scores (BN/2), output accumulators (DVP/2), Q
// fragments (DP/4) and row statistics.
int AttentionRegisterEstimate(const AttentionConfig& config, int64_t d, int64_t dv);
// InvalidArgument naming the failed constraint: BM and BN multiples of 16 in [16,
// 128], splits 1, 2 or 4 (at most 1024 threads), head dims, shared memory <= 99 KiB,
// registers <= kAttentionRegisterBudget.
absl::Status VerifyAttentionConfig(const AttentionConfig& config, int64_t d, int64_t dv, bool k_trans);
// BM 64, halved down to 32 while fewer than 132 CTAs (an H100's SMs) would run, and
// down to 16 while half of it still covers Sq; BN the first of 64, 32, 16 that
// verifies, with two key groups when the grid is still short of 132 CTAs and Sk
// exceeds BN; four groups covering all keys in one stage for 32 < Sk <= 64 on at most
// 264 CTAs (BN 16) and 64 < Sk <= 128 on fewer than 132 (BN 32).
// With `hopper` (an sm_90a target): the wgmma kernel where it pays
// (UseWgmmaAttention), BM 64, BN 128 for 512 keys or more, else 64.
AttentionConfig PickAttentionConfig(int64_t batch, int64_t sq, int64_t sk, int64_t d, int64_t dv, bool k_trans,
                                    bool hopper = false);
// Whether the heuristic gives an sm_90a target the wgmma kernel for these sizes.
bool UseWgmmaAttention(int64_t sq, int64_t d, int64_t dv);
// One launch; `config` overrides the heuristic (benchmarks, tests); `hopper`: the
// target is sm_90a, so the heuristic may pick the wgmma kernel. Unimplemented for a
// group the kernel does not take; InvalidArgument for an invalid `config`.
absl::StatusOr<std::vector<KernelLaunch>> GenerateAttentionGroup(const Node& group,
                                                                 const AttentionConfig* config = nullptr,
                                                                 bool hopper = false);

}  // namespace kiln::codegen::ops
