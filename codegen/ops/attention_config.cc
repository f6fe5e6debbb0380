// Tile configs of the fused attention kernels (codegen/templates/attention_sm80.cuh,
// mma.sync, and attention_sm90.cuh, wgmma): the shared memory and register estimates,
// the verifier and the heuristic (PickAttentionConfig), behind codegen/ops/families.h.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_sm90.h"

namespace kiln::codegen::ops {
namespace {

int64_t RoundUp16(int64_t x) { return (x + 15) / 16 * 16; }
int64_t RoundUp64(int64_t x) { return (x + 63) / 64 * 64; }

// Keys per stage of the key loop: one block per key group.
int64_t StageKeys(const AttentionConfig& c) { return static_cast<int64_t>(c.bn) * c.splits; }

// Elements of the K tile: [KEYS][DP + 8] (trans_b) or [DP][KEYS + 8].
int64_t KTile(const AttentionConfig& c, int64_t d, bool k_trans) {
  const int64_t dp = RoundUp16(d);
  return k_trans ? StageKeys(c) * (dp + 8) : dp * (StageKeys(c) + 8);
}

// The wgmma kernel's limits (the caller has checked the head dims); `bad` wraps the
// reason into the verifier's message.
template <typename Bad>
absl::Status VerifyWgmmaConfig(const AttentionConfig& c, int64_t d, int64_t dv, bool k_trans, Bad bad) {
  if (c.bm != 64 && c.bm != 128 && c.bm != 192)
    return bad("the wgmma kernel takes BM 64, 128 or 192 (warpgroups of 64 rows)");
  if (c.bn != 64 && c.bn != 128) return bad("the wgmma kernel takes BN 64 or 128");
  if (c.splits != 1) return bad("the wgmma kernel has no key groups (splits 1)");
  const int64_t smem = AttentionSharedBytes(c, d, dv, k_trans);
  if (smem > kSm90MaxSharedBytes) {
    return bad(absl::StrCat(smem, " bytes of shared memory (> ", kSm90MaxSharedBytes, ", 227 KiB)"));
  }
  const int regs = AttentionRegisterEstimate(c, d, dv);
  const int budget = std::min(255, 65536 / (2 * c.bm) / 8 * 8) - kAttentionWgmmaRegisterReserve;
  if (regs > budget) {
    return bad(absl::StrCat(regs, " registers per thread for scores, accumulators and P (> ", budget, " at ", 2 * c.bm,
                            " threads)"));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t AttentionSharedBytes(const AttentionConfig& c, int64_t d, int64_t dv, bool k_trans) {
  if (c.wgmma) {  // 1024 (alignment) + Q [BM][DP] + 2 K [BN][DP] + 2 V [BN][DVP], DP and DVP padded to 64
    return 1024 + (c.bm * RoundUp64(d) + 2 * c.bn * (RoundUp64(d) + RoundUp64(dv))) * 2;
  }
  const int64_t q = c.bm * (RoundUp16(d) + 8);
  const int64_t v = StageKeys(c) * (RoundUp16(dv) + 8);
  const int64_t tiles = (q + 2 * KTile(c, d, k_trans) + 2 * v) * 2;
  const int64_t merge = static_cast<int64_t>(c.splits - 1) * (c.bm / 16 * 32) * (RoundUp16(dv) / 2 + 4) * 4;
  return std::max(tiles, merge);
}

int AttentionRegisterEstimate(const AttentionConfig& c, int64_t d, int64_t dv) {
  // Scores (BN/8 fragments of 4), output accumulators (DVP/8 x 4), Q fragments
  // (DP/16 x 4), one P fragment, row max/sum/alpha/base. The wgmma kernel: scores,
  // accumulators (DVP padded to 64) and all of P's fragments (BN/4), no Q fragments.
  // With the overlap, the next block's scores live beside P's fragments in flight.
  if (c.wgmma) return static_cast<int>(c.bn / 2 + RoundUp64(dv) / 2 + (c.overlap ? c.bn / 2 : c.bn / 4) + 12);
  return static_cast<int>(c.bn / 2 + RoundUp16(dv) / 2 + RoundUp16(d) / 4 + 4 + 8);
}

absl::Status VerifyAttentionConfig(const AttentionConfig& c, int64_t d, int64_t dv, bool k_trans) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention tile config", c.wgmma ? " (wgmma)" : "", c.overlap ? " (overlap)" : "", " BM ", c.bm, " BN ", c.bn,
        " splits ", c.splits, " (D ", d, ", Dv ", dv, k_trans ? ", K [Sk, D]" : ", K' [D, Sk]", "): ", why));
  };
  if (d <= 0 || dv <= 0 || d % 8 != 0 || dv % 8 != 0 || d > kAttentionMaxHeadDim || dv > kAttentionMaxHeadDim) {
    return bad(absl::StrCat("head dims must be multiples of 8 up to ", kAttentionMaxHeadDim));
  }
  if (c.wgmma) return VerifyWgmmaConfig(c, d, dv, k_trans, bad);
  if (c.overlap) return bad("the overlap of the softmax with P V needs the wgmma kernel (wgmma)");
  if (c.bm < 16 || c.bm > 128 || c.bm % 16 != 0) {
    return bad("BM must be a multiple of 16 (one warp per 16 query rows) in [16, 128]");
  }
  if (c.bn < 16 || c.bn > 128 || c.bn % 16 != 0)
    return bad("BN must be a multiple of 16 (the P V mma's k) in [16, 128]");
  if (c.splits != 1 && c.splits != 2 && c.splits != 4) return bad("splits (key groups per CTA) must be 1, 2 or 4");
  const int64_t smem = AttentionSharedBytes(c, d, dv, k_trans);
  if (smem > kAttentionMaxSharedBytes) {
    return bad(absl::StrCat(smem, " bytes of shared memory (> ", kAttentionMaxSharedBytes, ", 99 KiB)"));
  }
  const int regs = AttentionRegisterEstimate(c, d, dv);
  if (regs > kAttentionRegisterBudget) {
    return bad(absl::StrCat(regs, " registers per thread for scores, accumulators and fragments (> ",
                            kAttentionRegisterBudget, ")"));
  }
  return absl::OkStatus();
}

bool UseWgmmaAttention(int64_t sq, int64_t d, int64_t dv) { return sq > 32 && d > 32 && dv > 32; }

AttentionConfig PickAttentionConfig(int64_t batch, int64_t sq, int64_t sk, int64_t d, int64_t dv, bool k_trans,
                                    bool hopper) {
  constexpr int64_t kSms = 132;
  if (hopper && UseWgmmaAttention(sq, d, dv)) {
    // One warpgroup of 64 rows; blocks of 128 keys for long sequences, else 64. The
    // sweep on the H100 (AttentionGpuTest.TileSweepTiming): Whisper-base's 1500 frames
    // ran in 0.0240 ms at BN 128 and 0.0260 at 64; 197 to 128 keys (ViT-B/16 at 32,
    // GPT-2 and Llama at 8 x 128) ran 7-30% faster at BN 64 than at 128, and two
    // warpgroups (BM 128) were slower than one on every shape but one.
    const bool long_keys = sk >= 512;
    for (int bn : {long_keys ? 128 : 64, long_keys ? 64 : 128}) {
      const AttentionConfig c{64, bn, 1, true};
      if (VerifyAttentionConfig(c, d, dv, k_trans).ok()) return c;
    }
  }
  // Enough CTAs to fill an H100's 132 SMs where the problem allows it: a CTA per 64
  // query rows, halved down to 32 while the grid is smaller than that, and down to one
  // warp while the tile is twice the queries. Key groups give the same rows more warps
  // with shorter chains of work (`AttentionGpuTest.TileSweepTiming`, benchmarks/
  // RESULTS.md "Fused attention"): where 33-128 keys meet a small grid (at most two
  // waves for up to 64 keys, Swin-T's 49-key windows at batch 1; short of one wave for
  // up to 128, BERT-base and GPT-2 at batch 1), four groups of 16 or 32 keys, one
  // stage for all keys; a grid short of one wave with more keys (ViT-B/16 at batch 1,
  // 197) two groups of 64.
  constexpr int64_t kTargetCtas = kSms;
  auto ctas = [&](int bm) { return batch * ((sq + bm - 1) / bm); };
  AttentionConfig c{64, 64, 1};
  while (c.bm > 32 && ctas(c.bm) < kTargetCtas) c.bm /= 2;
  while (c.bm > 16 && c.bm / 2 >= sq) c.bm /= 2;
  const bool short_keys = sk > 32 && sk <= 64 && ctas(c.bm) <= 2 * kTargetCtas;
  const bool few_keys = sk > 64 && sk <= 128 && ctas(c.bm) < kTargetCtas;
  if (short_keys || few_keys) {
    const AttentionConfig quarters{c.bm, short_keys ? 16 : 32, 4};
    if (VerifyAttentionConfig(quarters, d, dv, k_trans).ok()) return quarters;
  }
  // Long sequences on a grid of one to two waves at 64 rows (Whisper-base's 8 heads x
  // 1500 frames): 48 rows and two groups of 32 keys even out the SMs' work.
  if (sk >= 512 && c.bm == 64 && ctas(64) >= kTargetCtas && ctas(64) < 2 * kTargetCtas) {
    const AttentionConfig rows48{48, 32, 2};
    if (VerifyAttentionConfig(rows48, d, dv, k_trans).ok()) return rows48;
  }
  for (int bn : {64, 32, 16}) {
    c.bn = bn;
    c.splits = ctas(c.bm) < kTargetCtas && sk > bn ? 2 : 1;
    if (VerifyAttentionConfig(c, d, dv, k_trans).ok()) return c;
    c.splits = 1;
    if (VerifyAttentionConfig(c, d, dv, k_trans).ok()) return c;
  }
  return AttentionConfig{16, 16, 1};
}

}  // namespace kiln::codegen::ops
