// The sm_80-class GEMM template's tile configs (codegen/templates/gemm_sm80.cuh):
// shared memory and register estimates, verification, the shape heuristic, the
// candidates --tune measures, and the config's text form. An fp32 problem's
// (variant.simt) go to the SIMT template's rules (gemm_simt_config.cc); a tf32 one on
// this template counts K in its 16-bit units (two per element: the variant's k).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "codegen/ops/families.h"

namespace kiln::codegen::ops {
namespace {

// The stored tile of an operand: rows x contiguous columns.
struct TileShape {
  int rows, cols;
};
TileShape ATile(const GemmConfig& c, bool trans) { return trans ? TileShape{c.bk, c.bm} : TileShape{c.bm, c.bk}; }
TileShape BTile(const GemmConfig& c, bool trans) { return trans ? TileShape{c.bn, c.bk} : TileShape{c.bk, c.bn}; }
int64_t TileElements(TileShape t) { return static_cast<int64_t>(t.rows) * (t.cols + 8); }

// Registers of one operand's register stage (kiln_gemm_stage in the template), or
// of a convolution's im2col gather (kiln_conv_a: 3 per row it decomposes, plus the
// staged elements in mode 4).
int StagedRegisters(const GemmConfig& c, TileShape t, const GemmOperand& op) {
  if (op.load == GemmLoad::kAsync) return 0;
  const int threads = c.warps_m * c.warps_n * 32;
  if (op.load == GemmLoad::kIm2colAsync) return 3 * ((t.rows * t.cols / 8 + threads - 1) / threads);
  if (op.load == GemmLoad::kIm2colScalar) return 3 + (t.rows * t.cols + threads - 1) / threads;
  const bool vec = op.load == GemmLoad::kStagedVector;
  const int per = vec ? 8 : 1;
  const int items = t.rows * t.cols / per;
  const int iters = (items + threads - 1) / threads;
  const int words = vec ? (op.element_bytes == 4 ? 8 : 4) : 1;
  return iters * words;
}

// The summed K in the template's k units: 16-bit elements, two per fp32 element in
// the tf32 form (variant.tf32 without variant.simt: GEMM_TF32).
int64_t TemplateK(const GemmProblem& p) { return p.variant.tf32 && !p.variant.simt ? 2 * p.KTotal() : p.KTotal(); }

}  // namespace

int64_t GemmSharedBytes(const GemmConfig& c, const GemmVariant& variant) {
  if (variant.simt) return SimtGemmSharedBytes(c, variant);
  int64_t stage = 0;
  for (const GemmMainloop& l : variant.mainloops) {
    stage = std::max(stage, TileElements(ATile(c, l.a.trans)) + TileElements(BTile(c, l.b.trans)));
  }
  return static_cast<int64_t>(c.stages) * stage * 2;
}

int GemmRegisterEstimate(const GemmConfig& c, const GemmVariant& variant) {
  if (variant.simt) return SimtGemmRegisterEstimate(c, variant);
  if (c.warps_m <= 0 || c.warps_n <= 0) return 0;
  const int mi = c.bm / c.warps_m / 16, ni = c.bn / c.warps_n / 8;
  int staged = 0;
  for (const GemmMainloop& l : variant.mainloops) {
    staged = std::max(staged,
                      StagedRegisters(c, ATile(c, l.a.trans), l.a) + StagedRegisters(c, BTile(c, l.b.trans), l.b));
  }
  const int extra = variant.mainloops.size() > 1 ? kGemmSecondMainloopRegisters : 0;
  return mi * ni * 4 + mi * 4 + 4 + staged + extra;
}

absl::Status VerifyGemmConfig(const GemmConfig& c, const GemmVariant& variant) {
  if (variant.simt) return VerifySimtGemmConfig(c, variant);
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("GEMM tile config ", c.bm, "x", c.bn, "x", c.bk, " warps ",
                                                   c.warps_m, "x", c.warps_n, " stages ", c.stages,
                                                   c.split_k != 1 ? absl::StrCat(" split-K ", c.split_k) : "", ": ",
                                                   why));
  };
  if (c.bm <= 0 || c.bn <= 0 || c.bk <= 0 || c.warps_m <= 0 || c.warps_n <= 0) return bad("non-positive size");
  if (c.bm % (16 * c.warps_m) != 0) return bad("BM must be a multiple of 16 * WARPS_M (m16 fragments per warp)");
  if (c.bn % (16 * c.warps_n) != 0) {
    return bad("BN must be a multiple of 16 * WARPS_N (pairs of n8 fragments per ldmatrix.x4)");
  }
  if (c.bk % 16 != 0) return bad("BK must be a multiple of 16 (the mma k)");
  if (c.stages < 2 || c.stages > 8) return bad("STAGES must be in [2, 8]");
  if (c.min_ctas != 1) return bad("an occupancy target (oN) is the SIMT template's only");
  if (c.kmajor) return bad("the k-major pipeline (t) is the SIMT template's only");
  if (variant.mainloops.empty() || variant.mainloops.size() > 2) {
    return bad(absl::StrCat(variant.mainloops.size(), " mainloops (the template has one or two)"));
  }
  const int threads = c.warps_m * c.warps_n * 32;
  if (threads > 1024) return bad(absl::StrCat(threads, " threads per block (> 1024)"));
  const int64_t smem = GemmSharedBytes(c, variant);
  if (smem > kGemmMaxSharedBytes) {
    return bad(absl::StrCat(smem, " bytes of shared memory (> ", kGemmMaxSharedBytes, ", 99 KiB)"));
  }
  const int regs = GemmRegisterEstimate(c, variant);
  if (regs > kGemmRegisterBudget) {
    return bad(absl::StrCat(regs, " registers per thread for accumulators, fragments and register-staged operands (> ",
                            kGemmRegisterBudget, "; the rest of 255 holds addresses and the epilogue)"));
  }
  if (const std::string split = SplitKProblem(c, variant); !split.empty()) return bad(split);
  return absl::OkStatus();
}

std::string SplitKProblem(const GemmConfig& c, const GemmVariant& variant) {
  if (c.split_k < 1 || c.split_k > kGemmMaxSplitK) return absl::StrCat("split-K must be in [1, ", kGemmMaxSplitK, "]");
  if (c.split_k == 1) return "";
  if (variant.mainloops.size() > 1) return "split-K of a dual-matmul (two mainloops): not supported";
  const int64_t k = variant.mainloops[0].k;
  const int64_t k_tiles = (k + c.bk - 1) / c.bk, per = (k_tiles + c.split_k - 1) / c.split_k;
  if (k > 0 && (c.split_k - 1) * per >= k_tiles) {
    return absl::StrCat("K = ", k, " has ", k_tiles, " k tile(s) of BK = ", c.bk, ": ", c.split_k, " splits of ", per,
                        " leave the last split without one");
  }
  return "";
}

int PickGemmSplitK(const GemmConfig& tile, int64_t m, int64_t n, int64_t k, int64_t batch, int sm_count,
                   int min_k_tiles) {
  if (sm_count <= 0) sm_count = 132;
  if (tile.bm <= 0 || tile.bn <= 0 || tile.bk <= 0 || m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 1;
  const int64_t tiles = ((m + tile.bm - 1) / tile.bm) * ((n + tile.bn - 1) / tile.bn) * batch;
  const int64_t k_tiles = (k + tile.bk - 1) / tile.bk;
  if (2 * tiles > sm_count) return 1;
  int64_t split = std::min<int64_t>({sm_count / tiles, k_tiles / std::max(min_k_tiles, 1), kGemmMaxSplitK});
  if (split < 2) return 1;
  split = FewestSplits(k_tiles, split);
  return split < 2 ? 1 : static_cast<int>(split);
}

GemmConfig PickGemmConfig(int64_t m, int64_t n, int64_t k, int64_t batch, const GemmVariant& variant) {
  (void)k;
  if (variant.simt) return PickSimtGemmConfig(m, n, k, batch, variant);
  const int64_t big_tiles = ((m + 127) / 128) * ((n + 127) / 128) * batch;
  std::vector<GemmConfig> candidates;
  if (m >= 128 && n >= 128 && big_tiles >= 96) {
    candidates.push_back(GemmConfig{128, 128, 32, 2, 2, 3});
    candidates.push_back(GemmConfig{128, 128, 32, 2, 4, 3});
  }
  candidates.push_back(GemmConfig{64, 64, 32, 2, 2, 4});
  for (const GemmConfig& c : candidates) {
    if (VerifyGemmConfig(c, variant).ok()) return c;
  }
  return GemmConfig{64, 64, 32, 2, 2, 2};
}

GemmConfig HeuristicGemmConfig(const GemmProblem& p, int sm_count) {
  if (sm_count <= 0) sm_count = 132;
  if (p.variant.simt) return PickSimtGemmConfig(p.m, p.n, p.KTotal(), p.batch, p.variant, sm_count);
  const GemmConfig c = PickGemmConfig(p.m, p.n, TemplateK(p), p.batch, p.variant);
  if (p.variant.mainloops.size() != 1) return c;
  const int64_t tiles = ((p.m + c.bm - 1) / c.bm) * ((p.n + c.bn - 1) / c.bn) * p.batch;
  if (2 * tiles > sm_count) return c;
  GemmConfig split = c;
  split.split_k = PickGemmSplitK(c, p.m, p.n, TemplateK(p), p.batch, sm_count);
  if (split.split_k > 1 && 2 * tiles * split.split_k >= sm_count && VerifyGemmConfig(split, p.variant).ok()) {
    return split;
  }
  const GemmConfig small{32, 32, 64, 2, 2, 4};
  return VerifyGemmConfig(small, p.variant).ok() ? small : c;
}

std::vector<GemmConfig> GemmCandidateConfigs(const GemmProblem& p, int sm_count) {
  static const GemmConfig kPool[] = {
      {128, 128, 32, 2, 2, 3}, {128, 128, 32, 2, 4, 3}, {128, 128, 32, 2, 2, 4}, {128, 256, 32, 2, 4, 3},
      {256, 128, 32, 4, 2, 3}, {128, 64, 32, 2, 2, 3},  {128, 64, 32, 2, 2, 4},  {64, 128, 32, 2, 2, 3},
      {64, 128, 32, 2, 2, 4},  {64, 64, 32, 2, 2, 3},   {64, 64, 32, 2, 2, 4},   {64, 64, 64, 2, 2, 3},
      {64, 32, 32, 2, 2, 4},   {32, 64, 32, 2, 2, 4},   {32, 32, 64, 2, 2, 4},
  };
  if (p.variant.simt) return SimtGemmCandidateConfigs(p.m, p.n, p.KTotal(), p.batch, p.variant, sm_count);
  const int64_t m16 = (p.m + 15) / 16 * 16, n16 = (p.n + 15) / 16 * 16;
  std::vector<GemmConfig> out = {HeuristicGemmConfig(p, sm_count)};
  for (const GemmConfig& c : kPool) {
    if (c.bm >= 2 * m16 || c.bn >= 2 * n16) continue;
    if (!VerifyGemmConfig(c, p.variant).ok()) continue;
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  if (p.variant.mainloops.size() != 1) return out;
  // Split-K forms of the unsplit candidates, in their order.
  const size_t unsplit = out.size();
  int added = 0;
  for (size_t i = 0; i < unsplit && added < kGemmMaxSplitCandidates; ++i) {
    if (out[i].split_k != 1) continue;
    const int s = PickGemmSplitK(out[i], p.m, p.n, TemplateK(p), p.batch, sm_count, /*min_k_tiles=*/4);
    for (int split : {s, s / 2}) {
      if (split < 2 || added >= kGemmMaxSplitCandidates) continue;
      GemmConfig c = out[i];
      c.split_k = split;
      if (!VerifyGemmConfig(c, p.variant).ok() || std::find(out.begin(), out.end(), c) != out.end()) continue;
      out.push_back(c);
      ++added;
    }
  }
  return out;
}

bool operator==(const GemmConfig& a, const GemmConfig& b) {
  return a.bm == b.bm && a.bn == b.bn && a.bk == b.bk && a.warps_m == b.warps_m && a.warps_n == b.warps_n &&
         a.stages == b.stages && a.split_k == b.split_k && a.min_ctas == b.min_ctas && a.kmajor == b.kmajor;
}

std::string GemmConfigString(const GemmConfig& c) {
  return absl::StrCat(c.bm, "x", c.bn, "x", c.bk, " w", c.warps_m, "x", c.warps_n, " s", c.stages,
                      c.split_k != 1 ? absl::StrCat(" k", c.split_k) : "",
                      c.min_ctas != 1 ? absl::StrCat(" o", c.min_ctas) : "", c.kmajor ? " t" : "");
}

absl::StatusOr<GemmConfig> ParseGemmConfig(absl::string_view text) {
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text,
                     "' is not a GEMM config (BMxBNxBK wWARPS_MxWARPS_N sSTAGES [kSPLITS] [oCTAS] [t], e.g. "
                     "128x128x32 w2x2 s3, 64x64x32 w2x2 s4 k4 or 128x128x16 w2x4 s4 o2 t)"));
  };
  std::vector<absl::string_view> parts = absl::StrSplit(text, ' ');
  if (parts.size() < 3 || parts.size() > 6) return bad();
  if (!absl::ConsumePrefix(&parts[1], "w") || !absl::ConsumePrefix(&parts[2], "s")) return bad();
  int split = 1, min_ctas = 1;
  bool kmajor = false;
  // Then " kS", " oN" and " t", in that order, each optional.
  size_t next = 3;
  if (next < parts.size() && absl::ConsumePrefix(&parts[next], "k")) {
    if (!absl::SimpleAtoi(parts[next], &split) || split < 1) return bad();
    ++next;
  }
  if (next < parts.size() && absl::ConsumePrefix(&parts[next], "o")) {
    if (!absl::SimpleAtoi(parts[next], &min_ctas) || min_ctas < 1) return bad();
    ++next;
  }
  if (next < parts.size() && parts[next] == "t") {
    kmajor = true;
    ++next;
  }
  if (next != parts.size()) return bad();
  std::vector<absl::string_view> tile = absl::StrSplit(parts[0], 'x');
  std::vector<absl::string_view> warps = absl::StrSplit(parts[1], 'x');
  GemmConfig c;
  if (tile.size() != 3 || warps.size() != 2 || !absl::SimpleAtoi(tile[0], &c.bm) || !absl::SimpleAtoi(tile[1], &c.bn) ||
      !absl::SimpleAtoi(tile[2], &c.bk) || !absl::SimpleAtoi(warps[0], &c.warps_m) ||
      !absl::SimpleAtoi(warps[1], &c.warps_n) || !absl::SimpleAtoi(parts[2], &c.stages)) {
    return bad();
  }
  if (c.bm <= 0 || c.bn <= 0 || c.bk <= 0 || c.warps_m <= 0 || c.warps_n <= 0 || c.stages <= 0) return bad();
  c.split_k = split;
  c.min_ctas = min_ctas;
  c.kmajor = kmajor;
  return c;
}

}  // namespace kiln::codegen::ops
