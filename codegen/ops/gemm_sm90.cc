// The Hopper GEMM family: codegen/templates/gemm_sm90.cuh instantiated for the
// MatMul groups gemm.cc plans (PlanGemmForFamily), with the verifier and the routing
// between the sm90 and sm80 families (the tile heuristic: gemm_sm90_heuristic.cc).
#include "codegen/ops/gemm_sm90.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_source.h"
#include "codegen/ops/kernel_util.h"
#include "codegen/templates.h"
#include "common/status_macros.h"
#include "graph/fused_group.h"

namespace kiln::codegen::ops {

std::string WgmmaFunction(const std::string& name, int n, DType dtype, bool trans_a, bool trans_b, bool register_a,
                          bool fragments) {
  const int regs = n / 2;
  const bool tf32 = dtype == DType::kFloat32;
  const char* t = tf32 ? "tf32" : dtype == DType::kBFloat16 ? "bf16" : "f16";
  std::string d, operands;
  for (int i = 0; i < regs; ++i) {
    absl::StrAppend(&d, i ? ", " : "", "%", i);
    absl::StrAppend(&operands, i ? ", " : "", "\"+f\"(d[",
                    fragments ? absl::StrCat(i / 4, "][", i % 4) : absl::StrCat(i), "])");
  }
  const std::string a_param = register_a ? "const unsigned (&a)[4]" : "unsigned long long desc_a";
  const std::string a_operand =
      register_a ? absl::StrCat("{%", regs, ", %", regs + 1, ", %", regs + 2, ", %", regs + 3, "}")
                 : absl::StrCat("%", regs);
  const int b_operand = register_a ? regs + 4 : regs + 1;
  const std::string layouts = tf32         ? ""
                              : register_a ? absl::StrCat(", ", trans_b ? 0 : 1)
                                           : absl::StrCat(", ", trans_a ? 1 : 0, ", ", trans_b ? 0 : 1);
  const std::string inputs = register_a ? "\"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(desc_b)"
                                        : "\"l\"(desc_a), \"l\"(desc_b)";
  const std::string d_param =
      fragments ? absl::StrCat("float (&d)[", n / 8, "][4]") : absl::StrCat("float (&d)[", regs, "]");
  return absl::StrCat("static __device__ __forceinline__ void ", name, "(", d_param, ", ", a_param,
                      ", unsigned long long desc_b) {\n"
                      "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, 1, 0;\\n"
                      "wgmma.mma_async.sync.aligned.m64n",
                      n, tf32 ? "k8" : "k16", ".f32.", t, ".", t, " {", d, "}, ", a_operand, ", %", b_operand,
                      ", p, 1, 1", layouts, ";\\n}\\n\"\n    : ", operands, "\n    : ", inputs, ");\n}\n");
}

namespace {

// 16-byte aligned rows (TMA): a contiguous dim of a multiple of 8 16-bit or 4 fp32
// elements.
bool TmaRowsOk(const Shape& s, DType dtype) { return s.back() * static_cast<int64_t>(DTypeSize(dtype)) % 16 == 0; }

// A K in the family's k units (16-bit elements): a tf32 element takes the bytes of
// two, so a stage of bk (64 or 128) holds bk / 2 of them, and the tile heuristic and
// split counts, which measure k in stages, see twice the K.
int64_t KUnits(const GemmFamilyPlan& p, int64_t k) { return p.tf32 ? 2 * k : k; }

}  // namespace

namespace {
int64_t SharedBytesWithChunks(const Sm90GemmConfig& c, bool tma_store, int chunks) {
  const int64_t ring = 1024 + static_cast<int64_t>(c.stages) * (c.bm + c.bn) * c.bk * 2 + 16 * c.stages + 16;
  int64_t c_tiles = tma_store ? static_cast<int64_t>(c.consumers) * 64 * c.wg_m * (c.bn / chunks) * 2 : 0;
  // Swapped, C goes through shared memory only where its whole tile fits beside the
  // ring; else the epilogue stores from registers (no C tiles).
  if (c.swap_ab && ring + c_tiles > kSm90MaxSharedBytes) c_tiles = 0;
  return ring + c_tiles;
}
}  // namespace

int Sm90CChunks(const Sm90GemmConfig& c) {
  if (c.swap_ab) return 1;  // swapped: the whole tile or register stores (SharedBytesWithChunks)
  const int boxes = std::max(c.bn / 64, 1);
  for (int q = 1; q < boxes; ++q) {
    if (boxes % q == 0 && SharedBytesWithChunks(c, true, q) <= kSm90MaxSharedBytes) return q;
  }
  return boxes;
}

int64_t Sm90GemmSharedBytes(const Sm90GemmConfig& c, bool tma_store) {
  return SharedBytesWithChunks(c, tma_store, tma_store ? Sm90CChunks(c) : 1);
}

absl::Status VerifySm90GemmConfig(const Sm90GemmConfig& c, bool tma_store) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("sm90 GEMM tile config ", Sm90GemmConfigString(c), ": ", why));
  };
  if (c.consumers < 1 || c.consumers > 3) return bad("1 to 3 consumer warpgroups");
  if (c.wg_m < 1 || c.wg_m > 2) return bad("1 or 2 m64 blocks per consumer warpgroup");
  if (c.pingpong && c.consumers != 2) return bad("ping-pong needs 2 consumer warpgroups");
  // Three consumers get 152 registers a thread (setmaxnreg, gemm_sm90.cuh).
  if (c.consumers == 3 && c.wg_m * c.bn / 2 > 96) {
    return bad(absl::StrCat(c.wg_m * c.bn / 2, " accumulator registers per thread with 3 consumer warpgroups (> 96)"));
  }
  if (c.bm != 64 * c.wg_m * (c.pingpong ? 1 : c.consumers)) {
    return bad(c.pingpong ? "BM must be 64 * WG_M (ping-pong)" : "BM must be 64 * WG_M * CONSUMERS");
  }
  if (c.swap_ab) {
    if (c.pingpong) return bad("swap-AB takes cooperative tiles");
    if (c.bn < 8 || c.bn > 256 || c.bn % 8 != 0) {
      return bad("swap-AB: BN (C's rows in a tile, the wgmma n) must be a multiple of 8 in [8, 256]");
    }
    if (c.split_k > 1 && c.bn % 16 != 0) {
      return bad("swap-AB with split-K: BN must be a multiple of 16 (the partials are stored as n16 pairs)");
    }
  } else if (c.bn < 64 || c.bn > 256 || c.bn % 64 != 0) {
    return bad("BN must be a multiple of 64 (TMA boxes of 64 columns) in [64, 256] (wgmma n)");
  }
  if (c.wg_m * c.bn / 2 > 128) return bad(absl::StrCat(c.wg_m * c.bn / 2, " accumulator registers per thread (> 128)"));
  if (c.stages < 2 || c.stages > 16) return bad("STAGES must be in [2, 16]");
  if (c.split_k < 1 || c.split_k > kGemmMaxSplitK) return bad(absl::StrCat("split-K must be in [1, ", kGemmMaxSplitK, "]"));
  if (c.split_k > 1 && c.pingpong) {
    return bad("split-K needs cooperative tiles (ping-pong consumers take whole tiles)");
  }
  if (c.cluster_m != 1 && c.cluster_m != 2) return bad("clusters of 1 or 2 CTAs along M");
  if (c.cluster_m > 1 && c.split_k > 1) return bad("clusters take no split-K (unclustered forms)");
  if (c.cluster_m > 1 && c.swap_ab && c.bn % 16 != 0) {
    return bad("swap-AB with clusters: BN must be a multiple of 16 (each CTA multicasts BN / 2 rows of A^T: whole "
               "1024-byte swizzle atoms)");
  }
  if (c.bk != 64 && (c.bk != 128 || !c.swap_ab || c.cluster_m > 1 || c.stream_k)) {
    return bad("128 k per stage (bk128) is for swap-AB tiles without clusters or stream-K; else 64");
  }
  if (c.stream_k && (c.pingpong || c.split_k > 1 || c.swap_ab || c.cluster_m > 1)) {
    return bad("stream-K takes cooperative tiles without split-K, swap-AB or clusters");
  }
  if (c.consumers == 3 && (c.split_k > 1 || c.stream_k) && c.wg_m * c.bn / 2 > 64) {
    return bad("split-K and stream-K with 3 consumer warpgroups take at most 64 accumulators a thread (BN <= 128: "
               "the reduction spills past that)");
  }
  const int64_t smem = Sm90GemmSharedBytes(c, tma_store);
  if (smem > kSm90MaxSharedBytes) {
    return bad(absl::StrCat(smem, " bytes of shared memory (> ", kSm90MaxSharedBytes, ", 227 KiB)"));
  }
  return absl::OkStatus();
}

std::string Sm90GemmConfigString(const Sm90GemmConfig& c) {
  return absl::StrCat(c.bm, "x", c.bn, c.pingpong ? " p" : " c", c.consumers, "x", c.wg_m, " s", c.stages,
                      c.split_k != 1 ? absl::StrCat(" k", c.split_k) : "", c.swap_ab ? " swap" : "",
                      c.cluster_m != 1 ? absl::StrCat(" cl", c.cluster_m) : "", c.stream_k ? " sk" : "",
                      c.bk != 64 ? absl::StrCat(" bk", c.bk) : "");
}

absl::StatusOr<Sm90GemmConfig> ParseSm90GemmConfig(const std::string& text) {
  Sm90GemmConfig c;
  char mode = 0;
  int used = 0;
  bool ok = std::sscanf(text.c_str(), "%dx%d %c%dx%d s%d%n", &c.bm, &c.bn, &mode, &c.consumers, &c.wg_m,
                        &c.stages, &used) == 6 &&
            (mode == 'c' || mode == 'p');
  // Optional tokens, each at most once and in this order: kS, swap, clN, sk, bkK.
  int next = 0;  // the index of the first token still allowed
  while (ok && used < static_cast<int>(text.size())) {
    int n = 0, value = 0;
    const char* rest = text.c_str() + used;
    if (next <= 0 && std::sscanf(rest, " k%d%n", &value, &n) == 1 && n > 0) {
      c.split_k = value, next = 1;
    } else if (next <= 1 && std::strncmp(rest, " swap", 5) == 0 && (rest[5] == 0 || rest[5] == ' ')) {
      c.swap_ab = true, n = 5, next = 2;
    } else if (next <= 2 && std::sscanf(rest, " cl%d%n", &value, &n) == 1 && n > 0) {
      c.cluster_m = value, next = 3;
    } else if (next <= 3 && std::strncmp(rest, " sk", 3) == 0 && (rest[3] == 0 || rest[3] == ' ')) {
      c.stream_k = true, n = 3, next = 4;
    } else if (next <= 4 && std::sscanf(rest, " bk%d%n", &value, &n) == 1 && n > 0) {
      c.bk = value, next = 5;
    } else {
      ok = false;
    }
    used += n;
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text,
        "' is not an sm90 GEMM config (BMxBN cCONSUMERSxWG_M sSTAGES [kSPLITS] [swap] [clCLUSTER] [sk] [bkK], or p... "
        "for ping-pong: 128x256 c2x1 s4, 64x256 p2x1 s5, 64x128 c1x1 s8 k6, 64x16 c1x1 s8 k4 swap, 128x256 c2x1 s3 "
        "cl2, 128x256 c2x1 s4 sk)"));
  }
  c.pingpong = mode == 'p';
  if (absl::Status st = VerifySm90GemmConfig(c); !st.ok()) return st;
  return c;
}

absl::Status Sm90Eligible(const Node& node) {
  absl::StatusOr<GemmFamilyPlan> p = PlanGemmForFamily(node);
  if (!p.ok()) return p.status();
  if (p->prologue_b) {
    return NoKernel(node, "sm90 GEMM family: prologue on B (only A goes through registers; sm_80 template)");
  }
  if (p->prologue_a && p->a_loaded_dtype != p->dtype) {
    return NoKernel(node, absl::StrCat("sm90 GEMM family: prologue of A loading ", DTypeName(p->a_loaded_dtype),
                                       " (TMA loads the tensor-core type; sm_80 template)"));
  }
  if (p->tf32) {
    const char* why = p->prologue_a ? "a prologue on A (the tf32 wgmma takes no register A here)"
                      : p->trans_a || (p->dual && p->trans_a2) ? "A stored [K, M] (M-major)"
                      : !p->trans_b || (p->dual && !p->trans_b2)
                          ? "B stored [K, N] (N-major; tf32-math stores constant weights [N, K])"
                          : nullptr;
    if (why != nullptr) {
      return NoKernel(node, absl::StrCat("sm90 GEMM family: tf32 wgmma reads both operands K-major from shared "
                                         "memory, and this group has ",
                                         why, "; the SIMT template or cuBLASLt runs it"));
    }
  }
  const DType dt = p->dtype;
  const bool rows_ok = TmaRowsOk(p->a_shape, dt) && TmaRowsOk(p->b_shape, dt) &&
                       (!p->dual || (TmaRowsOk(p->a2_shape, dt) && TmaRowsOk(p->b2_shape, dt)));
  if (!rows_ok) {
    return NoKernel(node,
                    "sm90 GEMM family: an operand's contiguous dim is not a multiple of 16 bytes (TMA needs "
                    "16-byte aligned rows; sm_80 template)");
  }
  if (p->m > (int64_t{1} << 31) - 256 || p->n > (int64_t{1} << 31) - 256 || p->k > (int64_t{1} << 31) - 64 ||
      p->k2 > (int64_t{1} << 31) - 64) {
    return NoKernel(node, "sm90 GEMM family: dims too large for 32-bit TMA coordinates");
  }
  if (p->out_dtype != DType::kFloat16 && p->out_dtype != DType::kBFloat16 && p->out_dtype != DType::kFloat32) {
    return NoKernel(node, "sm90 GEMM family: output dtype");
  }
  if ((p->gated || p->rotary_half > 0) && (p->out_dtype == DType::kFloat32 || p->c_n % 8 != 0 || p->tf32)) {
    return NoKernel(node,
                    "sm90 GEMM family: a gated or rotary product pairs its columns on the way to the TMA store, "
                    "which takes a 16-bit output with rows of a multiple of 8");
  }
  if (p->rotary_half > 0 && (p->rotary_half % 8 != 0 || 256 % (2 * p->rotary_half) != 0)) {
    return NoKernel(node, absl::StrCat("sm90 GEMM family: a rotary product pairs columns ", p->rotary_half,
                                       " apart; its tiles pair n8 blocks within 64, 128 or 256 columns"));
  }
  return absl::OkStatus();
}

namespace {
// Sm90SwapAbEligible for an Sm90Eligible group, from its plan.
absl::Status SwapAbEligible(const Node& node, const GemmFamilyPlan& p) {
  if (p.dual) return NoKernel(node, "sm90 swap-AB: dual mainloops run unswapped");
  if (p.gated || p.rotary_half > 0) {
    return NoKernel(node, "sm90 swap-AB: gated products and rotary products pair columns of C's rows; run unswapped");
  }
  if (p.prologue_a) return NoKernel(node, "sm90 swap-AB: A-prologues (A through registers) run unswapped");
  if (p.trans_a) {
    return NoKernel(node, "sm90 swap-AB: A stored [K, M] would be an M-major operand narrower than one 128-byte "
                          "swizzle row; runs unswapped");
  }
  return absl::OkStatus();
}
// Whether the epilogue can store C by TMA: a 16-bit C with 16-byte aligned rows.
bool CByTma(const GemmFamilyPlan& p) {
  return (p.out_dtype == DType::kFloat16 || p.out_dtype == DType::kBFloat16) && p.c_n % 8 == 0;
}
// The tiles of a product whose epilogue pairs columns, unswapped: a gated product's
// 128 or 256 columns of B, so that C's tile of half as many is whole 64-column TMA
// boxes; a rotary product's whole blocks of 2 rotary_half columns. Any other tile
// otherwise.
bool PairedTileOk(const GemmFamilyPlan& p, const Sm90GemmConfig& c) {
  if (p.gated) return !c.swap_ab && c.bn % 128 == 0;
  if (p.rotary_half > 0) return !c.swap_ab && c.bn % (2 * p.rotary_half) == 0;
  return true;
}
}  // namespace

absl::Status Sm90SwapAbEligible(const Node& node) {
  if (absl::Status st = Sm90Eligible(node); !st.ok()) return st;
  absl::StatusOr<GemmFamilyPlan> p = PlanGemmForFamily(node);
  if (!p.ok()) return p.status();
  return SwapAbEligible(node, *p);
}

namespace {
// The heuristic's config for a planned, Sm90Eligible group.
Sm90GemmConfig HeuristicConfig(const Node& node, const GemmFamilyPlan& p, int sm_count) {
  const bool can_swap = SwapAbEligible(node, p).ok();
  const int64_t k = KUnits(p, p.k);
  if (can_swap && PreferSm90SwapAb(p.m, p.n, k)) return PickSm90SwapAbConfig(p.m, p.n, k, p.batch);
  const int64_t k_total = KUnits(p, p.k + p.k2);
  const Sm90GemmConfig tile = PickSm90GemmConfig(p.m, p.n, k_total, p.batch, sm_count, p.prologue_a, p.epilogue_work);
  if (!PairedTileOk(p, tile)) {
    // The cost model's best among the unsplit tiles it takes.
    if (std::optional<Sm90GemmConfig> paired =
            CheapestSm90Tile(p.m, p.n, k_total, p.batch, sm_count, p.epilogue_work,
                             [&p](const Sm90GemmConfig& c) { return PairedTileOk(p, c) && c.split_k == 1; })) {
      return *paired;
    }
  }
  // A swapped tile that fills the wave better, where C can go out by TMA.
  if (can_swap && CByTma(p)) {
    if (std::optional<Sm90GemmConfig> wave = PickSm90SwapWaveConfig(tile, p.m, p.n, k, p.batch, sm_count)) {
      return *wave;
    }
  }
  return tile;
}
}  // namespace

absl::StatusOr<Sm90GemmConfig> HeuristicSm90GemmConfig(const Node& node, int sm_count, std::string* note) {
  if (absl::Status st = Sm90Eligible(node); !st.ok()) return st;
  absl::StatusOr<GemmFamilyPlan> p = PlanGemmForFamily(node);
  if (!p.ok()) return p.status();
  if (note != nullptr) *note = absl::StrCat("heuristic, epilogue work: ", EpilogueWorkName(p->epilogue_work));
  return HeuristicConfig(node, *p, sm_count <= 0 ? 132 : sm_count);
}

Sm90GemmConfig HeuristicSm90GemmConfigForRows(const Node& node, const GemmFamilyPlan& plan, int64_t rows,
                                              int sm_count) {
  GemmFamilyPlan p = plan;
  p.m = rows;
  Sm90GemmConfig c = HeuristicConfig(node, p, sm_count <= 0 ? 132 : sm_count);
  c.stream_k = false;
  return c;
}

namespace {

// A config applied to a planned problem: the sizes the launch and the source derive
// from it, after every check GenerateMatMulGroupSm90 makes.
struct Sm90Resolved {
  Sm90GemmConfig cfg;
  bool swap = false;
  bool tma_store = false;
  int64_t km = 0, kn = 0;  // the kernel's M and N (swapped: the problem's N and M)
  int64_t tiles = 0;       // output tiles (x batch)
  int64_t units = 0;       // the persistent walk's units: tiles or cluster pairs, x splits
  Sm90StreamKSplit sk;
  uint64_t scratch = 0;    // workspace bytes
};

absl::StatusOr<Sm90Resolved> ResolveSm90Config(const Node& node, const GemmFamilyPlan& largest,
                                               const Sm90GemmConfig* config, int sm_count,
                                               const Sm90RunTimeRows* rows = nullptr) {
  // With run-time rows, the grid and the workspace are for the most rows served.
  GemmFamilyPlan p = largest;
  if (rows != nullptr) p.m = rows->max_m;
  Sm90Resolved r;
  Sm90GemmConfig& cfg = r.cfg;
  if (config != nullptr) {
    cfg = *config;
    if (cfg.swap_ab) {
      if (absl::Status st = SwapAbEligible(node, p); !st.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("sm90 GEMM tile config ", Sm90GemmConfigString(cfg), ": ", st.message()));
      }
    }
  } else {
    cfg = HeuristicConfig(node, p, sm_count);
  }
  if (p.gated && !PairedTileOk(p, cfg)) {
    return absl::InvalidArgumentError(absl::StrCat("sm90 GEMM tile config ", Sm90GemmConfigString(cfg),
                                                   ": a gated product takes unswapped tiles of 128 or 256 columns "
                                                   "(C's tile, half as wide, in whole 64-column TMA boxes)"));
  }
  if (p.rotary_half > 0 && !PairedTileOk(p, cfg)) {
    return absl::InvalidArgumentError(absl::StrCat("sm90 GEMM tile config ", Sm90GemmConfigString(cfg),
                                                   ": a rotary product takes unswapped tiles of a multiple of ",
                                                   2 * p.rotary_half, " columns (whole pairs of column blocks ",
                                                   p.rotary_half, " apart)"));
  }
  r.swap = cfg.swap_ab;
  // The kernel's problem: C^T [N, M] = B^T A^T when swapped (gemm_sm90.cuh, "Swap-AB").
  r.km = r.swap ? p.n : p.m;
  r.kn = r.swap ? p.m : p.n;
  // C through shared memory and TMA: a 16-bit C with 16-byte aligned rows; swapped,
  // where the whole tile's buffer fits beside the ring (Sm90GemmSharedBytes counts it
  // then), else register stores.
  r.tma_store = CByTma(p) && (!r.swap || Sm90GemmSharedBytes(cfg, true) > Sm90GemmSharedBytes(cfg, false));
  if (rows != nullptr && cfg.stream_k) {
    return absl::InvalidArgumentError(
        absl::StrCat("sm90 GEMM tile config ", Sm90GemmConfigString(cfg), ": run-time rows do not take stream-K"));
  }
  if (absl::Status valid = VerifySm90GemmConfig(cfg, r.tma_store); !valid.ok()) return valid;
  r.tiles = ((r.km + cfg.bm - 1) / cfg.bm) * ((r.kn + cfg.bn - 1) / cfg.bn) * p.batch;
  if (r.tiles * cfg.split_k >= (int64_t{1} << 31)) return NoKernel(node, "too many tiles");
  // The walk's units: tiles, or with clusters pairs of row tiles (the second may lie
  // past M), times the splits (never both).
  r.units = ((r.km + cfg.bm * cfg.cluster_m - 1) / (cfg.bm * cfg.cluster_m)) * ((r.kn + cfg.bn - 1) / cfg.bn) *
            p.batch * cfg.split_k;
  const int64_t k1 = KUnits(p, p.k), k2 = KUnits(p, p.k2);
  const int64_t k_tiles = (k1 + cfg.bk - 1) / cfg.bk + (p.dual ? (k2 + cfg.bk - 1) / cfg.bk : 0);
  if (cfg.split_k > 1) {
    const int64_t per = (k_tiles + cfg.split_k - 1) / cfg.split_k;
    if ((cfg.split_k - 1) * per >= k_tiles) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sm90 GEMM tile config ", Sm90GemmConfigString(cfg), ": K = ", p.k + p.k2, " has ", k_tiles, " k tile(s) of ",
          p.tf32 ? cfg.bk / 2 : cfg.bk, ": ", cfg.split_k, " splits of ", per, " leave the last split without one"));
    }
  }
  // Stream-K: the split of the tiles (none when they fill whole waves: the kernel is
  // then the data-parallel one).
  r.sk = cfg.stream_k ? Sm90StreamK(r.tiles, k_tiles, sm_count) : Sm90StreamKSplit{};
  // The workspace's fp32 partial tiles: split-K's S per tile, stream-K's one per CTA
  // (gemm_sm90.cuh, "Split-K", "Stream-K").
  const uint64_t tile_bytes = static_cast<uint64_t>(cfg.bm) * cfg.bn * 4;
  r.scratch = cfg.split_k > 1  ? static_cast<uint64_t>(r.tiles) * cfg.split_k * tile_bytes
              : r.sk.sk_tiles > 0 ? static_cast<uint64_t>(r.sk.grid) * tile_bytes
                                  : 0;
  if (r.scratch > kGemmMaxScratchBytes) {
    return absl::InvalidArgumentError(absl::StrCat("sm90 GEMM tile config ", Sm90GemmConfigString(cfg), ": ",
                                                   r.scratch, " bytes of scratch (> ", kGemmMaxScratchBytes, ")"));
  }
  return r;
}

}  // namespace

std::vector<Sm90GemmConfig> Sm90CandidateConfigs(const Node& node, int sm_count) {
  std::vector<Sm90GemmConfig> out;
  absl::StatusOr<Sm90GemmConfig> heuristic = HeuristicSm90GemmConfig(node, sm_count);
  absl::StatusOr<GemmFamilyPlan> plan = PlanGemmForFamily(node);
  if (!heuristic.ok() || !plan.ok()) return out;
  const GemmFamilyPlan& p = *plan;
  if (sm_count <= 0) sm_count = 132;
  std::vector<std::string> seen;
  auto add = [&](const Sm90GemmConfig& c) {
    const std::string text = Sm90GemmConfigString(c);
    if (std::find(seen.begin(), seen.end(), text) != seen.end()) return;
    seen.push_back(text);
    // What the generator takes (the verifier, the splits' k tiles, the scratch cap).
    if (ResolveSm90Config(node, p, &c, sm_count).ok()) out.push_back(c);
  };
  add(*heuristic);
  auto round_up = [](int64_t v, int64_t to) { return (v + to - 1) / to * to; };
  const int64_t k_total = KUnits(p, p.k + p.k2);
  for (const Sm90TileCost& cost : Sm90TileCosts()) {
    Sm90GemmConfig tile = cost.config;
    // Tiles at least twice the problem's rows or columns only compute padding.
    if (tile.bm >= 2 * round_up(p.m, 64) || tile.bn >= 2 * round_up(p.n, 64)) continue;
    add(tile);
    if (tile.bm == 64 && tile.bn == 64) {  // the other ring depth (kSm90SmallTileDeepRingStages)
      tile.stages = tile.stages == kSm90SmallTileDeepRingStages ? 8 : kSm90SmallTileDeepRingStages;
      add(tile);
      tile.stages = 8;
    }
    // Split-K for tiles that leave more than half the SMs idle (Sm90CandidateConfigs in gemm_sm90.h).
    const int64_t tiles = ((p.m + tile.bm - 1) / tile.bm) * ((p.n + tile.bn - 1) / tile.bn) * p.batch;
    if (!tile.pingpong && 2 * tiles <= sm_count) {
      const int s = PickSm90SplitK(tile, p.m, p.n, k_total, p.batch, sm_count, kSm90SmallTileMinSplitKTiles,
                                   static_cast<int>(sm_count));
      const int s_short = PickSm90SplitK(tile, p.m, p.n, k_total, p.batch, sm_count, kSm90TuneMinSplitKTiles,
                                         static_cast<int>(sm_count));
      for (int split : {s, s / 2, s_short, 2}) {
        if (split < 2) continue;
        Sm90GemmConfig c = tile;
        c.split_k = split;
        add(c);
      }
    }
  }
  // The swapped tile that uses one wave best (at least kSm90SwapWaveMinUse of it),
  // where C can go out by TMA, also below the heuristic's margin over the unswapped
  // pick (PickSm90SwapWaveConfig): the measurement decides.
  const bool swappable = SwapAbEligible(node, p).ok();
  if (swappable && CByTma(p)) {
    const auto wave = BestSm90SwapWaveTile(p.m, p.n, p.batch, sm_count);
    if (wave && wave->second >= kSm90SwapWaveMinUse) add(wave->first);
  }
  // Swap-AB for few rows: PickSm90SwapAbConfig's, and 8-stage tiles of M rounded up to
  // 16 as the wgmma n in 1 to 4 splits.
  if (p.m <= 64 && swappable) {
    add(PickSm90SwapAbConfig(p.m, p.n, KUnits(p, p.k), p.batch));
    Sm90GemmConfig c{64, static_cast<int>(round_up(p.m, 16)), 1, 1, 8};
    c.swap_ab = true;
    for (int split : {1, 2, 3, 4}) {
      c.split_k = split;
      add(c);
    }
  }
  return out;
}

absl::Status Sm90ConfigFits(const Node& node, const Sm90GemmConfig& config, int sm_count) {
  if (absl::Status st = Sm90Eligible(node); !st.ok()) return st;
  absl::StatusOr<GemmFamilyPlan> plan = PlanGemmForFamily(node);
  if (!plan.ok()) return plan.status();
  return ResolveSm90Config(node, *plan, &config, sm_count <= 0 ? 132 : sm_count).status();
}

namespace {

// GenerateMatMulGroupSm90's launch; with `rows`, GenerateSm90RunTimeRows'.
absl::StatusOr<KernelLaunch> Sm90Launch(const Node& node, const Sm90GemmConfig* config, int sm_count,
                                        const Sm90RunTimeRows* rows) {
  if (absl::Status st = Sm90Eligible(node); !st.ok()) return st;
  absl::StatusOr<GemmFamilyPlan> plan_or = PlanGemmForFamily(node);
  if (!plan_or.ok()) return plan_or.status();
  const GemmFamilyPlan& p = *plan_or;
  if (sm_count <= 0) sm_count = 132;
  absl::StatusOr<Sm90Resolved> resolved = ResolveSm90Config(node, p, config, sm_count, rows);
  if (!resolved.ok()) return resolved.status();
  const Sm90Resolved& r = *resolved;
  const Sm90GemmConfig& cfg = r.cfg;
  const bool swap = r.swap, tma_store = r.tma_store;
  const int64_t km = r.km, kn = r.kn;
  const Sm90StreamKSplit& sk = r.sk;

  KernelLaunch launch;
  launch.family = "gemm_sm90";
  launch.config = absl::StrCat(
      "sm90 ", Sm90GemmConfigString(cfg),
      rows != nullptr     ? absl::StrCat(" (run-time rows, at most ", rows->max_m, ")")
      : config != nullptr ? " (forced)"
                          : absl::StrCat(" (heuristic, epilogue work: ", EpilogueWorkName(p.epilogue_work), ")"));
  launch.args = {0};
  launch.args.insert(launch.args.end(), p.prologue_args.begin(), p.prologue_args.end());
  launch.args.insert(launch.args.end(), p.epilogue_args.begin(), p.epilogue_args.end());
  // Tensor maps: {contiguous, rows, batches}, 128B swizzle, boxes of 128 bytes of
  // contiguous elements (64 16-bit, 32 fp32) x the tile's rows (K-major) or bk k rows
  // (MN-major, 16-bit only).
  const uint64_t elem = DTypeSize(p.dtype);
  auto map = [&](const Shape& s, int input, int64_t batch_stride, bool k_major, int tile_rows) {
    TensorMapSpec t;
    t.tensor = InputArg(node, input);
    t.rank = 3;
    const uint64_t cols = s[s.size() - 1], rows = s[s.size() - 2];
    t.dims = {cols, rows, static_cast<uint64_t>(batch_stride == 0 ? 1 : p.batch), 0, 0};
    t.strides_bytes = {cols * elem, rows * cols * elem, 0, 0};
    t.box = {static_cast<uint32_t>(128 / elem), static_cast<uint32_t>(k_major ? tile_rows : cfg.bk), 1, 0, 0};
    t.dtype = p.dtype;
    t.swizzle_bytes = 128;
    return t;
  };
  // A cluster's CTAs each load 1/cluster_m of the kernel's K-major B tile's rows.
  if (swap) {  // the kernel's A is B (K-major when stored [N, K]), its B is A (K-major, [M, K])
    launch.tensor_maps.push_back(map(p.b_shape, p.b_input, p.b_batch, p.trans_b, cfg.bm));
    launch.tensor_maps.push_back(map(p.a_shape, p.a_input, p.a_batch, /*k_major=*/true, cfg.bn / cfg.cluster_m));
  } else {
    launch.tensor_maps.push_back(map(p.a_shape, p.a_input, p.a_batch, !p.trans_a, cfg.bm));
    launch.tensor_maps.push_back(map(p.b_shape, p.b_input, p.b_batch, p.trans_b, cfg.bn / cfg.cluster_m));
  }
  if (p.dual) {
    launch.tensor_maps.push_back(map(p.a2_shape, p.a2_input, p.a2_batch, !p.trans_a2, cfg.bm));
    launch.tensor_maps.push_back(map(p.b2_shape, p.b2_input, p.b2_batch, p.trans_b2, cfg.bn / cfg.cluster_m));
  }
  if (tma_store) {  // C [batch, M, N]: boxes of 64 columns x one consumer's rows (swapped: x BN rows)
    TensorMapSpec t;
    t.tensor = 0;
    t.rank = 3;
    t.dims = {static_cast<uint64_t>(p.c_n), static_cast<uint64_t>(p.m), static_cast<uint64_t>(p.batch), 0, 0};
    t.strides_bytes = {static_cast<uint64_t>(p.c_n) * 2, static_cast<uint64_t>(p.m * p.c_n) * 2, 0, 0};
    t.box = {64, static_cast<uint32_t>(swap ? cfg.bn : 64 * cfg.wg_m), 1, 0, 0};
    t.dtype = p.out_dtype;
    t.swizzle_bytes = 128;
    launch.tensor_maps.push_back(t);
  }

  const int out_kind = p.out_dtype == DType::kFloat16 ? 0 : p.out_dtype == DType::kBFloat16 ? 1 : 2;
  std::string src = absl::StrCat(TemplateSource("pointwise.cuh"), "\n", p.description);
  // Swapped, the kernel's operands trade places: A' = op(B)^T (M-major when B is stored
  // [K, N]), B' = op(A)^T (K-major: A stored [M, K]).
  const bool trans_a = swap ? !p.trans_b : p.trans_a, trans_b = swap ? !p.trans_a : p.trans_b;
  const bool a_batched = (swap ? p.b_batch : p.a_batch) != 0, b_batched = (swap ? p.a_batch : p.b_batch) != 0;
  absl::StrAppend(
      &src, "#define GEMM_BF16 ", p.dtype == DType::kBFloat16 ? 1 : 0,
      // Run-time rows: C's rows (the kernel's M, swapped its N) come from GEMM_M_CODE.
      rows != nullptr ? absl::StrCat("\n#define GEMM_DYNAMIC_M 1\n#define GEMM_M_CODE ((int)", rows->code, ")") : "",
      rows == nullptr || swap ? absl::StrCat("\n#define GEMM_M ", km) : "",
      rows == nullptr || !swap ? absl::StrCat("\n#define GEMM_N ", kn) : "", "\n#define GEMM_K ", p.k,
      "\n#define GEMM_BATCH ", p.batch, "\n#define GEMM_A_BATCHED ", a_batched ? 1 : 0, "\n#define GEMM_B_BATCHED ",
      b_batched ? 1 : 0, "\n#define GEMM_C_BATCH ", p.batch > 1 ? p.m * p.c_n : 0, "LL\n#define GEMM_SWAP_AB ",
      swap ? 1 : 0, "\n#define GEMM_TRANS_A ", trans_a ? 1 : 0, "\n#define GEMM_TRANS_B ", trans_b ? 1 : 0,
      "\n#define BM ", cfg.bm, "\n#define BN ", cfg.bn, "\n#define STAGES ", cfg.stages, "\n#define CONSUMERS ",
      cfg.consumers, "\n#define WG_M ", cfg.wg_m, "\n#define GEMM_PINGPONG ", cfg.pingpong ? 1 : 0,
      "\n#define GEMM_TMA_STORE ", tma_store ? 1 : 0, "\n#define GEMM_OUT_KIND ", out_kind, "\n#define GEMM_OUT_T ",
      StorageTypeName(p.out_dtype), "\n");
  if (cfg.split_k > 1) absl::StrAppend(&src, "#define GEMM_SPLIT_K ", cfg.split_k, "\n");
  if (p.tf32) absl::StrAppend(&src, "#define GEMM_TF32 1\n");
  if (cfg.bk != 64) absl::StrAppend(&src, "#define GEMM_BK ", p.tf32 ? cfg.bk / 2 : cfg.bk, "\n");
  if (cfg.cluster_m > 1) absl::StrAppend(&src, "#define GEMM_CLUSTER_M ", cfg.cluster_m, "\n");
  if (sk.sk_tiles > 0) {
    absl::StrAppend(&src, "#define GEMM_STREAM_K 1\n#define GEMM_SK_TILES ", sk.sk_tiles, "\n#define GEMM_GRID ",
                    sk.grid, "\n");
  }
  if (tma_store && Sm90CChunks(cfg) > 1) absl::StrAppend(&src, "#define GEMM_C_CHUNKS ", Sm90CChunks(cfg), "\n");
  absl::StrAppend(&src, "#define GEMM_DUAL ", p.dual ? 1 : 0, "\n");
  if (p.dual) {
    absl::StrAppend(&src, "#define GEMM_K2 ", p.k2, "\n#define GEMM_A2_BATCHED ", p.a2_batch != 0 ? 1 : 0,
                    "\n#define GEMM_B2_BATCHED ", p.b2_batch != 0 ? 1 : 0, "\n#define GEMM_TRANS_A2 ",
                    p.trans_a2 ? 1 : 0, "\n#define GEMM_TRANS_B2 ", p.trans_b2 ? 1 : 0, "\n",
                    WgmmaFunction("kiln_sm90_wgmma2", cfg.bn, p.dtype, p.trans_a2, p.trans_b2));
  }
  absl::StrAppend(&src, "#define GEMM_PROLOGUE ", p.prologue_a ? 1 : 0, "\n#define KILN_PROLOGUE_PARAMS ",
                  p.prologue_params, "\n");
  if (p.prologue_a) {
    absl::StrAppend(&src, "#define GEMM_PROLOGUE_A ", p.prologue_a_object, "\n", p.prologue_a_functor,
                    WgmmaFunction("kiln_sm90_wgmma_rs", cfg.bn, p.dtype, p.trans_a, p.trans_b, /*register_a=*/true));
  }
  absl::StrAppend(&src, p.epilogue_defines, p.epilogue_function,
                  WgmmaFunction("kiln_sm90_wgmma", cfg.bn, p.dtype, trans_a, trans_b),
                  // The template's four parts, in order (docs/kernels/gemm_sm90.md). Their
                  // text joined is the kernel: a header line in a part would move every
                  // later line and with them the cubins' line records (-lineinfo).
                  TemplateSource("wgmma_sm90.cuh"), TemplateSource("gemm_sm90.cuh"),
                  TemplateSource("gemm_sm90_mainloop.cuh"), TemplateSource("gemm_sm90_epilogue.cuh"),
                  TemplateSource("gemm_sm90_kernel.cuh"));
  launch.source = std::move(src);
  // Persistent: at most one CTA per SM, in whole clusters.
  const int64_t walkers =
      sk.sk_tiles > 0 ? sk.grid : std::min<int64_t>(r.units, std::max(sm_count / cfg.cluster_m, 1));
  launch.grid = {static_cast<uint32_t>(walkers * cfg.cluster_m), 1, 1};
  if (cfg.split_k > 1) {
    launch.semaphores = static_cast<uint32_t>(r.tiles * cfg.consumers);
  } else if (sk.sk_tiles > 0) {
    launch.semaphores = static_cast<uint32_t>(sk.sk_tiles * cfg.consumers);
  }
  launch.scratch_bytes = r.scratch;
  launch.block = {static_cast<uint32_t>(128 * (cfg.consumers + 1)), 1, 1};
  launch.shared_bytes = static_cast<uint32_t>(Sm90GemmSharedBytes(cfg, tma_store));
  launch.dim_param = rows != nullptr;
  return launch;
}

}  // namespace

absl::StatusOr<std::vector<KernelLaunch>> GenerateMatMulGroupSm90(const Node& node, const Sm90GemmConfig* config,
                                                                  int sm_count) {
  KILN_ASSIGN_OR_RETURN(KernelLaunch launch, Sm90Launch(node, config, sm_count, nullptr));
  return std::vector<KernelLaunch>{std::move(launch)};
}

absl::StatusOr<KernelLaunch> GenerateSm90RunTimeRows(const Node& node, const Sm90GemmConfig& config,
                                                     const Sm90RunTimeRows& rows, int sm_count) {
  return Sm90Launch(node, &config, sm_count, &rows);
}

absl::StatusOr<std::vector<KernelLaunch>> GenerateGemm(const Node& node, const KernelOptions& options) {
  if (options.hopper && Sm90Eligible(node).ok()) return GenerateMatMulGroupSm90(node, nullptr, options.sm_count);
  return GenerateMatMulGroup(node);
}

}  // namespace kiln::codegen::ops
