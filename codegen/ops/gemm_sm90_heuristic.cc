// The Hopper GEMM family's tile heuristic (codegen/ops/gemm_sm90.h): the fitted tile
// costs, the split-K and stream-K splits, the swap-AB pickers and PickSm90GemmConfig.
#include <algorithm>
#include <optional>
#include <utility>

#include "codegen/ops/families.h"
#include "codegen/ops/gemm_sm90.h"

namespace kiln::codegen::ops {

const char* EpilogueWorkName(EpilogueWork work) {
  switch (work) {
    case EpilogueWork::kNone:
      return "none";
    case EpilogueWork::kLight:
      return "light";
    case EpilogueWork::kSpecial:
      return "special function";
  }
  return "?";
}

namespace {
Sm90GemmConfig PickSm90TileConfig(int64_t m, int64_t n, int64_t k, int64_t batch, int sm_count, bool register_a,
                                  EpilogueWork epilogue);
}  // namespace

double Sm90TileCost::PredictUs(int64_t m, int64_t n, int64_t k, int64_t batch, int sm_count,
                               EpilogueWork epilogue) const {
  if (sm_count <= 0) sm_count = 132;
  const Fit& f = fits[static_cast<int>(epilogue)];
  const int64_t tiles =
      ((m + config.bm - 1) / config.bm) * ((n + config.bn - 1) / config.bn) * std::max<int64_t>(batch, 1);
  const int64_t waves = (tiles + sm_count - 1) / sm_count;
  return f.fixed_us + static_cast<double>(waves) * (f.wave_us + f.wave_us_per_k * static_cast<double>(k));
}

absl::Span<const Sm90TileCost> Sm90TileCosts() {
  // H100 80GB HBM3, 132 SMs, kiln_gemm_bench --family sm90 --idioms gemm,bias_relu,bias_gelu
  // --reps 10 --sm90-config C over --set squares,transformer,random, every config in one
  // session (benchmarks/fit_sm90_tile_costs.py): one fit per EpilogueWork, from gemm
  // (kNone), bias+ReLU (kLight) and bias+GELU(tanh) (kSpecial). The first ten rows are
  // fitted to benchmarks/results/gemm_sm90_epilogue_tile_sweep_h100_2026-11-23e.csv.gz (its
  // first round); the two 64-row ping-pong rows to gemm_sm90_tile_sweep_h100_2026-11-27.csv.gz.
  // A refit of all twelve to the later sweep (one round) moved established picks
  // (128x192 -> 192x128, 128x128 ping-pong -> 128x256 on some shapes) that then ran
  // slower in an A/B run (gemm_sm90_full_refit_ab_h100_2026-11-27.csv.gz), where adding
  // the two rows alone lost nowhere on a set (gemm_sm90_pingpong64_ab_h100_2026-11-27.csv.gz).
  // The epilogue shows in the per-wave term (wave_us, below): it grows steeply with the
  // epilogue's work for 128x256, where both consumers run it while the tensor cores
  // wait, and far less for the 128x128 ping-pong tile, whose consumers overlap it with
  // each other's mainloop. The 64-row ping-pong tiles (each consumer warpgroup its own
  // 64xBN tiles, the 64x64 one with a 12-stage ring) win where there are a few tiles
  // per SM: in the A/B run 512x1024x4096 ran faster with them, and so did the (shape,
  // idiom) rows that moved to them from the cooperative 64x64 s8 tile, taken together.
  // 128x256 s4 and 64x256 s5 store C in two chunks (measured faster than s3 and s4);
  // the 192-row tiles of three consumers fill one wave where the others leave most of a
  // second one idle (1152x3968x3200 among the shapes that ran faster on them).
  // Left out: 64x256 and 64x192 ping-pong (the worst fits, and the shapes they took ran
  // slower, 64x192 p2x1 at 640x2176x3200 among them), and configs that no shape wanted
  // by a clear margin: 256x128, 128x64, the same tiles with fewer stages, and clusters
  // (cl2 ran a little slower than the same tile unclustered). benchmarks/results/ has
  // the runs.
  static const Sm90TileCost kCosts[] = {
      {{128, 256, 2, 1, 4}, {{4.927, 2.093, 0.009675}, {4.331, 3.548, 0.009677}, {4.819, 4.188, 0.009661}}},
      {{128, 192, 2, 1, 5}, {{5.083, 1.689, 0.007442}, {4.972, 2.373, 0.007425}, {5.295, 3.002, 0.007442}}},
      {{128, 128, 2, 1, 5}, {{5.626, 0.6991, 0.005271}, {4.84, 1.57, 0.005279}, {5.279, 1.985, 0.005308}}},
      {{64, 256, 1, 1, 5}, {{5.324, 1.043, 0.005692}, {4.996, 1.853, 0.005667}, {5.533, 2.534, 0.00576}}},
      {{64, 192, 1, 1, 6}, {{5.082, 0.5544, 0.004867}, {4.899, 1.271, 0.004788}, {5.624, 1.656, 0.004849}}},
      {{64, 128, 1, 1, 8}, {{5.423, 0.2577, 0.003618}, {4.768, 0.9177, 0.003624}, {5.478, 1.236, 0.003576}}},
      {{64, 64, 1, 1, 8}, {{5.613, 0.1769, 0.002569}, {4.957, 0.6533, 0.002616}, {5.602, 0.8152, 0.002635}}},
      {{192, 192, 3, 1, 4}, {{4.76, 2.358, 0.01086}, {5.091, 3.734, 0.01104}, {5.018, 4.631, 0.011}}},
      {{192, 128, 3, 1, 5}, {{5.168, 1.484, 0.007536}, {4.335, 2.312, 0.007641}, {4.823, 2.961, 0.007597}}},
      {{128, 128, 2, 2, 5, true}, {{5.668, 0.7095, 0.005336}, {5.632, 0.7837, 0.005345}, {6.504, 1.116, 0.00536}}},
      {{64, 64, 2, 1, 12, true}, {{4.613, 0.06634, 0.002586}, {4.763, 0.136, 0.002567}, {4.949, 0.221, 0.002524}}},
      {{64, 128, 2, 1, 8, true}, {{4.485, 0.326, 0.003601}, {4.72, 0.3583, 0.003598}, {5.026, 0.4934, 0.003559}}},
  };
  return kCosts;
}

Sm90StreamKSplit Sm90StreamK(int64_t tiles, int64_t k_tiles, int sm_count) {
  if (sm_count <= 0) sm_count = 132;
  Sm90StreamKSplit split;
  if (tiles <= 0 || k_tiles <= 0) return split;
  // The data-parallel tiles (the rest) fill whole waves of sm_count CTAs.
  split.sk_tiles = tiles < sm_count        ? tiles
                   : tiles % sm_count == 0 ? 0
                   : tiles < 2 * sm_count  ? tiles
                                           : sm_count + tiles % sm_count;
  split.grid = std::min<int64_t>(split.sk_tiles > 0 ? split.sk_tiles * k_tiles : tiles, sm_count);
  return split;
}

int PickSm90SplitK(const Sm90GemmConfig& tile, int64_t m, int64_t n, int64_t k, int64_t batch, int sm_count,
                   int min_k_tiles, int max_units, int max_splits) {
  if (sm_count <= 0) sm_count = 132;
  // At most half the SMs' worth of units by default: the last split's reduction (S
  // partials read back by one warpgroup) grows with S.
  if (max_units <= 0) max_units = sm_count / 2;
  if (tile.pingpong || tile.bm <= 0 || tile.bn <= 0 || m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 1;
  const int64_t tiles = ((m + tile.bm - 1) / tile.bm) * ((n + tile.bn - 1) / tile.bn) * batch;
  const int64_t k_tiles = (k + tile.bk - 1) / tile.bk;
  if (2 * tiles > max_units) return 1;
  if (max_splits <= 0 || max_splits > kGemmMaxSplitK) max_splits = kGemmMaxSplitK;
  int64_t split = std::min<int64_t>({max_units / tiles, k_tiles / std::max(min_k_tiles, 1), max_splits});
  if (split < 2) return 1;
  Sm90GemmConfig c = tile;
  c.split_k = static_cast<int>(FewestSplits(k_tiles, split));
  return c.split_k >= 2 && VerifySm90GemmConfig(c).ok() ? c.split_k : 1;
}

namespace {
// The most stages in [2, most] with which `c` verifies and, with `c_tile`, keeps C's
// tile in shared memory beside the ring (swapped tiles: the TMA store); 0 when none.
int MostSm90Stages(Sm90GemmConfig c, int most, bool c_tile) {
  for (c.stages = most; c.stages >= 2; --c.stages) {
    if (VerifySm90GemmConfig(c).ok() && (!c_tile || Sm90GemmSharedBytes(c, true) > Sm90GemmSharedBytes(c, false))) {
      return c.stages;
    }
  }
  return 0;
}
}  // namespace

Sm90GemmConfig PickSm90SwapAbConfig(int64_t m, int64_t n, int64_t k, int64_t batch) {
  Sm90GemmConfig c{64, 8, 1, 1, kSm90SwapAbUnsplitStages};
  c.swap_ab = true;
  c.bn = static_cast<int>(std::clamp<int64_t>((m + 7) / 8 * 8, 8, 256));
  const int64_t row_tiles = ((n + c.bm - 1) / c.bm) * std::max<int64_t>(batch, 1);
  // Enough tiles of N to stream the weight from that many SMs: unsplit, bn = M rounded
  // up to 8, the deepest ring that fits (kSm90SwapAbUnsplitStages).
  if (row_tiles >= kSm90SwapAbUnsplitMinTiles) {
    c.stages = std::max(MostSm90Stages(c, kSm90SwapAbUnsplitStages, /*c_tile=*/false), 2);
    return c;
  }
  // Fewer: each SM's pull bounds the stream, and 128 k per stage lifts it.
  c.bk = 128;
  if (row_tiles <= kSm90SwapAbSplitMaxTiles && k >= kSm90SwapAbSplitMinK) {
    c.bn = static_cast<int>(std::clamp<int64_t>((m + 15) / 16 * 16, 16, 256));
    c.split_k = kSm90SwapAbSplits;
  }
  c.stages = std::max(MostSm90Stages(c, kSm90SwapAbBk128Stages, /*c_tile=*/false), 2);
  return c;
}

double Sm90WaveUse(int64_t rows, int64_t cols, int64_t batch, int tile_rows, int tile_cols, int sm_count) {
  if (sm_count <= 0) sm_count = 132;
  if (rows <= 0 || cols <= 0 || tile_rows <= 0 || tile_cols <= 0) return 0;
  batch = std::max<int64_t>(batch, 1);
  const int64_t tiles = ((rows + tile_rows - 1) / tile_rows) * ((cols + tile_cols - 1) / tile_cols) * batch;
  const int64_t waves = (tiles + sm_count - 1) / sm_count;
  return static_cast<double>(rows) * static_cast<double>(cols) * static_cast<double>(batch) /
         (static_cast<double>(waves) * sm_count * tile_rows * tile_cols);
}

std::optional<std::pair<Sm90GemmConfig, double>> BestSm90SwapWaveTile(int64_t m, int64_t n, int64_t batch,
                                                                      int sm_count) {
  std::optional<std::pair<Sm90GemmConfig, double>> best;
  for (int consumers = 1; consumers <= 3; ++consumers) {
    // n from 64: a wgmma m64nNk16 reads 2 KiB of A and 32 N bytes of B from shared
    // memory in about N / 2 cycles, over the 128 bytes a cycle shared memory gives
    // below n64. One consumer only up to n96 (the measured form; wider n is what the
    // unswapped 64-row tiles are for).
    const int max_bn = consumers == 1 ? 96 : consumers == 2 ? 256 : 192;
    for (int bn = 64; bn <= max_bn; bn += 16) {
      Sm90GemmConfig c{64 * consumers, bn, consumers, 1, 2};
      c.swap_ab = true;
      const int64_t tiles = ((n + c.bm - 1) / c.bm) * ((m + bn - 1) / bn) * std::max<int64_t>(batch, 1);
      if (tiles > sm_count) continue;
      // The most stages up to 10 with C's tile beside the ring (the TMA store).
      c.stages = MostSm90Stages(c, 10, /*c_tile=*/true);
      if (c.stages < (consumers == 1 ? 8 : 4)) continue;
      const double u = Sm90WaveUse(n, m, batch, c.bm, c.bn, sm_count);
      if (!best || u > best->second + 1e-9 ||
          (u > best->second - 1e-9 && c.bm * c.bn > best->first.bm * best->first.bn)) {
        best = std::make_pair(c, u);
      }
    }
  }
  return best;
}

std::optional<Sm90GemmConfig> PickSm90SwapWaveConfig(const Sm90GemmConfig& unswapped, int64_t m, int64_t n, int64_t k,
                                                     int64_t batch, int sm_count) {
  if (sm_count <= 0) sm_count = 132;
  if (unswapped.swap_ab || unswapped.split_k > 1 || unswapped.stream_k || k < kSm90SwapWaveMinK) return std::nullopt;
  const std::optional<std::pair<Sm90GemmConfig, double>> best = BestSm90SwapWaveTile(m, n, batch, sm_count);
  const double use = Sm90WaveUse(m, n, batch, unswapped.bm, unswapped.bn, sm_count);
  if (!best || best->second < kSm90SwapWaveMinUse || best->second < use + kSm90SwapWaveMargin) return std::nullopt;
  return best->first;
}

Sm90GemmConfig PickSm90GemmConfig(int64_t m, int64_t n, int64_t k, int64_t batch, int sm_count, bool register_a,
                                  EpilogueWork epilogue) {
  if (sm_count <= 0) sm_count = 132;
  Sm90GemmConfig c = PickSm90TileConfig(m, n, k, batch, sm_count, register_a, epilogue);
  // The few-tiles rule's 64x64 tiles split until the units fill the SMs, in at most
  // kSm90SmallTileMaxSplitK splits of at least kSm90SmallTileMinSplitKTiles k tiles:
  // their partials are 16 KiB, and on the H100 4 splits of 12-16 k tiles beat 2 or 3
  // (M = 16..128 at N = 768..1024, 1024x128x3328) where 5 splits of 13 lost to 4 of 16
  // (M <= 64, N = 768, K = 4096); past kSm90SmallTileMaxSplitTiles tiles they stay
  // unsplit (gemm_sm90.h says why; benchmarks/results/ has the runs). The other tiles
  // keep half the SMs.
  if (register_a || c.bm != 64 || c.bn != 64) {
    c.split_k = PickSm90SplitK(c, m, n, k, batch, sm_count);
    return c;
  }
  if (((m + 63) / 64) * ((n + 63) / 64) * batch <= kSm90SmallTileMaxSplitTiles) {
    c.split_k =
        PickSm90SplitK(c, m, n, k, batch, sm_count, kSm90SmallTileMinSplitKTiles, sm_count, kSm90SmallTileMaxSplitK);
  }
  if (c.split_k == 1 && k >= kSm90SmallTileDeepRingMinK &&
      (m <= kSm90SmallTileDeepRingMaxM || n <= kSm90SmallTileDeepRingMaxN)) {
    c.stages = kSm90SmallTileDeepRingStages;
  }
  return c;
}

std::optional<Sm90GemmConfig> CheapestSm90Tile(int64_t m, int64_t n, int64_t k, int64_t batch, int sm_count,
                                               EpilogueWork epilogue,
                                               absl::FunctionRef<bool(const Sm90GemmConfig&)> take) {
  const Sm90TileCost* best = nullptr;
  double best_us = 0;
  for (const Sm90TileCost& cost : Sm90TileCosts()) {
    if (!take(cost.config)) continue;
    const double us = cost.PredictUs(m, n, k, batch, sm_count, epilogue);
    if (best == nullptr || us < best_us) best = &cost, best_us = us;
  }
  if (best == nullptr) return std::nullopt;
  return best->config;
}

namespace {

// The tile shape (unsplit).
Sm90GemmConfig PickSm90TileConfig(int64_t m, int64_t n, int64_t k, int64_t batch, int sm_count, bool register_a,
                                  EpilogueWork epilogue) {
  // Short K over many rows (gemm_sm90.h, kSm90ShortK): 128-row tiles, 64 wide where
  // N fits in 64.
  if (k <= kSm90ShortK && ((m + 127) / 128) * ((n + 127) / 128) * batch >= kSm90ShortKMinWaves * sm_count) {
    if (n <= 64) return Sm90GemmConfig{128, 64, 2, 1, 4};
    if (!register_a) return Sm90GemmConfig{128, 128, 2, 2, 4, true};
  }
  if (register_a) {
    // A through registers (a prologue): the consumers' ldmatrix + prologue + register
    // wgmma keeps up with the tensor cores when two or three consumer warpgroups share
    // a tile (one's prologue overlaps the others' wgmmas) and never in ping-pong (one
    // consumer's mainloop at a time). H100 measurements (relu_gemm; benchmarks/results/
    // has the runs): 64x128 tiles while they fit in one wave, else the cost model's pick
    // among the cooperative configs measured this way: 128x256 s4, 128x128 s5 (stage
    // counts measured too) and the 192-row tiles, which ran faster than the
    // 128x256-by-waves / 128x128 rule before them on the random set, most where they
    // fill one wave.
    if (((m + 63) / 64) * ((n + 127) / 128) * batch <= sm_count) return Sm90GemmConfig{64, 128, 1, 1, 8};
    // Cooperative only; 128x192 was not measured with A in registers.
    return *CheapestSm90Tile(m, n, k, batch, sm_count, epilogue, [](const Sm90GemmConfig& c) {
      return c.consumers >= 2 && !c.pingpong && !(c.bm == 128 && c.bn == 192);
    });
  }
  // Few tiles with a long K (64x128 tiles would split): 64x64 tiles, split over K by
  // PickSm90SplitK. On the H100 they beat the 64x128 splits on all 14 such shapes of
  // the bench (benchmarks/results/ has the runs).
  if (PickSm90SplitK(Sm90GemmConfig{64, 128, 1, 1, 8}, m, n, k, batch, sm_count) > 1) {
    return Sm90GemmConfig{64, 64, 1, 1, 8};
  }
  // Else the tile config with the least predicted time.
  return *CheapestSm90Tile(m, n, k, batch, sm_count, epilogue, [](const Sm90GemmConfig&) { return true; });
}
}  // namespace

}  // namespace kiln::codegen::ops
