// The SIMT fp32 GEMM template's tile configs (codegen/templates/gemm_simt.cuh):
// shared memory and register estimates, verification, the shape heuristic and the
// candidates --tune measures. The config type and its text form are the sm_80
// template's (codegen/ops/gemm_config.cc), which dispatches here for variant.simt.
#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"

namespace kiln::codegen::ops {
namespace {

constexpr int kPad = 4;  // floats after each shared-memory row (SIMT_PAD)
// Registers beyond the estimate's (addresses, indices, the epilogue), so that a block
// of THREADS x (estimate + this) fits an SM's register file.
constexpr int kSimtOtherRegisters = 40;
// The same under an occupancy target (" oN"), where ptxas packs tighter: the plain
// 128x128x8 w2x4 s4 kernel (an estimate of 104) fits its cap of 128 without spills.
constexpr int kSimtCappedOtherRegisters = 24;
// Shared memory of an SM that CTAs may share (sm_80 164 KiB, sm_90 227 KiB: the smaller).
constexpr int64_t kSimtSmSharedBytes = 164 * 1024;

int Threads(const GemmConfig& c) { return c.warps_m * c.warps_n * 32; }

// Output tiles of `c` over an m x n result, times the batch.
int64_t Tiles(const GemmConfig& c, int64_t m, int64_t n, int64_t batch) {
  return ((m + c.bm - 1) / c.bm) * ((n + c.bn - 1) / c.bn) * batch;
}

// Registers of one operand's staged k tile (kiln_simt_tile): its elements per thread.
int Staged(const GemmConfig& c, int tile_elements) { return tile_elements / Threads(c); }

// The pipeline's A rows in shared memory (SIMT_A_PITCH): BK floats and 4 more where
// that makes an odd number of 16-byte units.
int SimtAPitch(int bk) { return bk + ((bk / 4) % 2 == 0 ? 4 : 0); }

// Why the cp.async pipeline (STAGES > 2) cannot copy `variant`'s operands ("" when it can).
std::string PipelineProblem(const GemmVariant& variant) {
  for (const GemmMainloop& l : variant.mainloops) {
    if (l.a.trans || l.b.trans) return "A stored [K, M] or B stored [N, K]";
    if (l.a.load != GemmLoad::kAsync || l.b.load != GemmLoad::kAsync) {
      return "an operand with a prologue, not fp32, or with rows not a multiple of 4 floats";
    }
  }
  return "";
}

// Why the k-major pipeline (" t") cannot copy `variant`'s operands ("" when it can).
std::string KMajorProblem(const GemmVariant& variant) {
  for (const GemmMainloop& l : variant.mainloops) {
    // Any layout, but fp32 rows of a multiple of 4 floats without a prologue (kAsync):
    // a staged operand may be fp16, bf16 or have a prologue.
    if (l.a.load != GemmLoad::kAsync || l.b.load != GemmLoad::kAsync) {
      return "an operand with a prologue, not fp32, or with rows not a multiple of 4 floats";
    }
  }
  return "";
}

}  // namespace

int64_t SimtGemmSharedBytes(const GemmConfig& c, const GemmVariant& variant) {
  (void)variant;  // both mainloops use the same buffers
  const int64_t b_tile = static_cast<int64_t>(c.bk) * (c.bn + kPad);
  if (c.kmajor) return int64_t{c.stages} * (static_cast<int64_t>(c.bk) * (c.bm + kPad) + b_tile) * 4;
  if (c.stages > 2) return int64_t{c.stages} * (static_cast<int64_t>(c.bm) * SimtAPitch(c.bk) + b_tile) * 4;
  return int64_t{2} * (static_cast<int64_t>(c.bk) * (c.bm + kPad) + b_tile) * 4;
}

int SimtGemmRegisterEstimate(const GemmConfig& c, const GemmVariant& variant) {
  if (c.warps_m <= 0 || c.warps_n <= 0) return 0;
  const int tm = c.bm / c.warps_m / 8, cols = c.bn / c.warps_n / 4;  // rows and columns of a lane
  const int extra = variant.mainloops.size() > 1 ? kGemmSecondMainloopRegisters : 0;
  // The k-major pipeline: no staged loads, two k's of fragments.
  if (c.kmajor) return tm * cols + 2 * (tm + cols) + extra;
  // The pipeline holds no staged loads but 4 k's of A per row (one float4 each).
  if (c.stages > 2) return tm * cols + 4 * tm + cols + extra;
  const int staged = Staged(c, c.bm * c.bk) + Staged(c, c.bn * c.bk);
  return tm * cols + tm + cols + staged + extra;
}

absl::Status VerifySimtGemmConfig(const GemmConfig& c, const GemmVariant& variant) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("SIMT GEMM tile config ", GemmConfigString(c), ": ", why));
  };
  if (c.bm <= 0 || c.bn <= 0 || c.bk <= 0 || c.warps_m <= 0 || c.warps_n <= 0) return bad("non-positive size");
  const int warp_rows = c.bm % c.warps_m == 0 ? c.bm / c.warps_m : 0;
  if (warp_rows != 32 && warp_rows != 64 && !(c.kmajor && (warp_rows == 8 || warp_rows == 16))) {
    return bad(
        "a warp tile must have 32 or 64 rows (BM / WARPS_M: 8 lanes of 4 or 8 rows), or 8 or 16 on the k-major "
        "pipeline (t)");
  }
  if (c.bn % (16 * c.warps_n) != 0) return bad("BN must be a multiple of 16 * WARPS_N (4 lanes of 4 columns)");
  if (c.bk % 4 != 0) return bad("BK must be a multiple of 4 (16-byte loads along K)");
  if (c.stages < 2 || c.stages > 4) {
    return bad("STAGES must be 2 (register-staged double buffer) or 3 to 4 (the cp.async pipeline)");
  }
  if (c.kmajor) {
    if (const std::string why = KMajorProblem(variant); !why.empty()) {
      return bad(
          absl::StrCat("the k-major pipeline (t) takes fp32 operands without a prologue, rows a multiple of "
                       "4 floats; this GEMM has ",
                       why, " (drop the t)"));
    }
  } else if (c.stages > 2) {
    if (const std::string why = PipelineProblem(variant); !why.empty()) {
      return bad(
          absl::StrCat("the cp.async pipeline (STAGES > 2) takes fp32 A [M, K] and B [K, N] without a "
                       "prologue, rows a multiple of 4 floats; this GEMM has ",
                       why, " (use STAGES 2)"));
    }
  }
  if (variant.mainloops.empty() || variant.mainloops.size() > 2) {
    return bad(absl::StrCat(variant.mainloops.size(), " mainloops (the template has one or two)"));
  }
  if (const std::string split = SplitKProblem(c, variant); !split.empty()) return bad(split);
  const int threads = Threads(c);
  if (threads > 1024) return bad(absl::StrCat(threads, " threads per block (> 1024)"));
  if ((c.bm * c.bk / 4) % threads != 0 || (c.bn * c.bk / 4) % threads != 0) {
    return bad(
        absl::StrCat("a k tile of A or B is not a whole number of 16-byte loads per thread (", threads, " threads)"));
  }
  if (c.kmajor) {
    // kiln_simt_kcopy: a stored row of a k tile (BK elements, or BM / 4 and BN / 4
    // 16-byte chunks) and the threads divide one another.
    for (int per_row : {c.bk, c.bm / 4, c.bn / 4}) {
      if (threads % per_row != 0 && per_row % threads != 0) {
        return bad(absl::StrCat("the k-major pipeline copies rows of ", per_row, " items, which do not divide ",
                                threads, " threads or split into them"));
      }
    }
  }
  const int64_t smem = SimtGemmSharedBytes(c, variant);
  if (smem > kGemmMaxSharedBytes) {
    return bad(absl::StrCat(smem, " bytes of shared memory (> ", kGemmMaxSharedBytes, ", 99 KiB)"));
  }
  const int regs = SimtGemmRegisterEstimate(c, variant);
  if (regs > kSimtRegisterBudget) {
    return bad(absl::StrCat(regs, " registers per thread for accumulators, fragments and staged loads (> ",
                            kSimtRegisterBudget, ")"));
  }
  if (threads * (regs + kSimtOtherRegisters) > 65536) {
    return bad(absl::StrCat(threads, " threads of about ", regs + kSimtOtherRegisters,
                            " registers each exceed an SM's 65536"));
  }
  if (c.min_ctas != 1) {
    // ptxas then caps a thread at 65536 / (threads * N) registers, the accumulators
    // and fragments the estimate counts plus kSimtCappedOtherRegisters.
    if (c.min_ctas < 1 || c.min_ctas > 4) return bad("an occupancy target (oN) must be 1 to 4 CTAs per SM");
    const int cap = std::min(255, 65536 / (threads * c.min_ctas) / 8 * 8);
    if (regs + kSimtCappedOtherRegisters > cap) {
      return bad(absl::StrCat(c.min_ctas, " CTAs of ", threads, " threads an SM cap a thread at ", cap,
                              " registers; its accumulators, fragments and staged loads take about ", regs, " and ",
                              kSimtCappedOtherRegisters, " more hold addresses and indices"));
    }
    if (smem * c.min_ctas > kSimtSmSharedBytes) {
      return bad(
          absl::StrCat(c.min_ctas, " CTAs of ", smem, " bytes of shared memory exceed an SM's ", kSimtSmSharedBytes));
    }
  }
  return absl::OkStatus();
}

namespace {

// Small grids on the k-major pipeline: 64x64x16 (4 x 8 a lane), else 64x32x16 (4 x 4),
// 3 stages, K split in 1, 2, 4 or 8 keeping kSimtMinKMajorSplitTiles k tiles a split:
// the first tile and split whose grid reaches 1.9 CTAs an SM, else the 64x32 tile with
// its deepest split. Not with two mainloops (no split) or operands it cannot copy.
std::optional<GemmConfig> PickSimtSmallGrid(int64_t m, int64_t n, int64_t k, int64_t batch, const GemmVariant& variant,
                                            int sm_count) {
  if (variant.mainloops.size() != 1) return std::nullopt;
  std::optional<GemmConfig> deepest;
  for (GemmConfig c : {GemmConfig{64, 64, 16, 2, 2, 3, 1, 1, true}, GemmConfig{64, 32, 16, 2, 2, 3, 1, 1, true}}) {
    const int64_t tiles = Tiles(c, m, n, batch);
    const int64_t k_tiles = (k + c.bk - 1) / c.bk;
    for (int s : {1, 2, 4, 8}) {
      if (s > 1 && k_tiles / s < kSimtMinKMajorSplitTiles) break;
      GemmConfig split = c;
      split.split_k = s;
      if (!VerifySimtGemmConfig(split, variant).ok()) break;
      deepest = split;
      if (10 * tiles * s >= 19 * static_cast<int64_t>(sm_count)) return split;
    }
  }
  return deepest;
}

// `tile` split in the most of `splits` (ascending) that keeps `min_k_tiles` k tiles a
// split and `tiles` x splits within `max_ctas`, where the verifier takes it; else unsplit.
GemmConfig DeepestSplit(const GemmConfig& tile, int64_t tiles, int64_t k, std::initializer_list<int> splits,
                        int min_k_tiles, int64_t max_ctas, const GemmVariant& variant) {
  const int64_t k_tiles = (k + tile.bk - 1) / tile.bk;
  GemmConfig best = tile;
  for (int s : splits) {
    if (k_tiles / s < min_k_tiles || tiles * s > max_ctas) break;
    GemmConfig c = tile;
    c.split_k = s;
    if (!VerifySimtGemmConfig(c, variant).ok()) break;
    best = c;
  }
  return best;
}

// A few rows (M <= 32, one mainloop) on the k-major pipeline's short warp tiles:
// kSimtFewRows8Config up to 8 rows, else kSimtFewRows16Config, K split in the most of
// 1, 2, 4, 8 and 16 that keeps kSimtMinKMajorSplitTiles k tiles a split and the grid
// within three CTAs an SM (nullopt where that cannot copy the operands).
std::optional<GemmConfig> PickSimtFewRows(int64_t m, int64_t n, int64_t k, int64_t batch, const GemmVariant& variant,
                                          int sm_count) {
  if (m > 32 || variant.mainloops.size() != 1) return std::nullopt;
  const GemmConfig& tile = m <= 8 ? kSimtFewRows8Config : kSimtFewRows16Config;
  if (!VerifySimtGemmConfig(tile, variant).ok()) return std::nullopt;
  return DeepestSplit(tile, Tiles(tile, m, n, batch), k, {2, 4, 8, 16}, kSimtMinKMajorSplitTiles,
                      3 * static_cast<int64_t>(sm_count), variant);
}

}  // namespace

GemmConfig PickSimtGemmConfig(int64_t m, int64_t n, int64_t k, int64_t batch, const GemmVariant& variant,
                              int sm_count) {
  if (sm_count <= 0) sm_count = 132;
  auto tiles = [&](const GemmConfig& c) { return Tiles(c, m, n, batch); };
  // Whether `c` fits the operands and has `tenths` / 10 tiles an SM.
  auto fills = [&](const GemmConfig& c, int tenths) {
    return 10 * tiles(c) >= tenths * static_cast<int64_t>(sm_count) && VerifySimtGemmConfig(c, variant).ok();
  };
  if (std::optional<GemmConfig> few = PickSimtFewRows(m, n, k, batch, variant, sm_count)) return *few;
  // The k-major pipeline's tiles (H100 sweep with each mainloop's FFMA order:
  // benchmarks/results/gemm_simt_kmajor_tiles_h100_2026-12-06.txt). The 4-warp 8 x 16
  // tile ran B [N, K] 3-5% faster than the 8-warp 8 x 8 one from 3.9 tiles an SM and
  // 20% slower at 2.9 (two CTAs an SM, a grid of 1.45 waves); with B [K, N] the two
  // ran within 1% from 3.9 and the 8-warp tile 2.7% ahead at 4092^3.
  const bool b_nk =
      std::any_of(variant.mainloops.begin(), variant.mainloops.end(), [](const GemmMainloop& l) { return l.b.trans; });
  if (b_nk && fills(kSimtLargeNkConfig, 35)) return kSimtLargeNkConfig;
  if (fills(kSimtLargeConfig, 19)) return kSimtLargeConfig;
  if (fills(kSimtMidConfig, 19)) return kSimtMidConfig;
  // Mid-sized grids: kSimtSplitConfig with K split so that the grid reaches about four
  // CTAs an SM, keeping at least kSimtMinSplitConfigTiles k tiles a split, where that
  // grid reaches 1.9 CTAs an SM; smaller ones on the small k-major tiles
  // (PickSimtSmallGrid), or for a dual kernel this grid from 0.7 CTAs an SM.
  if (VerifySimtGemmConfig(kSimtSplitConfig, variant).ok()) {
    const int64_t t = tiles(kSimtSplitConfig);
    const GemmConfig split = DeepestSplit(kSimtSplitConfig, t, k, {2, 4}, kSimtMinSplitConfigTiles,
                                          4 * static_cast<int64_t>(sm_count), variant);
    const int64_t ctas = t * split.split_k;
    if (10 * ctas >= 19 * static_cast<int64_t>(sm_count)) return split;
    if (std::optional<GemmConfig> small = PickSimtSmallGrid(m, n, k, batch, variant, sm_count)) return *small;
    if (10 * ctas >= 7 * static_cast<int64_t>(sm_count)) return split;
  }
  // The register-staged tiles (any operands; STAGES 2).
  const GemmConfig mid{128, 64, 16, 2, 2, 2};
  struct Rung {
    GemmConfig config;
    int tenths_per_sm;  // the tiles per SM it needs, times 10
  };
  const Rung ladder[] = {
      {{128, 128, 8, 2, 2, 2}, 19}, {mid, 19}, {{64, 64, 32, 2, 2, 2}, 19}, {{64, 32, 16, 2, 2, 2}, 19}};
  const GemmConfig* last = nullptr;
  for (const Rung& r : ladder) {
    const GemmConfig& c = r.config;
    if (!VerifySimtGemmConfig(c, variant).ok()) continue;
    last = &c;
    if (10 * tiles(c) >= r.tenths_per_sm * static_cast<int64_t>(sm_count)) return c;
  }
  GemmConfig c = last != nullptr ? *last : ladder[3].config;
  if (variant.mainloops.size() != 1) return c;
  // Split K over more CTAs, up to three per SM, keeping at least kSimtMinSplitKTiles k
  // tiles per split.
  GemmConfig split = c;
  split.split_k = PickGemmSplitK(c, m, n, k, batch, 3 * sm_count, kSimtMinSplitKTiles);
  return VerifySimtGemmConfig(split, variant).ok() ? split : c;
}

std::vector<GemmConfig> SimtGemmCandidateConfigs(int64_t m, int64_t n, int64_t k, int64_t batch,
                                                 const GemmVariant& variant, int sm_count) {
  if (sm_count <= 0) sm_count = 132;
  // Then four of the cp.async pipeline's (verified away where it cannot copy the
  // operands), the register-staged 8-warp tile in two CTAs an SM and the k-major
  // pipeline's: the heuristic's four, the 8-warp 8 x 16-a-lane tile, two small ones and
  // the two few-rows tiles.
  static const GemmConfig kPool[] = {{128, 128, 8, 2, 2, 2},
                                     {128, 128, 16, 2, 4, 2},
                                     {128, 128, 16, 4, 2, 2},
                                     {128, 256, 16, 2, 4, 2},
                                     {256, 128, 16, 4, 2, 2},
                                     {128, 64, 16, 2, 2, 2},
                                     {64, 128, 16, 2, 2, 2},
                                     {128, 64, 32, 2, 2, 2},
                                     {64, 64, 16, 2, 2, 2},
                                     {64, 64, 32, 2, 2, 2},
                                     {64, 32, 16, 2, 2, 2},
                                     {32, 64, 16, 1, 2, 2},
                                     {128, 128, 8, 2, 2, 3},
                                     {128, 128, 8, 2, 4, 4},
                                     {128, 64, 16, 2, 2, 3},
                                     {64, 32, 16, 2, 2, 4},
                                     {128, 128, 16, 2, 4, 2, 1, 2},
                                     kSimtLargeConfig,
                                     kSimtLargeNkConfig,
                                     kSimtMidConfig,
                                     kSimtSplitConfig,
                                     {128, 256, 8, 2, 4, 4, 1, 1, true},
                                     {64, 64, 16, 2, 2, 3, 1, 1, true},
                                     {64, 32, 16, 2, 2, 3, 1, 1, true},
                                     kSimtFewRows8Config,
                                     kSimtFewRows16Config};
  const int64_t m16 = (m + 15) / 16 * 16, n16 = (n + 15) / 16 * 16;
  std::vector<GemmConfig> out = {PickSimtGemmConfig(m, n, k, batch, variant, sm_count)};
  for (const GemmConfig& c : kPool) {
    if (c.bm >= 2 * m16 || c.bn >= 2 * n16) continue;
    if (!VerifySimtGemmConfig(c, variant).ok()) continue;
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  if (variant.mainloops.size() != 1) return out;
  // Split-K forms of the unsplit candidates that leave SMs idle.
  const size_t unsplit = out.size();
  int added = 0;
  for (size_t i = 0; i < unsplit && added < kGemmMaxSplitCandidates; ++i) {
    if (out[i].split_k != 1) continue;
    GemmConfig c = out[i];
    c.split_k = PickGemmSplitK(c, m, n, k, batch, 3 * sm_count, kSimtMinSplitKTiles / 2);
    if (c.split_k < 2 || !VerifySimtGemmConfig(c, variant).ok()) continue;
    if (std::find(out.begin(), out.end(), c) != out.end()) continue;
    out.push_back(c);
    ++added;
  }
  return out;
}

}  // namespace kiln::codegen::ops
