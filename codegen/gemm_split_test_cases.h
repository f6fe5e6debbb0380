// Split-K, stream-K and swapped-operand GEMM cases, shared by codegen/gemm_split_test.cc
// (no GPU) and codegen/gemm_gpu_test.cc.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <tuple>
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "codegen/gpu_test_util.h"
#include "codegen/nvrtc_module.h"
#include "codegen/kernel_choice.h"
#include "codegen/op_kernels.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_sm90.h"
#include "codegen/templates.h"
#include "common/float16.h"
#include "graph/evaluate.h"
#include "graph/fused_group.h"
#include "graph/infer_shapes.h"
#include "runtime/tensor_map.h"
#include "codegen/gemm_test_cases.h"

namespace kiln::codegen::gemm_test {
// ---------------------------------------------------------------------------------
// Split-K (GEMM_SPLIT_K in codegen/templates/gemm_sm80.cuh): K over blockIdx.y, the
// partials reduced in split order by the CTA that arrives last at its tile.

struct SplitCase {
  GemmCase c;
  std::optional<ops::GemmConfig> config;  // forced; nullopt: the heuristic's (which splits)
  // The sm90 family (codegen/templates/gemm_sm90.cuh) instead, with this forced config
  // (nullopt: the heuristic's) on `sm_count` SMs (a small grid walks many units).
  bool sm90 = false;
  std::optional<ops::Sm90GemmConfig> sm90_config;
  int sm_count = 132;
};

inline ops::GemmConfig SplitConfig(int bm, int bn, int bk, int stages, int split) {
  return ops::GemmConfig{bm, bn, bk, 2, 2, stages, split};
}

// Every group kind that splits (MatMul, matmul+epilogue with bias+GELU, bias+ReLU and
// a residual, prologue+matmul[+epilogue]) in every layout; K not a multiple of
// S * BK and rows not 16-byte aligned; M = 1; batched with B broadcast or not; 64x64,
// 32x32x64 and 128x128 tiles; fp16 and bf16.
inline std::vector<SplitCase> SplitCases() {
  std::vector<SplitCase> out;
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    auto add = [&](GemmCase c, std::optional<ops::GemmConfig> config) {
      c.dtype = dt;
      out.push_back({c, config});
    };
    // BERT-base at 128 tokens, where the heuristic splits: FFN down (+ residual, k5) and
    // M = 1 with B stored [N, K] (k6).
    add({dt, {}, 128, 768, 3072}, std::nullopt);
    add({dt, {}, 128, 768, 3072, false, false, false, Epi::kResidual}, std::nullopt);
    add({dt, {}, 1, 768, 3072, false, false, true, Epi::kBiasGelu}, std::nullopt);
    add({dt, {}, 128, 3072, 768, false, false, false, Epi::kBiasGelu}, SplitConfig(64, 64, 32, 4, 3));
    // Odd shapes: 32 k tiles in splits of 11, 11, 10; 16 of 3 x 5 + 1; each layout.
    add({dt, {}, 37, 129, 1000}, SplitConfig(64, 64, 32, 4, 3));
    add({dt, {}, 37, 129, 999, false, true, false}, SplitConfig(32, 32, 64, 4, 6));
    add({dt, {}, 37, 129, 999, false, false, true}, SplitConfig(64, 64, 32, 3, 5));
    add({dt, {}, 37, 129, 999, false, true, true, Epi::kBiasRelu}, SplitConfig(64, 64, 32, 4, 2));
    add({dt, {}, 1, 64, 520, false, false, true}, SplitConfig(64, 64, 32, 4, 4));  // 17 k tiles: 5, 5, 5, 2
    // Batched: one semaphore and S partial tiles per (batch entry, tile); with B shared
    // the batch folds into M first (one GEMM of 195 rows, split the same way).
    add({dt, {3}, 65, 130, 700, false}, SplitConfig(64, 64, 32, 4, 4));
    add({dt, {3}, 65, 130, 700, true}, SplitConfig(64, 64, 32, 4, 4));
    add({dt, {2, 3}, 33, 64, 480, false, false, false, Epi::kResidual}, SplitConfig(32, 32, 64, 4, 3));
    // Prologues see absolute coordinates: the split does not change them.
    GemmCase relu{dt, {}, 37, 129, 1000};
    relu.pro = Pro::kReluA;
    add(relu, SplitConfig(64, 64, 32, 4, 3));
    GemmCase cast{dt, {}, 64, 136, 1000, false, false, false, Epi::kBiasGelu};
    cast.pro = Pro::kCastA;
    add(cast, SplitConfig(64, 64, 32, 4, 4));
    // 128x128 tiles (128 accumulators a thread through the reduction).
    add({dt, {}, 256, 256, 2048}, SplitConfig(128, 128, 32, 3, 4));
  }
  return out;
}

struct SplitGenerated {
  std::vector<SplitCase> cases;
  std::vector<Built> built;
  std::vector<KernelLaunch> launches;
  std::vector<ModuleKernel> kernels;
};

template <class T>
const T* ptr(const T& v) {
  return &v;
}

inline ops::Sm90GemmConfig Sm90Split(int bm, int bn, int consumers, int wg_m, int stages, int split) {
  return ops::Sm90GemmConfig{bm, bn, consumers, wg_m, stages, false, split};
}

// The sm90 family's split forms: the heuristic's on few-tile shapes (M = 1..128 at
// BERT/LLM widths), every layout, both consumer counts and 128 accumulators a thread
// through the reduction; K not a multiple of S * 64 (the last split shorter); the
// register-store epilogue (N % 8 != 0, B stored [N, K]); batched with B broadcast or
// not; A-prologues; dual mainloops whose splits straddle the two K sequences; and a
// grid of 3 CTAs that walks many units (several splits of one tile in one CTA).
inline std::vector<SplitCase> Sm90SplitCases() {
  std::vector<SplitCase> out;
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    auto add = [&](GemmCase c, std::optional<ops::Sm90GemmConfig> config, int sm_count = 132) {
      c.dtype = dt;
      out.push_back({c, std::nullopt, true, config, sm_count});
    };
    add({dt, {}, 1, 768, 3072, false, false, true, Epi::kBiasGelu}, std::nullopt);
    add({dt, {}, 16, 768, 3072, false, false, false, Epi::kResidual}, std::nullopt);
    add({dt, {}, 64, 4096, 4096, false, false, true}, std::nullopt);
    add({dt, {}, 128, 768, 3072, false, false, false, Epi::kBiasGeluTanh}, std::nullopt);
    // Odd shapes: 16 k tiles in 6, 6, 4 and 3 x 5 + 1; 10 in 3, 3, 3, 1; each layout.
    add({dt, {}, 37, 136, 1000}, Sm90Split(64, 128, 1, 1, 8, 3));
    add({dt, {}, 40, 136, 1000, false, true, false}, Sm90Split(64, 128, 1, 1, 8, 6));
    add({dt, {}, 37, 136, 1000, false, false, true, Epi::kBiasRelu}, Sm90Split(128, 128, 2, 1, 4, 3));
    add({dt, {}, 40, 136, 1000, false, true, true, Epi::kBiasGelu}, Sm90Split(64, 128, 1, 1, 8, 3));
    add({dt, {}, 1, 64, 584, false, false, true}, Sm90Split(64, 128, 1, 1, 8, 4));
    // N = 130 (B stored [N, K]): C is stored from registers, not through TMA.
    add({dt, {}, 37, 130, 1000, false, false, true, Epi::kBiasGelu}, Sm90Split(64, 128, 1, 1, 8, 3));
    // 128 accumulators a thread; two m64 blocks per consumer.
    add({dt, {}, 200, 264, 2048}, Sm90Split(128, 256, 2, 1, 3, 4));
    add({dt, {}, 200, 264, 2048, false, true, false}, Sm90Split(256, 128, 2, 2, 3, 2));
    // Batched: per (batch entry, tile, consumer).
    add({dt, {3}, 65, 136, 584, true}, Sm90Split(64, 128, 1, 1, 8, 4));
    add({dt, {2, 3}, 33, 64, 480, false, false, false, Epi::kResidual}, Sm90Split(128, 128, 2, 1, 4, 3));
    // A grid of 3: several units (splits of one tile included) per CTA, the ring wraps.
    add({dt, {3}, 65, 136, 1000, false, false, true, Epi::kBiasGelu}, Sm90Split(128, 128, 2, 1, 4, 6), 3);
    // A through registers (prologue): absolute coordinates are unchanged by the split.
    GemmCase relu{dt, {}, 37, 136, 1000};
    relu.pro = Pro::kReluA;
    add(relu, Sm90Split(64, 128, 1, 1, 8, 3));
    GemmCase scale{dt, {}, 200, 264, 1000, false, true, false, Epi::kBiasGelu};
    scale.pro = Pro::kScaleBiasA;
    add(scale, Sm90Split(128, 128, 2, 1, 4, 4));
    // Dual: 16 + 4 k tiles in splits of 7 (one straddles) and of 4 (the last is all
    // of the second pair's).
    GemmCase dual{dt, {}, 65, 136, 1000, false, false, false, Epi::kBiasGelu};
    dual.dual = true;
    dual.k2 = 200;
    add(dual, Sm90Split(64, 128, 1, 1, 8, 3));
    dual.m = 72;  // A stored [K, M]: rows of 16-byte multiples
    dual.ta = true;
    dual.tb2 = true;
    add(dual, Sm90Split(128, 128, 2, 1, 4, 5), 3);
  }
  // Stream-K (Sm90StreamK's partition on `sm_count` SMs): every tile stream-K with
  // ranges shorter and longer than a tile (a CTA with a tail, a head and whole tiles
  // between), data-parallel waves before the stream-K tiles, one k tile per CTA (16
  // partials into one tile), both consumer counts and 128 accumulators a thread, the
  // register-store epilogue, A-prologues, batched, and a dual range that straddles
  // the two K sequences.
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    auto add = [&](GemmCase c, ops::Sm90GemmConfig config, int sm_count) {
      c.dtype = dt;
      config.stream_k = true;
      out.push_back({c, std::nullopt, true, config, sm_count});
    };
    add({dt, {}, 200, 264, 2048}, {128, 128, 2, 1, 4}, 5);                    // 6 tiles, 38.4 k tiles a CTA
    add({dt, {}, 200, 264, 2048, false, true, true}, {128, 256, 2, 1, 4}, 5);  // 4 tiles, grid 5
    add({dt, {}, 256, 512, 256, false, false, true, Epi::kBiasRelu}, {64, 128, 1, 1, 8}, 3);  // DP 12, SK 4
    add({dt, {}, 512, 1024, 512, false, true, false, Epi::kResidual}, {128, 256, 2, 1, 4}, 3);
    add({dt, {}, 37, 136, 1000}, {64, 128, 1, 1, 8}, 132);  // 2 tiles, grid 32: one k tile a CTA
    add({dt, {}, 37, 130, 1000, false, false, true, Epi::kBiasGelu}, {64, 128, 1, 1, 8}, 3);
    add({dt, {3}, 65, 136, 584, true}, {64, 128, 1, 1, 8}, 5);  // 12 tiles: DP 5, SK 7
    GemmCase relu{dt, {}, 37, 136, 1000};
    relu.pro = Pro::kReluA;
    add(relu, {64, 128, 1, 1, 8}, 5);
    GemmCase scale{dt, {}, 200, 264, 1000, false, true, false, Epi::kBiasGelu};
    scale.pro = Pro::kScaleBiasA;
    add(scale, {128, 128, 2, 1, 4}, 4);
    GemmCase dual{dt, {}, 72, 136, 1000, false, true, false, Epi::kBiasGelu};  // 16 + 4 k tiles
    dual.dual = true;
    dual.k2 = 200;
    dual.tb2 = true;
    add(dual, {128, 128, 2, 1, 4}, 3);
  }
  // Swap-AB: each B layout, 16, 32 and 48 columns of C^T (3 n16 pairs: a short group
  // in the reduction), two consumers, two m64 blocks, batched on a grid of 3. After
  // the others, which keep their inputs (seeds count cases).
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    auto add = [&](GemmCase c, ops::Sm90GemmConfig config, int sm_count = 132) {
      c.dtype = dt;
      out.push_back({c, std::nullopt, true, config, sm_count});
    };
    add({dt, {}, 1, 200, 584, false, false, true, Epi::kBiasGelu}, Sm90Swap(64, 16, 1, 1, 8, 4));
    add({dt, {}, 7, 136, 1000, false, false, false, Epi::kResidual}, Sm90Swap(128, 16, 2, 1, 4, 3));
    add({dt, {}, 40, 264, 1000, false, false, true}, Sm90Swap(64, 48, 1, 1, 8, 6));
    add({dt, {}, 64, 136, 1000, false, false, false, Epi::kBiasGelu}, Sm90Swap(128, 32, 1, 2, 6, 4));
    add({dt, {3}, 16, 136, 584, true, false, true}, Sm90Swap(64, 16, 1, 1, 8, 4), 3);
    // The unsplit 16-stage ring around twice (33 k tiles, a K tail), batched on 2 CTAs.
    add({dt, {2}, 8, 200, 2056, false, false, true, Epi::kBiasRelu}, Sm90Swap(64, 8, 1, 1, 16, 1), 2);
    // 128 k per stage: split in 3 (17 k tiles, a K tail of 8: splits of 6, 6, 5) with B
    // stored [N, K] (a K-major A^T), and unsplit around an 8-stage ring twice on 2 CTAs
    // with B stored [K, N] (an MN-major A^T of 128-row boxes).
    add({dt, {}, 16, 200, 2056, false, false, true, Epi::kBiasGelu}, Sm90Bk128(Sm90Swap(64, 16, 1, 1, 8, 3)));
    add({dt, {2}, 5, 136, 2056, false, false, false, Epi::kBiasRelu}, Sm90Bk128(Sm90Swap(64, 8, 1, 1, 8, 1)), 2);
  }
  // Three consumer warpgroups (192-row tiles): split-K with a partial row tile, and
  // stream-K with data-parallel tiles first (12 tiles on 5 CTAs: DP 5, SK 7).
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    auto add = [&](GemmCase c, ops::Sm90GemmConfig config, int sm_count) {
      c.dtype = dt;
      out.push_back({c, std::nullopt, true, config, sm_count});
    };
    add({dt, {}, 248, 264, 2048, false, true, false, Epi::kBiasRelu}, Sm90Split(192, 128, 3, 1, 5, 3), 132);
    add({dt, {}, 700, 296, 1000}, WithStreamK({192, 128, 3, 1, 5}), 5);
  }
  return out;
}

inline void GenerateSplit(SplitGenerated& out, bool sm90 = false) {
  uint32_t seed = 7;
  for (const SplitCase& sc : sm90 ? Sm90SplitCases() : SplitCases()) {
    seed += 10;
    if (!Wanted(sc.c.Name())) continue;
    absl::StatusOr<Built> b = Build(sc.c, seed);
    ASSERT_TRUE(b.ok()) << sc.c.Name() << ": " << b.status();
    absl::StatusOr<std::vector<KernelLaunch>> l;
    if (sc.sm90) {
      ASSERT_TRUE(ops::Sm90Eligible(*b->node).ok()) << sc.c.Name() << ": " << ops::Sm90Eligible(*b->node);
      l = ops::GenerateMatMulGroupSm90(*b->node, sc.sm90_config.has_value() ? &*sc.sm90_config : nullptr,
                                       sc.sm_count);
    } else {
      l = ops::GenerateMatMulGroup(*b->node, sc.config.has_value() ? &*sc.config : nullptr);
    }
    ASSERT_TRUE(l.ok()) << sc.c.Name() << ": " << l.status();
    ASSERT_EQ(l->size(), 1u);
    const KernelLaunch& launch = (*l)[0];
    if (sc.sm90) {
      ASSERT_TRUE(launch.source.find("#define GEMM_SPLIT_K ") != std::string::npos ||
                  launch.source.find("#define GEMM_STREAM_K 1") != std::string::npos)
          << sc.c.Name() << ": not split";
    } else {
      ASSERT_GT(launch.grid[1], 1u) << sc.c.Name() << ": not split";
    }
    out.cases.push_back(sc);
    out.kernels.push_back({absl::StrCat(sc.sm90 ? "kiln_gemm_sm90_split_" : "kiln_gemm_split_", sc.c.Name(),
                                        "_", out.cases.size()),
                           launch.source});
    out.launches.push_back(launch);
    out.built.push_back(*std::move(b));
  }
}

}  // namespace kiln::codegen::gemm_test
