// The SIMT fp32 GEMM family (codegen/templates/gemm_simt.cuh) without a GPU: every
// form compiles for sm_80 and sm_90a, the heaviest without spills; its config
// verifier and heuristic; where auto and generated modes route fp32 groups.
// GemmGpuTest runs the family's cases against the CPU reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "codegen/gemm_test_cases.h"
#include "codegen/gpu_test_util.h"
#include "codegen/kernel_choice.h"
#include "codegen/nvrtc_module.h"
#include "codegen/op_kernels.h"
#include "codegen/ops/families.h"

namespace kiln::codegen {
namespace {

using namespace gemm_test;  // NOLINT: the cases are this file's vocabulary

// Every SIMT form (layouts, 16-byte and scalar loads, loaded kinds, prologues, dual
// mainloops, epilogues, vector and scalar C stores) compiles with NVRTC for sm_80 and
// sm_90a; the heaviest (the pool's configs at 1536x1024, dual, prologues) do not spill.
TEST(GemmCodegenTest, SimtCompilesForSm80AndSm90aWithoutSpills) {
  Generated light, heavy;
  ASSERT_NO_FATAL_FAILURE(Generate(light, Select::kFormsLight, Family::kSimt));
  ASSERT_NO_FATAL_FAILURE(Generate(heavy, Select::kFormsHeavy, Family::kSimt));
  std::set<std::string> forms;
  int split = 0;
  for (const KernelLaunch& l : light.launches) {
    forms.insert(Form(l));
    EXPECT_EQ(l.family, "gemm_simt");
    split += l.source.find("#define GEMM_SPLIT_K") != std::string::npos;
  }
  EXPECT_GE(split, 1) << "no split-K form among the compiled ones";
  EXPECT_GE(forms.size(), 12u) << absl::StrJoin(forms, "\n");
  for (const char* arch : {"sm_80", "sm_90a"}) {
    absl::StatusOr<std::vector<std::string>> cubins = CompileModules(light.kernels, arch, kPerModule);
    EXPECT_TRUE(cubins.ok()) << arch << ": " << cubins.status();
  }
  ASSERT_GE(heavy.kernels.size(), 16u);
  const int pipelined = static_cast<int>(std::count_if(heavy.kernels.begin(), heavy.kernels.end(), [](const auto& k) {
    return k.source.find("#define STAGES 3") != std::string::npos ||
           k.source.find("#define STAGES 4") != std::string::npos;
  }));
  EXPECT_GE(pipelined, 6) << "the cp.async pipeline's configs on the plain and dual cases";
  EXPECT_TRUE(std::any_of(heavy.kernels.begin(), heavy.kernels.end(), [](const auto& k) {
    return k.source.find("#define STAGES 3") != std::string::npos &&
           k.source.find("#define GEMM_SPLIT_K") != std::string::npos;
  })) << "a split pipeline kernel";
  // The k-major pipeline's kernels in all four layouts (B stored [N, K] included).
  std::set<std::string> kmajor_layouts;
  for (const auto& k : heavy.kernels) {
    if (k.source.find("#define SIMT_KMAJOR 1") == std::string::npos) continue;
    kmajor_layouts.insert(absl::StrCat(k.source.find("#define GEMM_TRANS_A 1") != std::string::npos,
                                       k.source.find("#define GEMM_TRANS_B 1") != std::string::npos));
  }
  EXPECT_EQ(kmajor_layouts.size(), 4u) << absl::StrJoin(kmajor_layouts, " ");
  absl::StatusOr<std::vector<std::string>> sm80 = CompileModules(heavy.kernels, "sm_80", kPerModule);
  EXPECT_TRUE(sm80.ok()) << "sm_80: " << sm80.status();
  absl::StatusOr<ModuleInspection> inspected = InspectModule(heavy.kernels, "sm_90a");
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  int checked = 0;
  const std::string wide = absl::StrReplaceAll(ops::GemmConfigString(SimtWideO2Config()), {{" ", ""}});
  for (const KernelResources& r : ParsePtxasResources(inspected->log)) {
    // The register-staged 8-warp tile at 128 registers spills a few words (the 4092^3
    // kernel that ran fastest in the H100 sweep spilled 60 bytes); more would reach its
    // inner loop. The pipelines' 8-warp tiles sit at the same cap with 0 to 4 registers
    // to spare, and ptxas spilled 8 or 16 bytes of one or another of them in some runs
    // of the same module and none in others.
    const bool capped = absl::EndsWith(r.function, wide);
    const bool pipeline_capped = absl::EndsWith(r.function, "o2t") || absl::EndsWith(r.function, "o2");
    EXPECT_LE(r.spill_store_bytes, capped            ? 64
                                   : pipeline_capped ? 32
                                                     : 0)
        << r.function << " spills (" << r.registers << " registers)";
    std::printf("%-60s %d registers, %lld bytes spilled\n", r.function.c_str(), r.registers,
                static_cast<long long>(r.spill_store_bytes));
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(heavy.kernels.size()));
  std::printf("compiled %zu SIMT GEMM kernels (%zu forms) for sm_80 and sm_90a; %d heavy ones without spills\n",
              light.kernels.size(), forms.size(), checked);
}

TEST(GemmCodegenTest, SimtConfigVerifierAndHeuristic) {
  ops::GemmVariant simt;
  simt.simt = true;
  auto dual_variant = [](ops::GemmVariant v) {
    v.mainloops.resize(2);
    return v;
  };
  EXPECT_TRUE(ops::VerifyGemmConfig(ops::GemmConfig{128, 128, 8, 2, 2, 2}, simt).ok());
  EXPECT_TRUE(ops::VerifyGemmConfig(ops::GemmConfig{64, 32, 16, 2, 2, 2}, simt).ok());
  const absl::Status stages = ops::VerifyGemmConfig(ops::GemmConfig{128, 128, 8, 2, 2, 5}, simt);
  EXPECT_NE(stages.message().find("STAGES must be 2"), absl::string_view::npos) << stages;
  // The cp.async pipeline: fp32 A [M, K] and B [K, N] copied as they are (GemmLoad::kAsync),
  // A's rows padded to an odd number of 16-byte units; no staged registers, A's
  // fragments 4 k's deep.
  const ops::GemmConfig pipe{128, 128, 8, 2, 2, 3};
  EXPECT_TRUE(ops::VerifyGemmConfig(pipe, simt).ok());
  EXPECT_EQ(ops::GemmSharedBytes(pipe, simt), 3 * (128 * 12 + 8 * 132) * 4);
  EXPECT_EQ(ops::GemmSharedBytes(ops::GemmConfig{128, 128, 12, 2, 2, 4}, simt), 4 * (128 * 12 + 12 * 132) * 4);
  EXPECT_EQ(ops::GemmRegisterEstimate(pipe, simt), 8 * 16 + 4 * 8 + 16);
  // The tensor-core template's default (3 stages, BK 32) is too large a pipeline.
  const absl::Status smem = ops::VerifyGemmConfig(ops::GemmConfig{128, 128, 32, 2, 2, 3}, simt);
  EXPECT_NE(smem.message().find("shared memory"), absl::string_view::npos) << smem;
  for (int which = 0; which < 3; ++which) {
    ops::GemmVariant v = simt;
    if (which == 0) v.mainloops[0].a.trans = true;
    if (which == 1) v.mainloops[0].b.load = ops::GemmLoad::kStagedVector;  // a prologue
    if (which == 2) v.mainloops.push_back(ops::GemmMainloop{{}, {true, ops::GemmLoad::kAsync, 4}, 64});
    const absl::Status refused = ops::VerifyGemmConfig(ops::GemmConfig{128, 64, 16, 2, 2, 3}, v);
    EXPECT_NE(refused.message().find("cp.async pipeline"), absl::string_view::npos) << which << ": " << refused;
    EXPECT_TRUE(ops::VerifyGemmConfig(ops::GemmConfig{128, 64, 16, 2, 2, 2}, v).ok()) << which;
  }
  const absl::Status rows = ops::VerifyGemmConfig(ops::GemmConfig{128, 128, 16, 1, 2, 2}, simt);  // 128-row warps
  EXPECT_NE(rows.message().find("32 or 64 rows"), absl::string_view::npos) << rows;
  // Warp tiles of 16 and 8 rows: the k-major pipeline's only.
  const absl::Status short_rows = ops::VerifyGemmConfig(ops::GemmConfig{16, 64, 16, 1, 2, 3}, simt);
  EXPECT_NE(short_rows.message().find("8 or 16 on the k-major"), absl::string_view::npos) << short_rows;
  EXPECT_TRUE(ops::VerifyGemmConfig(ops::kSimtFewRows16Config, simt).ok());
  EXPECT_TRUE(ops::VerifyGemmConfig(ops::kSimtFewRows8Config, simt).ok());
  ops::GemmConfig split{64, 32, 16, 2, 2, 2};
  split.split_k = 4;
  ops::GemmVariant short_k = simt;
  short_k.mainloops[0].k = 40;  // 3 k tiles of 16
  EXPECT_TRUE(ops::VerifyGemmConfig(split, simt).ok());
  EXPECT_NE(ops::VerifyGemmConfig(split, short_k).message().find("without one"), absl::string_view::npos);
  // 256 threads and A's 64x4 k tile: 64 16-byte loads.
  EXPECT_NE(ops::VerifyGemmConfig(ops::GemmConfig{64, 128, 4, 2, 4, 2}, simt).message().find("16-byte loads"),
            absl::string_view::npos);
  // Registers: 8 x 16 accumulators, 8 + 16 fragments, 16 + 16 staged elements: over
  // the budget (ptxas spilled it).
  EXPECT_EQ(ops::GemmRegisterEstimate(ops::GemmConfig{128, 128, 16, 2, 2, 2}, simt), 184);
  const absl::Status regs = ops::VerifyGemmConfig(ops::GemmConfig{128, 128, 16, 2, 2, 2}, simt);
  EXPECT_NE(regs.message().find("registers"), absl::string_view::npos) << regs;
  ops::GemmVariant dual = simt;
  dual.mainloops.resize(2);
  EXPECT_FALSE(ops::VerifyGemmConfig(ops::GemmConfig{128, 128, 8, 2, 2, 2}, dual).ok());
  EXPECT_NE(ops::VerifyGemmConfig(split, dual).message().find("dual-matmul"), absl::string_view::npos);
  // 512 threads of 132 registers do not fit an SM.
  const absl::Status file = ops::VerifyGemmConfig(ops::GemmConfig{256, 128, 16, 4, 4, 2}, simt);
  EXPECT_NE(file.message().find("65536"), absl::string_view::npos) << file;
  EXPECT_EQ(ops::GemmSharedBytes(ops::GemmConfig{128, 128, 16, 2, 2, 2}, simt), 2 * (16 * 132 + 16 * 132) * 4);
  // Occupancy targets (" oN"): the text form, and the register cap of N CTAs an SM.
  for (const char* text : {"128x128x8 w2x4 s4 o2", "64x32x16 w2x2 s3 k8 o3"}) {
    absl::StatusOr<ops::GemmConfig> c = ops::ParseGemmConfig(text);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(ops::GemmConfigString(*c), text);
  }
  EXPECT_EQ(ops::ParseGemmConfig("128x128x8 w4x2 s3 o2")->min_ctas, 2);
  EXPECT_EQ(ops::ParseGemmConfig("128x128x8 w4x2 s3")->min_ctas, 1);
  for (const char* bad : {"128x128x8 w4x2 s3 o0", "128x128x8 w4x2 s3 o2 k2", "128x128x8 w4x2 s3 o"}) {
    EXPECT_FALSE(ops::ParseGemmConfig(bad).ok()) << bad;
  }
  ops::GemmConfig two{128, 128, 8, 4, 2, 4};  // 8 warps of 4 x 16 a lane: 96 registers estimated
  two.min_ctas = 2;
  EXPECT_TRUE(ops::VerifyGemmConfig(two, simt).ok()) << ops::VerifyGemmConfig(two, simt);
  EXPECT_FALSE((ops::GemmConfig{128, 128, 8, 4, 2, 4} == two));
  const absl::Status in_dual = ops::VerifyGemmConfig(two, dual_variant(simt));
  EXPECT_NE(in_dual.message().find("cap a thread at 128 registers"), absl::string_view::npos) << in_dual;
  two.min_ctas = 3;  // 85 registers
  EXPECT_NE(ops::VerifyGemmConfig(two, simt).message().find("registers"), absl::string_view::npos);
  two.min_ctas = 5;
  EXPECT_NE(ops::VerifyGemmConfig(two, simt).message().find("1 to 4"), absl::string_view::npos);
  ops::GemmConfig tc{128, 128, 32, 2, 2, 3};  // the tensor-core template takes none
  tc.min_ctas = 2;
  EXPECT_NE(ops::VerifyGemmConfig(tc, ops::GemmVariant{}).message().find("SIMT template's only"),
            absl::string_view::npos);
  // The heuristic, on the k-major pipeline where it takes the operands: 1.9 tiles per
  // SM of 128x128 take the 8-warp 128x128x8 (with B [N, K] from 3.5 the 4-warp one), of
  // 128x64 the unsplit 128x64x16; else 128x64x8 with K split in 2 or 4 (within four
  // CTAs an SM, 48 k tiles a split) where that reaches 1.9 CTAs an SM; else the k-major
  // 64x64x16 or 64x32x16 with K split in up to 8 (12 k tiles a split) to reach 1.9 CTAs
  // an SM, or 64x32x16's deepest split; a dual kernel (no split) short of those grids
  // and operands the k-major pipeline cannot copy go down the ladder of register-staged
  // tiles, splitting K where the grid is short.
  auto pick = [&](int64_t m, int64_t n, int64_t k, int64_t batch, const ops::GemmVariant& v) {
    return ops::GemmConfigString(ops::PickSimtGemmConfig(m, n, k, batch, v));
  };
  EXPECT_EQ(pick(4096, 4096, 4096, 1, simt), "128x128x8 w2x4 s3 t");  // 1024 tiles of 128x128
  EXPECT_EQ(ops::PickSimtGemmConfig(4096, 4096, 4096, 1, simt), ops::kSimtLargeConfig);
  EXPECT_EQ(pick(8192, 768, 3072, 1, simt), "128x128x8 w2x4 s3 t");    // 384 tiles
  EXPECT_EQ(pick(2048, 2048, 2048, 1, simt), "128x128x8 w2x4 s3 t");   // 256 tiles: 1.94 an SM
  EXPECT_EQ(pick(1024, 3072, 768, 1, simt), "128x64x16 w2x2 s3 t");    // 192 of 128x128, 384 of 128x64
  EXPECT_EQ(pick(2048, 1024, 1024, 1, simt), "128x64x16 w2x2 s3 t");   // 256 tiles of 128x64
  EXPECT_EQ(pick(1024, 768, 768, 4, simt), "128x64x16 w2x2 s3 t");     // 384 with the batch
  EXPECT_EQ(pick(2048, 768, 768, 1, simt), "128x64x8 w2x2 s4 k2 t");   // 192 tiles of 96 k tiles
  EXPECT_EQ(pick(512, 1024, 4096, 1, simt), "128x64x8 w2x2 s4 k4 t");  // 64 tiles of 512 k tiles
  // 128x64 grids short of 1.9 CTAs an SM: the small k-major tiles.
  EXPECT_EQ(pick(1024, 768, 768, 1, simt), "64x64x16 w2x2 s3 k2 t");   // 128x64 in 2: 192 CTAs
  EXPECT_EQ(pick(128, 4096, 1024, 1, simt), "64x64x16 w2x2 s3 k2 t");  // 128 tiles of 64x64
  EXPECT_EQ(pick(512, 768, 3072, 1, simt), "64x64x16 w2x2 s3 k4 t");   // 96 tiles
  EXPECT_EQ(pick(128, 1024, 4096, 1, simt), "64x64x16 w2x2 s3 k8 t");  // 32 tiles of 256 k tiles
  EXPECT_EQ(pick(128, 768, 3072, 1, simt), "64x32x16 w2x2 s3 k8 t");   // 64x64 in 8: 192 CTAs
  EXPECT_EQ(pick(128, 768, 768, 1, simt), "64x32x16 w2x2 s3 k4 t");    // 48 k tiles: 4 splits of 12
  // A few rows: the short warp tiles, K split in up to 16 (12 k tiles a split, three
  // CTAs an SM).
  EXPECT_EQ(pick(8, 64, 64, 1, simt), "8x64x32 w1x2 s3 t");            // 2 k tiles: too short to split
  EXPECT_EQ(pick(1, 4096, 4096, 1, simt), "8x64x32 w1x2 s3 k4 t");     // 64 tiles of 128 k tiles
  EXPECT_EQ(pick(16, 3072, 768, 1, simt), "16x64x16 w1x2 s3 k4 t");    // 48 k tiles: 4 splits of 12
  EXPECT_EQ(pick(32, 768, 4096, 1, simt), "16x64x16 w1x2 s3 k16 t");   // 24 tiles of 256 k tiles
  EXPECT_EQ(pick(64, 768, 768, 1, simt), "64x32x16 w2x2 s3 k4 t");     // 64 rows: the 64-row tiles
  ops::GemmVariant staged = simt;                                      // B [N, K]: the k-major pipeline
  staged.mainloops[0].b.trans = true;
  EXPECT_EQ(pick(4096, 4096, 4096, 1, staged), "128x128x8 w2x2 s4 t");  // 1024 tiles: 7.8 an SM
  EXPECT_EQ(pick(2048, 2048, 2048, 1, staged), "128x128x8 w2x4 s3 t");   // 256: 1.9 an SM, not 3.5
  EXPECT_EQ(pick(2048, 1024, 1024, 1, staged), "128x64x16 w2x2 s3 t");
  EXPECT_EQ(pick(128, 768, 3072, 1, staged), "64x32x16 w2x2 s3 k8 t");
  EXPECT_EQ(pick(8, 1024, 1024, 1, staged), "8x64x32 w1x2 s3 k2 t");
  EXPECT_EQ(pick(4096, 4096, 4096, 1, dual), "128x128x8 w2x4 s3 t");  // each mainloop k-major
  ops::GemmVariant prologue = simt;  // the 8-warp tile spills more with a prologue
  prologue.mainloops[0].a.load = ops::GemmLoad::kStagedVector;
  EXPECT_EQ(pick(4096, 4096, 4096, 1, prologue), "128x128x8 w2x2 s2");
  EXPECT_EQ(pick(128, 768, 3072, 1, prologue), "64x32x16 w2x2 s2 k8");  // 48 tiles of 192 k tiles
  EXPECT_EQ(pick(128, 768, 3072, 1, dual), "64x32x16 w2x2 s2");         // no split with two mainloops
  const std::vector<ops::GemmConfig> candidates = ops::SimtGemmCandidateConfigs(4096, 4096, 4096, 1, simt);
  ASSERT_GE(candidates.size(), 10u);
  EXPECT_EQ(candidates[0], ops::PickSimtGemmConfig(4096, 4096, 4096, 1, simt));
  const std::vector<ops::GemmConfig> few_rows = ops::SimtGemmCandidateConfigs(128, 768, 3072, 1, simt);
  EXPECT_GE(std::count_if(few_rows.begin(), few_rows.end(), [](const ops::GemmConfig& c) { return c.split_k > 1; }), 3);
  EXPECT_NE(std::find_if(few_rows.begin(), few_rows.end(),
                         [](const ops::GemmConfig& c) { return c.kmajor && c.bm == 64 && c.bn == 64; }),
            few_rows.end())
      << "--tune measures the k-major 64x64x16";
  for (const ops::GemmConfig& c : few_rows)
    EXPECT_TRUE(ops::VerifyGemmConfig(c, simt).ok()) << ops::GemmConfigString(c);
  for (const ops::GemmConfig& c : candidates)
    EXPECT_TRUE(ops::VerifyGemmConfig(c, simt).ok()) << ops::GemmConfigString(c);
}

// fp32 MatMul groups: --matmul-groups generated puts each on the SIMT template (the
// Hopper family never takes them); auto on sm_90a leaves them to cuBLASLt (whole, or
// expanded where it has no such epilogue or prologue), saying why; auto without
// `hopper` generates them like every other group.
// The k-major pipeline (" t"): its text form; any layout of fp32 operands without a
// prologue, in one or two mainloops; STAGES k tiles of A [BK][BM + 4] and B [BK][BN +
// 4]; two k's of fragments and no staged loads; the SIMT template's only.
TEST(GemmCodegenTest, SimtKMajorConfig) {
  ops::GemmVariant simt;
  simt.simt = true;
  for (const char* text : {"128x128x16 w2x4 s4 o2 t", "64x32x16 w2x2 s3 k8 t", "128x64x16 w2x2 s3 t"}) {
    absl::StatusOr<ops::GemmConfig> c = ops::ParseGemmConfig(text);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(c->kmajor) << text;
    EXPECT_EQ(ops::GemmConfigString(*c), text);
  }
  EXPECT_FALSE(ops::ParseGemmConfig("128x128x16 w2x4 s4 o2")->kmajor);
  for (const char* bad : {"128x128x16 w2x4 s4 t o2", "128x128x16 w2x4 s4 o2 t t", "128x128x16 w2x4 s4 o2 x"}) {
    EXPECT_FALSE(ops::ParseGemmConfig(bad).ok()) << bad;
  }
  ops::GemmConfig c{128, 128, 16, 2, 4, 4, 1, 2, true};
  EXPECT_FALSE((c == ops::GemmConfig{128, 128, 16, 2, 4, 4, 1, 2}));
  EXPECT_EQ(ops::GemmSharedBytes(c, simt), 4 * (16 * 132 + 16 * 132) * 4);
  EXPECT_EQ(ops::GemmRegisterEstimate(c, simt), 8 * 8 + 2 * (8 + 8));
  for (int layout = 0; layout < 4; ++layout) {  // A [M, K] or [K, M] x B [K, N] or [N, K]
    ops::GemmVariant v = simt;
    v.mainloops[0].a.trans = layout & 1;
    v.mainloops[0].b.trans = layout & 2;
    EXPECT_TRUE(ops::VerifyGemmConfig(c, v).ok()) << layout << ": " << ops::VerifyGemmConfig(c, v);
  }
  for (int which = 0; which < 3; ++which) {
    ops::GemmVariant v = simt;
    if (which == 0) v.mainloops[0].b.load = ops::GemmLoad::kStagedVector;  // a prologue
    if (which == 1) v.mainloops[0].a.load = ops::GemmLoad::kStagedScalar;  // fp16, or rows of 4n + 1
    if (which == 2) v.mainloops.push_back(ops::GemmMainloop{{}, {true, ops::GemmLoad::kStagedScalar, 4}, 64});
    const absl::Status refused = ops::VerifyGemmConfig(ops::GemmConfig{128, 64, 16, 2, 2, 3, 1, 1, true}, v);
    EXPECT_NE(refused.message().find("k-major pipeline (t) takes fp32"), absl::string_view::npos)
        << which << ": " << refused;
  }
  ops::GemmVariant dual = simt;
  dual.mainloops.push_back(ops::GemmMainloop{{true, ops::GemmLoad::kAsync, 4}, {true, ops::GemmLoad::kAsync, 4}, 64});
  EXPECT_TRUE(ops::VerifyGemmConfig(ops::GemmConfig{128, 64, 16, 2, 2, 3, 1, 1, true}, dual).ok());
  // BK 12: a row of 12 elements neither divides 128 threads nor splits into them.
  const absl::Status rows = ops::VerifyGemmConfig(ops::GemmConfig{128, 128, 12, 2, 2, 3, 1, 1, true}, simt);
  EXPECT_NE(rows.message().find("rows of 12 items"), absl::string_view::npos) << rows;
  EXPECT_NE(ops::VerifyGemmConfig(ops::GemmConfig{128, 128, 32, 2, 2, 3, 1, 1, true}, ops::GemmVariant{})
                .message()
                .find("SIMT template's only"),
            absl::string_view::npos);
}

TEST(GemmCodegenTest, SimtRouting) {
  KernelOptions generated, automatic;
  generated.matmul_groups = MatMulGroups::kGenerated;
  generated.hopper = automatic.hopper = true;
  automatic.matmul_groups = MatMulGroups::kAuto;
  GemmCase pro{DType::kFloat32, {}, 64, 64, 64};
  pro.pro = Pro::kReluA;
  struct Route {
    GemmCase c;
    KernelKind on_auto;
  };
  for (const Route& r :
       {Route{{DType::kFloat32, {}, 256, 512, 128, false, false, false, Epi::kBiasRelu}, KernelKind::kLibrary},
        Route{{DType::kFloat32, {}, 256, 512, 128, false, false, false, Epi::kBiasGelu}, KernelKind::kNone},
        Route{pro, KernelKind::kNone}}) {
    absl::StatusOr<Built> b = Build(r.c, 1);
    ASSERT_TRUE(b.ok()) << b.status();
    const absl::Status sm90 = ops::Sm90Eligible(*b->node);
    EXPECT_NE(sm90.message().find("f32 operands"), absl::string_view::npos) << sm90;
    const KernelChoice all = ChooseKernel(*b->node, generated);
    EXPECT_EQ(all.kind, KernelKind::kGemm) << r.c.Name() << ": " << all.Describe();
    absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*b->node, generated);
    ASSERT_TRUE(l.ok()) << r.c.Name() << ": " << l.status();
    EXPECT_EQ((*l)[0].family, "gemm_simt");
    const KernelChoice choice = ChooseKernel(*b->node, automatic);
    EXPECT_EQ(choice.kind, r.on_auto) << r.c.Name() << ": " << choice.Describe();
    EXPECT_NE(choice.reason.find("SIMT GEMM runs behind cublasSgemm"), std::string::npos) << choice.reason;
    KernelOptions sm80 = automatic;
    sm80.hopper = false;
    EXPECT_EQ(ChooseKernel(*b->node, sm80).kind, KernelKind::kGemm) << r.c.Name();
  }
}

}  // namespace
}  // namespace kiln::codegen
