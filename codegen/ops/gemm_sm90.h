// The Hopper GEMM family (codegen/ops/gemm_sm90.cc, template
// codegen/templates/gemm_sm90.cuh): TMA + mbarrier pipeline + wgmma, a producer
// warpgroup and consumer warpgroups, a persistent grid. It takes the plain MatMuls
// and the "matmul[+epilogue]", "dual-matmul[+epilogue]" (two mainloops through one
// ring into one accumulator) and "prologue+matmul[+epilogue]" groups with a prologue
// on A only (A through registers, the register-A wgmma) that gemm.cc plans (same
// prologue and epilogue functors) whose operands TMA can read: fp16/bf16 (a prologue
// loading the tensor-core type), contiguous dims multiples of 8 (16-byte aligned
// rows), every operand batch-dense or broadcast. Everything else (prologues on B or
// from fp32, odd widths) stays on the sm_80 template; Sm90Eligible says why.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "codegen/op_kernels.h"
#include "graph/graph.h"

namespace kiln::codegen::ops {

// The epilogue's work per element, which the tile costs tell apart (Sm90TileCost):
// kNone stores the accumulators as they are; kLight loads and computes (a bias, ReLU,
// a residual); kSpecial also evaluates a special function (GELU, tanh, exp, ...:
// PointwiseUsesSpecialFunction), bounded by the multi-function unit. An epilogue's
// time is exposed while the consumer warpgroups of a cooperative tile all run it;
// ping-pong consumers overlap it with the other one's mainloop.
enum class EpilogueWork { kNone = 0, kLight = 1, kSpecial = 2 };
// "none", "light", "special function".
const char* EpilogueWorkName(EpilogueWork work);

// What gemm.cc's planning knows about a GEMM group, for another template family:
// shapes, layouts, operands, the prologue of A and the generated epilogue (one
// generator for both families).
struct GemmFamilyPlan {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  // A gated product (gemm.cc's "gated-matmul" groups): B's n columns alternate in
  // blocks of 8 between the gate and up products, and C has c_n = n / 2 columns
  // (gemm_sm90_epilogue.cuh, GEMM_GATED). Otherwise c_n = n.
  bool gated = false;
  int64_t c_n = 0;
  // A rotary product (gemm.cc's "rotary-matmul" groups): the epilogue pairs each
  // column with the one rotary_half away within its block of 2 rotary_half
  // (gemm_sm90_epilogue.cuh, GEMM_ROTARY); 0: none.
  int64_t rotary_half = 0;
  int64_t a_batch = 0, b_batch = 0;  // operand batch strides in elements (0: broadcast)
  bool trans_a = false, trans_b = false;
  bool dual = false;
  DType dtype = DType::kFloat16;      // tensor-core operands
  bool tf32 = false;                  // f32 operands read as tf32 (GemmVariant::tf32)
  DType out_dtype = DType::kFloat16;
  int a_input = 0, b_input = 1;       // node input indices of A and B (loaded tensors)
  Shape a_shape, b_shape;            // stored operand shapes (a group's body is gone after planning)
  // Dual (Add(A·B, A2·B2)): the second mainloop's K, layouts, operands and batch strides.
  int64_t k2 = 0, a2_batch = 0, b2_batch = 0;
  bool trans_a2 = false, trans_b2 = false;
  int a2_input = 0, b2_input = 0;
  Shape a2_shape, b2_shape;
  // Prologues: which operand has one. For A: the loaded tensor's dtype, the functor
  // (`struct kiln_prologue_a { float operator()(float x, int row, int col, int batch) }`
  // over stored coordinates, as the sm_80 template gets it), the object expression
  // that builds it from kernel parameters ("kiln_prologue_a{pa0}"), the parameters
  // (", const kiln_f16* __restrict__ pa0") and their launch args.
  bool prologue_a = false, prologue_b = false;
  DType a_loaded_dtype = DType::kFloat16;
  std::string prologue_a_functor, prologue_a_object, prologue_params;
  std::vector<int> prologue_args;
  // `static __device__ float kiln_epilogue(float acc, int row, int col, int batch
  // KILN_EPILOGUE_PARAMS)` with its #defines, and the launch args of its params; with
  // a 16-bit column operand (a bias), a 16-bit operand dense along C's rows (a
  // residual) or a last op that runs on the packed result, also the TMA-store
  // epilogue's kiln_epilogue_at, kiln_epilogue_at2 and kiln_epilogue_columns
  // (KILN_EPILOGUE_AT, KILN_EPILOGUE_COLUMNS, KILN_EPILOGUE_PAIRS_ALIGNED,
  // KILN_EPILOGUE_PREFETCH_ROWS, KILN_EPILOGUE_TAIL; gemm_sm90.cuh).
  std::string epilogue_defines, epilogue_function;
  std::vector<int> epilogue_args;
  EpilogueWork epilogue_work = EpilogueWork::kNone;
  std::string description;  // "// fused group ...: MatMul ... -> ..." line
  // The epilogue's loads: the node input, its view against C as the kernel computes it
  // (`out_shape`: [batch..., M, N], or [batch * M, N] folded), and whether it is read
  // dense and broadcast (no strides, no offset). Dynamic bundles check them.
  struct EpilogueLoad {
    int input = 0;
    Shape view;
    bool dense = true;
  };
  std::vector<EpilogueLoad> epilogue_loads;
  Shape out_shape;
};
// gemm.cc: PrepareMatMul + the epilogue generator. Errors as GenerateMatMulGroup's.
absl::StatusOr<GemmFamilyPlan> PlanGemmForFamily(const Node& node);

struct Sm90GemmConfig {
  int bm = 128, bn = 256;  // tile: bm = 64 * wg_m * consumers (cooperative) or 64 * wg_m (ping-pong)
  int consumers = 2;       // consumer warpgroups
  int wg_m = 1;            // m64 blocks per consumer
  int stages = 4;
  // Ping-pong: each consumer takes whole tiles (every other one of the block), so
  // one's epilogue overlaps the other's mainloop; else they split every tile's rows.
  bool pingpong = false;
  // Split-K (cooperative tiles only): K over `split_k` work units per tile, reduced in
  // split order by the consumer warpgroup that finishes last (gemm_sm90.cuh). The
  // launch then takes a workspace (tiles * consumers semaphores, tiles * split_k *
  // bm * bn * 4 bytes of scratch).
  int split_k = 1;
  // Swap-AB (few rows of C, gemm_sm90.cuh "Swap-AB"): the kernel computes C^T = B^T A^T,
  // so B's N fills the 64-row wgmma M and C's M rows become the wgmma N: bm tiles N,
  // bn (a multiple of 8 in [8, 256], of 16 when split or clustered) tiles M.
  // Cooperative tiles, C through shared memory and TMA where it fits (else from
  // registers); plain matmul[+epilogue] groups with A stored [M, K].
  bool swap_ab = false;
  // Clusters of `cluster_m` CTAs along M (1 or 2; gemm_sm90.cuh "Clusters"): the two
  // tiles of a pair share B's tile, each CTA loading half and multicasting it, which
  // halves B's L2 -> SM traffic (swapped: A^T, the activations). Not with split_k.
  int cluster_m = 1;
  // Stream-K (cooperative tiles; not with split_k, swap_ab or clusters;
  // gemm_sm90.cuh "Stream-K"): the grid takes the tiles of its whole waves but one
  // whole, and splits the rest's k tiles evenly over all CTAs, the CTA holding a
  // tile's first k tiles adding the others' partials. The launch then takes a
  // workspace (stream-K tiles * consumers semaphores, grid * bm * bn * 4 bytes).
  bool stream_k = false;
  // k per stage (gemm_sm90.cuh GEMM_BK): 64, or 128 for swap_ab tiles without clusters
  // or stream_k: twice the bytes per TMA box, which lifts what one SM pulls where few
  // CTAs stream the weights (benchmarks/results/gemm_sm90_swap_bk128_h100_2026-11-26g.csv).
  int bk = 64;
};
// Stream-K's split of `tiles` tiles of `k_tiles` k tiles each over at most `sm_count`
// CTAs: the stream-K tiles are all of them when tiles < 2 sm_count (and not exactly
// one wave), else the last tiles % sm_count plus one wave, none when the tiles fill
// whole waves; grid = min(sm_count, stream-K iterations) when there are stream-K
// tiles, else min(sm_count, tiles). The data-parallel tiles fill whole waves.
struct Sm90StreamKSplit {
  int64_t grid = 0, sk_tiles = 0;
};
Sm90StreamKSplit Sm90StreamK(int64_t tiles, int64_t k_tiles, int sm_count);
inline constexpr int64_t kSm90MaxSharedBytes = 227 * 1024;
// 1024 (alignment) + stages * (bm + bn) * 64 * 2 + 16 * stages + 16 (barriers), plus
// with `tma_store` (the epilogue's shared-memory C buffers, one per consumer)
// consumers * 64 * wg_m * (bn / Sm90CChunks) * 2; with swap_ab only where that fits
// (else the swapped epilogue stores from registers and no C buffer is counted).
// The epilogue's C chunks: the fewest q dividing bn / 64 with which the shared memory
// fits (a TMA-store epilogue then stores its tile q chunks of bn / q columns through
// one buffer; 128x256 tiles take 4 stages with q = 2); bn / 64 when none does; 1
// with swap_ab (the whole tile or none).
int Sm90CChunks(const Sm90GemmConfig& config);
int64_t Sm90GemmSharedBytes(const Sm90GemmConfig& config, bool tma_store = true);
// InvalidArgument naming the constraint: bm = 64 * wg_m * consumers (ping-pong:
// 64 * wg_m with 2 consumers), consumers 1..3 (3: at most 96 accumulators a thread, 64
// with split_k or stream_k), wg_m 1..2, bn a multiple of 64 (TMA boxes of 64 columns) in [64, 256] (wgmma n),
// accumulators wg_m * bn / 2 <= 128 registers, 2..16 stages, shared memory <= 227 KiB,
// split_k in [1, kGemmMaxSplitK] and 1 with ping-pong; cluster_m 1 or 2, 1 with
// split_k; stream_k cooperative, without split_k, swap_ab or clusters; swap_ab: cooperative, bn a
// multiple of 8 in [8, 256] (16 when split or clustered; B' = A is K-major, one TMA box of bn rows). The K-dependent checks (every
// split gets a k tile, the scratch size) are GenerateMatMulGroupSm90's.
absl::Status VerifySm90GemmConfig(const Sm90GemmConfig& config, bool tma_store = true);
// The tile of Sm90TileCosts with the least predicted time (Sm90TileCost::PredictUs)
// among those `take` accepts; nullopt when it accepts none. The heuristic's last step,
// and the tile of forms that take only some tiles (a gated product's 128 or 256 columns).
std::optional<Sm90GemmConfig> CheapestSm90Tile(int64_t m, int64_t n, int64_t k, int64_t batch, int sm_count,
                                               EpilogueWork epilogue,
                                               absl::FunctionRef<bool(const Sm90GemmConfig&)> take);
// The shape heuristic (`sm_count` multiprocessors; `k` the summed K of a dual group).
// `register_a` (A goes through registers, a prologue): 64x128 tiles while one wave
// holds them, else the cooperative config of Sm90TileCosts (two or three consumers)
// with the least predicted time. Otherwise: 64x64 tiles when 64x128 ones would leave
// most SMs idle (and split), split over K until the units fill the SMs (PickSm90SplitK,
// kSm90SmallTileMinSplitKTiles k tiles a split or more, at most kSm90SmallTileMaxSplitK
// splits) while there are at most kSm90SmallTileMaxSplitTiles of them, with a deeper
// ring when unsplit with K long and M or N thin; else the config of Sm90TileCosts with
// the least predicted time for the `epilogue` (the group's EpilogueWork: ping-pong tiles win
// where a bias or GELU epilogue would stall cooperative ones), split over half the SMs
// when its tiles fill at most a quarter of them.
Sm90GemmConfig PickSm90GemmConfig(int64_t m, int64_t n, int64_t k, int64_t batch, int sm_count,
                                  bool register_a = false, EpilogueWork epilogue = EpilogueWork::kNone);
// The unsplit heuristic's cost model: a persistent launch of `config` with an
// epilogue of `epilogue` work takes fixed_us + waves * (wave_us + wave_us_per_k * K)
// microseconds (the Fit for that EpilogueWork), waves = ceil(tiles * batch / sm_count).
// Least-squares fits (relative error) per config and epilogue to an H100 sweep of
// every config over the squares, transformer and random sets of kiln_gemm_bench, with
// gemm, bias+ReLU and bias+GELU(tanh) (every config in one session; the 64-row
// ping-pong tiles from a later sweep; Sm90TileCosts names the sweeps in
// benchmarks/results/); the 64-row ping-pong tiles fit least well
// (benchmarks/fit_sm90_tile_costs.py prints each fit's error). The cooperative 64x64
// entry is fitted with 8 stages; the heuristic gives it 12 unsplit at K >= 1024 with M
// or N thin (faster there; kSm90SmallTileDeepRingMaxM/N), so the model overstates its
// time there a little.
struct Sm90TileCost {
  struct Fit {
    double fixed_us = 0, wave_us = 0, wave_us_per_k = 0;
  };
  Sm90GemmConfig config;
  Fit fits[3];  // by EpilogueWork
  double PredictUs(int64_t m, int64_t n, int64_t k, int64_t batch, int sm_count,
                   EpilogueWork epilogue = EpilogueWork::kNone) const;
};
absl::Span<const Sm90TileCost> Sm90TileCosts();
// The heuristic's least k tiles (of 64) per split (measured on the H100;
// benchmarks/results/ has the runs); for the few-tiles rule's 64x64 tiles, whose splits
// fill every SM, 12, in at most 4 splits, and only while there are at most 40 tiles: at
// 48 and 64 tiles the unsplit kernel beat 2 splits (M <= 64, N, K >= 3072), at 40 two
// splits beat none (128x1280x3968). Their ring: 8 stages of 16 KiB, and 12 when unsplit
// with K >= 1024, which ran faster there and slower split or at K <= 768 (the same run).
inline constexpr int kSm90MinSplitKTiles = 16, kSm90SmallTileMinSplitKTiles = 12, kSm90SmallTileMaxSplitK = 4;
inline constexpr int kSm90SmallTileMaxSplitTiles = 40, kSm90SmallTileDeepRingStages = 12;
inline constexpr int64_t kSm90SmallTileDeepRingMinK = 1024;
// The 12-stage ring only with M <= 128 or N <= 512: one operand is thin, the other
// streams through with little reuse, and the deeper ring hides DRAM's latency. With
// the L2 flushed (the bench's default) 12 stages were faster there (64x3072x3072,
// 2944x128x2432, 128x1280x3968, 1792x256x2304, 768x512x1536) and with it warm no
// slower. With M and N both wider (197..512 x 768..1024, K = 1024..4096) they were
// a wash flushed and slower warm, and ViT-B/16 at 197 tokens, whose activations are
// in L2 when the next GEMM reads them, ran faster end to end with 8
// (benchmarks/results/ has the runs).
inline constexpr int64_t kSm90SmallTileDeepRingMaxM = 128, kSm90SmallTileDeepRingMaxN = 512;
// Short K: at most kSm90ShortK (3 k tiles) with at least kSm90ShortKMinWaves waves of
// 128x128 tiles, a GEMM moves far more bytes of A and C than it has math (EfficientNet's
// and MobileNetV3's 1x1 convs: N*H*W rows, K and N of 16..240). The cost model, fitted
// to longer K, picks 64x64 ping-pong tiles there, whose per-tile overhead bounds them;
// 128x128 ping-pong tiles of two m64 blocks a consumer were faster than that pick at
// 401408x96x16, 100352x144x24, 25088x240x40, 6272x480x80 and 6272x672x112, and 128x64
// cooperative tiles where N <= 64 (100352x24x96, 25088x40x144), A-prologues included
// (H200, kiln_gemm_bench --family sm90 --sm90-config, L2 flushed;
// benchmarks/results/gemm_sm90_short_k_h200_2026-11-29.csv). Below one wave (b1's
// 12544x96x16, 1568x1152x192) the cost model's pick was as fast or faster, and so it
// was with A through registers (no ping-pong) at N > 64.
inline constexpr int64_t kSm90ShortK = 192, kSm90ShortKMinWaves = 1;
// The split count for a cooperative `tile` config: 1 unless 2 * tiles * batch <=
// max_units (0: sm_count / 2); else as many splits as fit (tiles * splits <=
// max_units) with at least `min_k_tiles` k tiles (of tile.bk) each (at most max_splits,
// 0: no cap but kGemmMaxSplitK's), reduced to the fewest splits with the same k tiles
// per split; 1 where VerifySm90GemmConfig refuses the split tile.
int PickSm90SplitK(const Sm90GemmConfig& tile, int64_t m, int64_t n, int64_t k, int64_t batch, int sm_count,
                   int min_k_tiles = kSm90MinSplitKTiles, int max_units = 0, int max_splits = 0);
// Swap-AB's tile config (Sm90SwapAbEligible groups): 64-row tiles of N, bn = M rounded
// up to 8. With at least kSm90SwapAbUnsplitMinTiles of them (N >= 2048 at batch 1):
// unsplit, a ring of kSm90SwapAbUnsplitStages (fewer where shared memory runs out).
// Small M is bound by the weight's bytes; on the H100 the unsplit deep ring streamed
// them faster than the splits that put every SM to work at M = 1, 8, 16 with
// N = 2048..4096 (32 to 64 tiles), bias and GELU epilogues alike. cuBLAS runs such
// tiles there too (64x8 / 64x16, 16 stages, no split;
// benchmarks/results/gemm_sm90_cublas_kernels_ncu_h100_2026-11-26e.csv).
// Fewer tiles: 128 k per stage (bk 128) and a ring of kSm90SwapAbBk128Stages, split in
// kSm90SwapAbSplits (bn then M rounded up to 16) where there are at most
// kSm90SwapAbSplitMaxTiles tiles and K >= kSm90SwapAbSplitMinK. There each SM that
// streams the weight is bound by its own pull through 8 KiB TMA boxes, not by DRAM (a
// traced kernel took as long per stage at 12 CTAs as at 48:
// benchmarks/results/gemm_sm90_swap_stage_trace_h100_2026-11-26g.csv), and 16 KiB
// boxes lift that. Chosen on M in {1, 8, 16, 32} x N in {768, 1024, 1536} x K in {768,
// 3072, 4096} (split in 4 won at 12 tiles with K = 4096), where the rule was as fast as
// the unswapped heuristic or faster
// (benchmarks/results/gemm_sm90_swap_bk128_small_m_h100_2026-11-26g.csv).
inline constexpr int64_t kSm90SwapAbUnsplitMinTiles = 32;
inline constexpr int kSm90SwapAbUnsplitStages = 16, kSm90SwapAbBk128Stages = 8;
inline constexpr int64_t kSm90SwapAbSplitMaxTiles = 12, kSm90SwapAbSplitMinK = 4096;
inline constexpr int kSm90SwapAbSplits = 4;
Sm90GemmConfig PickSm90SwapAbConfig(int64_t m, int64_t n, int64_t k, int64_t batch);
// Whether the heuristic swaps: M <= 32 with N >= 2048 and K >= 2048, or N in
// [768, 2048) and K >= 768 (the bk128 tiles). Against the unswapped heuristic of 8-stage
// 64x64 tiles the swapped form measured faster on every small_m shape of the H100 up to
// M = 64; at N = 768 or K = 768 its split bk64 form won on some shapes and lost on
// others, and the bk128 tiles were as fast or faster at N in {768, 1024, 1536}
// (M <= 32, K in {768, 3072, 4096}; a batch there with 32 tiles of N or more in all
// takes the 16-stage bk64 tile instead, which was measured from N = 2048 only).
// Against unsplit 12-stage 64x64 tiles the split form lost at M = 32 and 64 and tied
// at M = 16; the unsplit 16-stage form (PickSm90SwapAbConfig) beat them at M = 32
// (N, K in {3072, 4096}) and lost at M = 64. benchmarks/results/ has the runs.
inline constexpr int64_t kSm90SwapAbMaxM = 32, kSm90SwapAbMinN = 2048, kSm90SwapAbMinK = 2048;
inline constexpr int64_t kSm90SwapAbBk128MinN = 768, kSm90SwapAbBk128MinK = 768;
inline bool PreferSm90SwapAb(int64_t m, int64_t n, int64_t k) {
  if (m > kSm90SwapAbMaxM) return false;
  if (n >= kSm90SwapAbMinN) return k >= kSm90SwapAbMinK;
  return n >= kSm90SwapAbBk128MinN && k >= kSm90SwapAbBk128MinK;
}
// The share of the tile slots of ceil(tiles / sm_count) waves of `tile_rows` x
// `tile_cols` tiles over a rows x cols x batch output that lies inside the output.
double Sm90WaveUse(int64_t rows, int64_t cols, int64_t batch, int tile_rows, int tile_cols, int sm_count);
// A swapped tile (swap-AB: 64 x consumers rows of N, bn columns of M) in one wave that
// uses its slots better than the `unswapped` pick does: its n (bn, a multiple of 16
// from 64) fits C's M where the unswapped tiles' 64-column steps cannot, as cuBLAS's
// tiles do (128x80, 192x96, 128x160 in
// benchmarks/results/gemm_sm90_cublas_kernels_ncu_h100_2026-11-26e.csv). Candidates:
// one consumer up to n96 with >= 8 stages, two up to n256 and three up to n192 with >= 4,
// the most stages up to 10 that leave room for C's tile (the TMA store). Taken when
// K >= kSm90SwapWaveMinK, the unswapped pick is unsplit, and the best candidate's use
// (Sm90WaveUse) is at least kSm90SwapWaveMinUse and kSm90SwapWaveMargin above the
// unswapped pick's; ties go to the larger tile. nullopt otherwise.
inline constexpr int64_t kSm90SwapWaveMinK = 1024;
inline constexpr double kSm90SwapWaveMinUse = 0.85, kSm90SwapWaveMargin = 0.15;
std::optional<Sm90GemmConfig> PickSm90SwapWaveConfig(const Sm90GemmConfig& unswapped, int64_t m, int64_t n, int64_t k,
                                                     int64_t batch, int sm_count);
// The swapped tile in one wave with the best Sm90WaveUse over C [m, n] (ties: the larger
// tile) among PickSm90SwapWaveConfig's candidates, with that use; nullopt when none
// fits one wave (Sm90CandidateConfigs measures it too).
std::optional<std::pair<Sm90GemmConfig, double>> BestSm90SwapWaveTile(int64_t m, int64_t n, int64_t batch,
                                                                      int sm_count);
// "128x256 c2x1 s4" (cooperative: consumers x wg_m), "64x256 p2x1 s5" (ping-pong),
// "64x128 c1x1 s8 k6" (split-K in 6), "64x16 c1x1 s8 k4 swap" (swap-AB),
// "128x256 c2x1 s3 cl2" (clusters of 2 along M), "128x256 c2x1 s4 sk" (stream-K).
// "64x16 c1x1 s8 swap bk128" (128 k per stage). Optional tokens in that order.
std::string Sm90GemmConfigString(const Sm90GemmConfig& config);
absl::StatusOr<Sm90GemmConfig> ParseSm90GemmConfig(const std::string& text);

// OK when the sm90 family takes `node` (GenerateMatMulGroupSm90 succeeds), else
// Unimplemented with the reason (the caller then uses the sm_80 template).
absl::Status Sm90Eligible(const Node& node);
// OK when the sm90 family can run `node` swapped (config swap_ab): an Sm90Eligible
// matmul[+epilogue] group (no dual mainloop, no prologue) with A stored [M, K] (the
// narrow B' tile is then a K-major box; an M-major one would need a swizzle narrower
// than 128 bytes). Else Unimplemented with the reason (the unswapped form runs it).
absl::Status Sm90SwapAbEligible(const Node& node);
// One persistent launch (grid min(tiles, sm_count); clusters: 2 min(pairs of row
// tiles, sm_count / 2), B's K-major box half the tile's rows) with tensor maps for A and B,
// then A2 and B2 (dual), and for C when the epilogue stores through TMA (a 16-bit
// output with N % 8 == 0). Launch args: C, the prologue's side inputs, the epilogue's.
// Split-K (config split_k > 1, the heuristic's or forced): grid min(tiles * split_k,
// sm_count) and the workspace; InvalidArgument when a split would get no k tile or
// the scratch exceeds kGemmMaxScratchBytes. Swap-AB (config swap_ab, or the heuristic's
// where PreferSm90SwapAb and Sm90SwapAbEligible): tensor maps of B then A, no C
// map; a forced swap_ab config on a group it cannot take is InvalidArgument.
// Stream-K (config stream_k): grid and stream-K tiles of Sm90StreamK and the
// workspace, or the plain launch when the tiles fill whole waves.
absl::StatusOr<std::vector<KernelLaunch>> GenerateMatMulGroupSm90(const Node& node,
                                                                  const Sm90GemmConfig* config = nullptr,
                                                                  int sm_count = 132);
// Run-time rows (dynamic bundles, issue 34; gemm_sm90.cuh GEMM_DYNAMIC_M): C's rows as
// C code over kiln_dims, and the most rows the launch serves (its grid and workspace).
struct Sm90RunTimeRows {
  std::string code;
  int64_t max_m = 0;
};
// GenerateMatMulGroupSm90's launch of `config` with C's rows read at run time
// (dim_param): the tensor maps span the largest rows (the node's shapes), the grid and
// workspace serve max_m rows (swapped: C's rows are the kernel's columns);
// InvalidArgument for stream-K configs. The caller checks that the group reads the
// same way at every size (gemm_sm90_dynamic.cc).
absl::StatusOr<KernelLaunch> GenerateSm90RunTimeRows(const Node& node, const Sm90GemmConfig& config,
                                                     const Sm90RunTimeRows& rows, int sm_count = 132);
// gemm_sm90_dynamic.cc: a MatMul group of a dynamic graph whose rows vary (a token
// count) on the sm90 family with the rows read at run time, one launch per tile config
// (size variants: the heuristic's tile per range of rows, KernelLaunch::size_ranges of
// the rows' expression). Eligible: a fused group (Sm90Eligible) without prologue or
// second product, A stored [M, K], K, N and B fixed, a fixed batch only as
// fuse-siblings' stacked product, and epilogue operands that are rows broadcast over
// C's rows or laid out as C; Unimplemented naming the form otherwise (cuBLASLt then
// runs it, planned per size).
// `tuned`: a config measured for `tuned->rows` rows (the tuning database's at the opt
// sizes) that the window of rows holding them takes where the run-time-row kernel
// takes it (not stream-K), else the heuristic's.
struct Sm90TunedRows {
  int64_t rows = 0;
  Sm90GemmConfig config;
};
absl::Status DynamicSm90Eligible(const Node& node);
absl::StatusOr<std::vector<KernelLaunch>> GenerateDynamicMatMulGroupSm90(const Node& node, int sm_count = 132,
                                                                         const Sm90TunedRows* tuned = nullptr);
// The config GenerateMatMulGroupSm90 picks for `node` without one (the swap-AB rule,
// else PickSm90GemmConfig); Sm90Eligible's error otherwise. `note`, when given, is
// set to what the launch of that pick says of it: "heuristic, epilogue work: light".
absl::StatusOr<Sm90GemmConfig> HeuristicSm90GemmConfig(const Node& node, int sm_count = 132,
                                                       std::string* note = nullptr);
// The heuristic's config for `node` (an Sm90Eligible group, `plan` its
// PlanGemmForFamily) had C `rows` rows (swap-AB included), without stream-K, whose
// split is made for one tile count: the tile of a range of rows of a GEMM with
// run-time rows.
Sm90GemmConfig HeuristicSm90GemmConfigForRows(const Node& node, const GemmFamilyPlan& plan, int64_t rows,
                                              int sm_count = 132);
// Whether GenerateMatMulGroupSm90 takes `config` for `node`: its errors (the
// verifier, swap-AB eligibility, the splits' k tiles, the scratch cap), without
// generating the source.
absl::Status Sm90ConfigFits(const Node& node, const Sm90GemmConfig& config, int sm_count = 132);
// The configs `kiln compile --tune` measures for `node` on the sm90 family: the
// heuristic's first, then each tile of Sm90TileCosts (leaving out tiles at least twice
// the problem's M or N rounded up to 64), each 64x64 tile with the other ring depth,
// split-K forms of the cooperative tiles that leave more than half the SMs idle
// (PickSm90SplitK's count filling the SMs with 12 k tiles a split, half that, the count
// with kSm90TuneMinSplitKTiles a split, and 2), and for M <= 64 the swap-AB tile with 1
// to 4 splits. Each one GenerateMatMulGroupSm90 accepts, once; empty when the group is
// not Sm90Eligible.
std::vector<Sm90GemmConfig> Sm90CandidateConfigs(const Node& node, int sm_count = 132);
// The shortest splits `--tune` tries: 4 k tiles of 64 (K = 768 in 3), where the
// heuristic wants 12 (BERT's attention output at 128 tokens, 24 tiles of 64x64).
inline constexpr int kSm90TuneMinSplitKTiles = 4;
// The GEMM generator GenerateNodeKernels uses for MatMul groups: the sm90 family when
// `options.hopper` and Sm90Eligible, else the sm_80 template (GenerateMatMulGroup).
absl::StatusOr<std::vector<KernelLaunch>> GenerateGemm(const Node& node, const KernelOptions& options);

// The CUDA source of `static __device__ void name(d, a, desc_b)`: one
// `wgmma.mma_async.m64n<n>k16` (k8 for fp32 inputs, read as tf32) into n / 2 fp32
// accumulators per thread, `float (&d)[n / 2]` (or `float (&d)[n / 8][4]` with
// `fragments`: the n8 blocks of mma.sync's accumulator layout). A from a shared-memory
// descriptor (`unsigned long long desc_a`, M-major with trans_a) or, with
// `register_a`, from four registers (`const unsigned (&a)[4]`, K-major); B from a
// descriptor, K-major with trans_b (B stored [N, K]), else N-major. Both with
// 128-byte swizzle (wgmma_sm90.cuh's kiln_sm90_desc).
std::string WgmmaFunction(const std::string& name, int n, DType dtype, bool trans_a, bool trans_b,
                          bool register_a = false, bool fragments = false);

}  // namespace kiln::codegen::ops
