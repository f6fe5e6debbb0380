// GEMM tile configs of the SIMT template (codegen/templates/gemm_simt.cuh) that its
// heuristic does not pick on the test cases, forced on them by gemm_test_cases.h so
// that NVRTC compiles them (codegen/gemm_simt_test.cc) and the GPU runs them against
// the CPU reference (codegen/gemm_gpu_test.cc).
#pragma once

#include <vector>

#include "codegen/ops/families.h"

namespace kiln::codegen::gemm_test {

// Configs of the SIMT pool the heuristic leaves out, each run on one case.
inline std::vector<ops::GemmConfig> SimtExtraConfigs() {
  return {{128, 128, 16, 4, 2, 2}, {128, 128, 16, 2, 4, 2}, {128, 256, 16, 2, 4, 2}, {256, 128, 16, 4, 2, 2},
          {64, 128, 16, 2, 2, 2},  {128, 64, 32, 2, 2, 2},  {64, 64, 16, 2, 2, 2},   {32, 64, 16, 1, 2, 2}};
}

// The SIMT template's cp.async pipeline (STAGES 3 and 4): BK 8 (A rows padded to 12
// floats) and 12 (unpadded), warp tiles of 4 and 8 rows, one to four column slices,
// 4 and 8 warps (8 x 8 a lane: CUTLASS's SIMT sgemm's thread tile), 8 warps compiled
// for two CTAs an SM (" o2": at most 128 registers) in both warp grids (with 2x4 warps
// ptxas spills 8 bytes there on 3 and on 4 stages, which the spill check allows).
inline std::vector<ops::GemmConfig> SimtPipelineConfigs() {
  return {{128, 128, 8, 2, 2, 3},       {128, 128, 12, 2, 2, 4},     {128, 128, 8, 2, 4, 4},
          {128, 64, 16, 2, 2, 3},       {64, 32, 16, 2, 2, 4},       {128, 128, 8, 2, 4, 3, 1, 2},
          {128, 128, 8, 4, 2, 4, 1, 2}, {128, 128, 8, 4, 2, 3, 1, 2}};
}
// The register-staged 8-warp tile compiled for two CTAs an SM (128 registers: ptxas
// spills a few words), a --tune candidate on every case it takes.
inline ops::GemmConfig SimtWideO2Config() { return {128, 128, 16, 2, 4, 2, 1, 2}; }
// The k-major pipeline (" t": fp32 operands without a prologue in any layout, A and
// B copied k-major by cp.async, fragments one k ahead): the 8-warp 8 x 8-a-lane tile
// in two CTAs an SM on 2 to 4 stages, the small 4-warp tiles (4 x 8 and 4 x 4 a
// lane), the heuristic's four (kSimtSplitConfig split in 2), the 8-warp 8 x 16-a-lane
// tile and the few-rows tiles of 16 and 8 rows (2 x 8 and 1 x 8 a lane).
inline std::vector<ops::GemmConfig> SimtKMajorConfigs() {
  ops::GemmConfig split = ops::kSimtSplitConfig;
  split.split_k = 2;
  return {{128, 128, 16, 2, 4, 4, 1, 2, true},
          {128, 128, 16, 2, 4, 3, 1, 2, true},
          {128, 128, 16, 2, 4, 2, 1, 2, true},
          {64, 64, 16, 2, 2, 3, 1, 1, true},
          {64, 32, 16, 2, 2, 4, 1, 1, true},
          ops::kSimtLargeConfig,
          ops::kSimtLargeNkConfig,
          ops::kSimtMidConfig,
          split,
          {128, 256, 8, 2, 4, 4, 1, 1, true},
          {16, 64, 16, 1, 2, 3, 1, 1, true},
          {8, 64, 32, 1, 2, 3, 1, 1, true}};
}
// Split in 8, on the few-rows case.
inline std::vector<ops::GemmConfig> SimtKMajorSplits() {
  return {{64, 32, 16, 2, 2, 3, 8, 1, true}, {16, 64, 16, 1, 2, 3, 8, 1, true}};
}

}  // namespace kiln::codegen::gemm_test
