// Tests of split-K, stream-K and swapped-operand GEMMs that need no GPU: config
// strings, verifiers and heuristics, launches and workspaces, NVRTC compiles without
// spills for sm_80 and sm_90a.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
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
#include "codegen/gemm_split_test_cases.h"

namespace kiln::codegen {
namespace {

using namespace gemm_test;  // NOLINT: the cases are this file's vocabulary

TEST(GemmCodegenTest, SplitKConfigStringsVerifierAndHeuristic) {
  // Strings: " kS" after the stages when split; old strings parse as unsplit.
  for (const char* text : {"64x128x32 w2x2 s3 k4", "128x128x32 w2x2 s3", "32x32x64 w2x2 s4 k32"}) {
    absl::StatusOr<ops::GemmConfig> c = ops::ParseGemmConfig(text);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(ops::GemmConfigString(*c), text);
  }
  EXPECT_EQ(ops::ParseGemmConfig("128x128x32 w2x2 s3")->split_k, 1);
  EXPECT_EQ(ops::ParseGemmConfig("64x128x32 w2x2 s3 k4")->split_k, 4);
  for (const char* bad : {"64x64x32 w2x2 s4 k0", "64x64x32 w2x2 s4 x4", "64x64x32 w2x2 s4 k", "64x64x32 w2x2 s4 k2 k2"}) {
    EXPECT_FALSE(ops::ParseGemmConfig(bad).ok()) << bad;
  }
  EXPECT_FALSE(ops::GemmConfig{} == SplitConfig(128, 128, 32, 3, 2));

  // Verifier: every split needs a k tile; no split of a dual kernel; S <= 32.
  ops::GemmVariant k8;
  k8.mainloops[0].k = 8;
  EXPECT_TRUE(ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 1), k8).ok());
  const absl::Status k8_split = ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 2), k8);
  EXPECT_NE(k8_split.message().find("without one"), absl::string_view::npos) << k8_split;
  ops::GemmVariant k100;  // 4 k tiles of 32: 2 splits of 2 fit, 3 of 2 leave one empty
  k100.mainloops[0].k = 100;
  EXPECT_TRUE(ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 2), k100).ok());
  EXPECT_TRUE(ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 4), k100).ok());
  EXPECT_FALSE(ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 3), k100).ok());
  EXPECT_FALSE(ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 5), k100).ok());
  EXPECT_TRUE(ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 3)).ok());  // K unknown
  EXPECT_FALSE(ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 33)).ok());
  EXPECT_FALSE(ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 0)).ok());
  ops::GemmVariant dual;
  dual.mainloops.resize(2);
  EXPECT_NE(ops::VerifyGemmConfig(SplitConfig(64, 64, 32, 4, 2), dual).message().find("dual"),
            absl::string_view::npos);

  // PickGemmSplitK (132 SMs unless named): split when the tiles fill at most half the
  // SMs, S = min(SMs / tiles, k tiles / 16), then the fewest splits of the same length.
  const ops::GemmConfig t64 = SplitConfig(64, 64, 32, 4, 1);
  EXPECT_EQ(ops::PickGemmSplitK(t64, 128, 768, 3072, 1), 5);   // 24 tiles, 96 k tiles: 5 x 20 (BERT FFN down)
  EXPECT_EQ(ops::PickGemmSplitK(t64, 128, 768, 768, 1), 1);    // 24 k tiles: too short (attention out)
  EXPECT_EQ(ops::PickGemmSplitK(t64, 128, 768, 768, 1, 0, 4), 5);  // the candidates' 4: 5 x 5
  EXPECT_EQ(ops::PickGemmSplitK(t64, 128, 3072, 768, 1), 1);   // 96 tiles (FFN up)
  EXPECT_EQ(ops::PickGemmSplitK(t64, 128, 768, 3072, 3), 1);   // a batch of 3: 72 tiles
  EXPECT_EQ(ops::PickGemmSplitK(t64, 512, 768, 3072, 1), 1);   // 96 tiles
  EXPECT_EQ(ops::PickGemmSplitK(t64, 1, 768, 3072, 1), 6);     // 12 tiles: min(11, 6) x 16
  EXPECT_EQ(ops::PickGemmSplitK(t64, 49, 512, 4608, 1), 9);    // 8 tiles: min(16, 9) x 16
  EXPECT_EQ(ops::PickGemmSplitK(t64, 128, 768, 3072, 1, 108), 4);  // an A100's 108 SMs: 4 x 24
  EXPECT_EQ(ops::PickGemmSplitK(t64, 1, 64, 8, 1), 1);         // K = 8: one k tile
  EXPECT_EQ(ops::PickGemmSplitK(t64, 1, 64, 992, 1), 1);       // 31 k tiles: fewer than 2 x 16
  EXPECT_EQ(ops::PickGemmSplitK(t64, 1, 64, 1024, 1), 2);
  EXPECT_EQ(ops::PickGemmSplitK(t64, 1, 64, 65536, 1), 32);    // at most kGemmMaxSplitK
  EXPECT_EQ(ops::PickGemmSplitK(t64, 1, 64, 2000, 1, 0, 4), 13);  // 63 k tiles: 15 by count, 5 each: 13 splits
  // HeuristicGemmConfig: the split when it fills at least half the SMs, else 32x32x64
  // tiles for an under-filled grid; 64x64 (or 128x128) once the tiles fill the GPU.
  auto heuristic = [](int64_t m, int64_t n, int64_t k, int64_t batch = 1) {
    ops::GemmProblem p;
    p.m = m;
    p.n = n;
    p.k = {k};
    p.batch = batch;
    p.variant.mainloops[0].k = k;
    return ops::GemmConfigString(ops::HeuristicGemmConfig(p));
  };
  EXPECT_EQ(heuristic(128, 768, 3072), "64x64x32 w2x2 s4 k5");   // 120 CTAs
  EXPECT_EQ(heuristic(128, 1024, 4096), "64x64x32 w2x2 s4 k4");  // 128 CTAs
  EXPECT_EQ(heuristic(1, 768, 3072), "64x64x32 w2x2 s4 k6");     // 72 CTAs
  EXPECT_EQ(heuristic(128, 768, 768), "32x32x64 w2x2 s4");       // too short to split: 96 small tiles
  EXPECT_EQ(heuristic(128, 1024, 1024), "32x32x64 w2x2 s4");     // k2 would give 64 CTAs of 132
  EXPECT_EQ(heuristic(128, 3072, 768), "64x64x32 w2x2 s4");      // 96 tiles
  EXPECT_EQ(heuristic(128, 768, 768, 3), "64x64x32 w2x2 s4");    // 72 tiles
  EXPECT_EQ(heuristic(4096, 4096, 1024), "128x128x32 w2x2 s3");
  ops::GemmProblem bert;
  bert.m = 128;
  bert.n = 768;
  bert.k = {3072};
  bert.variant.mainloops[0].k = 3072;
  ops::GemmProblem bert_dual = bert;
  bert_dual.k = {3072, 768};
  bert_dual.variant.mainloops.resize(2);
  EXPECT_EQ(ops::HeuristicGemmConfig(bert_dual).split_k, 1);
  // Candidates: the heuristic's (split) first, then unsplit tiles, then split forms.
  const std::vector<ops::GemmConfig> cands = ops::GemmCandidateConfigs(bert);
  int split = 0;
  for (const ops::GemmConfig& c : cands) {
    EXPECT_TRUE(ops::VerifyGemmConfig(c, bert.variant).ok()) << ops::GemmConfigString(c);
    split += c.split_k > 1;
  }
  EXPECT_EQ(cands[0].split_k, 5);
  EXPECT_GE(split, 4);
  EXPECT_LE(split, ops::kGemmMaxSplitCandidates + 1);
  ops::GemmProblem large = bert;
  large.m = 8192;
  for (const ops::GemmConfig& c : ops::GemmCandidateConfigs(large)) EXPECT_EQ(c.split_k, 1);
}

// The generated launch: grid (tiles, S, batch), the workspace sizes, the #define and
// the two workspace parameters; a split that leaves a split without K is refused.
TEST(GemmCodegenTest, SplitKLaunches) {
  absl::StatusOr<Built> bert = Build(GemmCase{DType::kFloat16, {}, 128, 768, 3072, false, false, false,
                                              Epi::kBiasGelu}, 1);
  ASSERT_TRUE(bert.ok()) << bert.status();
  KernelOptions options;
  options.matmul_groups = codegen::MatMulGroups::kGenerated;
  absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*bert->node, options);
  ASSERT_TRUE(l.ok()) << l.status();
  const KernelLaunch& k = (*l)[0];
  EXPECT_EQ(k.grid, (std::array<uint32_t, 3>{24, 5, 1}));
  EXPECT_EQ(k.semaphores, 24u);
  EXPECT_EQ(k.scratch_bytes, 24u * 5 * 64 * 64 * 4);
  EXPECT_NE(k.source.find("#define GEMM_SPLIT_K 5\n"), std::string::npos);
  EXPECT_NE(k.source.find("unsigned int* __restrict__ kiln_semaphores, float* __restrict__ kiln_scratch"),
            std::string::npos);
  EXPECT_EQ(k.args, (std::vector<int>{0, 1, 2, 3}));  // C, A, B, bias: the workspace is not a tensor

  // Batched: per (batch, tile). B per batch: with B shared the batch would fold into M.
  absl::StatusOr<Built> batched = Build(GemmCase{DType::kBFloat16, {3}, 65, 130, 700, false}, 1);
  ASSERT_TRUE(batched.ok());
  const ops::GemmConfig four = SplitConfig(64, 64, 32, 4, 4);
  absl::StatusOr<std::vector<KernelLaunch>> b = ops::GenerateMatMulGroup(*batched->node, &four);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)[0].grid, (std::array<uint32_t, 3>{6, 4, 3}));
  EXPECT_EQ((*b)[0].semaphores, 18u);
  EXPECT_EQ((*b)[0].scratch_bytes, 18u * 4 * 64 * 64 * 4);

  // Unsplit launches have no workspace and their sources do not mention it.
  absl::StatusOr<Built> big = Build(GemmCase{DType::kFloat16, {}, 1024, 768, 768}, 1);
  ASSERT_TRUE(big.ok());
  absl::StatusOr<std::vector<KernelLaunch>> u = ops::GenerateMatMulGroup(*big->node);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ((*u)[0].grid[1], 1u);
  EXPECT_EQ((*u)[0].semaphores, 0u);
  EXPECT_EQ((*u)[0].scratch_bytes, 0u);
  EXPECT_NE((*u)[0].source.find("#define STAGES 4\n#define GEMM_OUT_T "), std::string::npos);  // no GEMM_SPLIT_K

  // K = 8 (one k tile): a forced split is refused, the heuristic does not split.
  absl::StatusOr<Built> k8 = Build(GemmCase{DType::kFloat16, {}, 1, 64, 8}, 1);
  ASSERT_TRUE(k8.ok());
  const ops::GemmConfig two = SplitConfig(64, 64, 32, 4, 2);
  const absl::Status refused = ops::GenerateMatMulGroup(*k8->node, &two).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("K = 8"), absl::string_view::npos) << refused;
  EXPECT_EQ((*ops::GenerateMatMulGroup(*k8->node))[0].grid[1], 1u);
  // A dual group is never split.
  GemmCase dual{DType::kFloat16, {}, 128, 768, 3072};
  dual.dual = true;
  dual.k2 = 3072;
  absl::StatusOr<Built> d = Build(dual, 1);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*ops::GenerateMatMulGroup(*d->node))[0].grid[1], 1u);
  EXPECT_EQ(ops::GenerateMatMulGroup(*d->node, &two).status().code(), absl::StatusCode::kInvalidArgument);
  // Scratch beyond kGemmMaxScratchBytes: refused for a forced config.
  absl::StatusOr<Built> huge = Build(GemmCase{DType::kFloat16, {}, 4096, 4096, 1024}, 1);  // 1024 tiles x 32 x 64 KiB
  ASSERT_TRUE(huge.ok());
  const ops::GemmConfig wide = SplitConfig(128, 128, 32, 3, 32);
  const absl::Status scratch = ops::GenerateMatMulGroup(*huge->node, &wide).status();
  EXPECT_NE(scratch.message().find("bytes of scratch"), absl::string_view::npos) << scratch;
}

// Every split form compiles for sm_80 and sm_90a without spills (the reduction keeps
// the partial sums of one fragment at a time).
TEST(GemmCodegenTest, SplitKCompilesWithoutSpills) {
  SplitGenerated gen;
  ASSERT_NO_FATAL_FAILURE(GenerateSplit(gen));
  std::vector<ModuleKernel> kernels;
  int bf16 = 0;
  for (size_t i = 0; i < gen.cases.size(); ++i) {
    // Every fp16 case, and the first three bf16 ones (registers do not depend on it).
    if (gen.cases[i].c.dtype == DType::kFloat16 || bf16++ < 3) kernels.push_back(gen.kernels[i]);
  }
  for (const char* arch : {"sm_80", "sm_90a"}) {
    absl::StatusOr<ModuleInspection> inspected = InspectModule(kernels, arch);
    ASSERT_TRUE(inspected.ok()) << arch << ": " << inspected.status();
    const std::vector<KernelResources> resources = ParsePtxasResources(inspected->log);
    EXPECT_EQ(resources.size(), kernels.size()) << arch;
    for (const KernelResources& r : resources) {
      EXPECT_EQ(r.spill_store_bytes, 0) << arch << " " << r.function << " spills (" << r.registers << " registers)";
      if (std::getenv("KILN_GEMM_TEST_VERBOSE") != nullptr) {
        std::printf("%s %-60s %d registers\n", arch, r.function.c_str(), r.registers);
      }
    }
    EXPECT_NE(inspected->ptx.find("atom.global.add.u32"), std::string::npos) << arch;
    EXPECT_NE(inspected->ptx.find("ld.global.cg.v4.f32"), std::string::npos) << arch;
  }
  std::printf("compiled %zu split-K GEMM kernels for sm_80 and sm_90a\n", kernels.size());
}

// The sm90 split and stream-K forms compile for sm_90a without spills or a stack,
// with setmaxnreg honoured and the wgmmas not serialized; the reductions are there
// (the semaphore atomic, L2-only partial loads, the warpgroup's barrier reduction,
// stream-K's acquiring wait).
TEST(GemmCodegenTest, Sm90SplitKCompilesWithoutSpills) {
  SplitGenerated gen;
  ASSERT_NO_FATAL_FAILURE(GenerateSplit(gen, /*sm90=*/true));
  std::vector<ModuleKernel> kernels;
  for (size_t i = 0; i < gen.cases.size(); ++i) {
    if (gen.cases[i].c.dtype == DType::kFloat16) kernels.push_back(gen.kernels[i]);  // registers do not depend on it
  }
  absl::StatusOr<ModuleInspection> inspected = InspectModule(kernels, "sm_90a");
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  ExpectWgmmaPipelineKept(inspected->log);
  const std::vector<KernelResources> resources = ParsePtxasResources(inspected->log);
  EXPECT_EQ(resources.size(), kernels.size());
  for (const KernelResources& r : resources) {
    EXPECT_EQ(r.spill_store_bytes, 0) << r.function << " spills (" << r.registers << " registers)";
    EXPECT_EQ(r.stack_bytes, 0) << r.function << " has a stack frame";
    if (std::getenv("KILN_GEMM_TEST_VERBOSE") != nullptr) {
      std::printf("%-70s %d registers\n", r.function.c_str(), r.registers);
    }
  }
  EXPECT_NE(inspected->ptx.find("atom.global.add.u32"), std::string::npos);
  EXPECT_NE(inspected->ptx.find("ld.global.cg.v4.f32"), std::string::npos);
  EXPECT_NE(inspected->ptx.find("bar.red.or.pred"), std::string::npos);
  EXPECT_NE(inspected->ptx.find("ld.acquire.gpu.global.u32"), std::string::npos);  // stream-K's wait
  std::printf("compiled %zu sm90 split-K and stream-K GEMM kernels for sm_90a\n", kernels.size());
}

// Config strings, the verifier, the split heuristic and the launches' workspace.
TEST(GemmCodegenTest, Sm90SplitKConfigsHeuristicAndLaunches) {
  for (const char* text : {"64x128 c1x1 s8 k6", "128x256 c2x1 s3 k2", "64x128 c1x1 s8"}) {
    absl::StatusOr<ops::Sm90GemmConfig> c = ops::ParseSm90GemmConfig(text);
    ASSERT_TRUE(c.ok()) << text << ": " << c.status();
    EXPECT_EQ(ops::Sm90GemmConfigString(*c), text);
  }
  EXPECT_EQ(ops::ParseSm90GemmConfig("64x128 c1x1 s8 k6")->split_k, 6);
  for (const char* bad : {"64x128 c1x1 s8 k", "64x128 c1x1 s8 k0", "64x128 c1x1 s8 k33", "64x128 c1x1 s8 x2",
                          "64x256 p2x1 s4 k2"}) {
    EXPECT_FALSE(ops::ParseSm90GemmConfig(bad).ok()) << bad;
  }
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{64, 256, 2, 1, 4, true, 2}).message().find("cooperative"),
            std::string::npos);
  // Splits only when the tiles fill at most half the SMs and K gives every split
  // kSm90MinSplitKTiles k tiles; the fewest splits of that length. The few-tiles
  // rule's 64x64 tiles fill every SM, with kSm90SmallTileMinSplitKTiles k tiles a split.
  const int min_tiles = ops::kSm90MinSplitKTiles, small_min_tiles = ops::kSm90SmallTileMinSplitKTiles;
  EXPECT_EQ(ops::PickSm90GemmConfig(4096, 4096, 4096, 1, 132).split_k, 1);
  EXPECT_EQ(ops::PickSm90GemmConfig(2048, 768, 3072, 1, 132).split_k, 1);
  EXPECT_EQ(ops::PickSm90GemmConfig(16, 768, 768, 1, 132).split_k,
            12 / small_min_tiles >= 2 ? 12 / small_min_tiles : 1);
  const ops::Sm90GemmConfig m16 = ops::PickSm90GemmConfig(16, 768, 3072, 1, 132);  // 12 tiles of 64x64, 48 k tiles
  EXPECT_EQ(ops::Sm90GemmConfigString(m16).substr(0, 13), "64x64 c1x1 s8");
  EXPECT_EQ(m16.split_k, ops::PickSm90SplitK(m16, 16, 768, 3072, 1, 132, small_min_tiles, 132));
  EXPECT_EQ(m16.split_k, 4);
  EXPECT_EQ(ops::PickSm90SplitK(m16, 16, 768, 3072, 1, 132), 3);  // half the SMs, 16 k tiles a split
  EXPECT_EQ(ops::PickSm90GemmConfig(16, 768, 4096, 1, 132).split_k, 4);  // 5 of 13 would fit: at most 4
  EXPECT_GE(48 / ops::PickSm90SplitK(m16, 16, 768, 3072, 1, 132), min_tiles);
  EXPECT_EQ(ops::PickSm90SplitK(ops::Sm90GemmConfig{64, 128, 1, 1, 8}, 16, 768, 3072, 1, 132, 4), 10);  // 11 of 5 -> 10
  EXPECT_EQ(ops::PickSm90SplitK(ops::Sm90GemmConfig{64, 128, 1, 1, 8}, 16, 768, 3072, 1, 132, 5), 8);  // 6 each
  EXPECT_EQ(ops::PickSm90SplitK(ops::Sm90GemmConfig{64, 128, 1, 1, 8}, 16, 768, 3072, 12, 132, 4), 1);  // 72 tiles
  EXPECT_EQ(ops::PickSm90SplitK(ops::Sm90GemmConfig{64, 256, 2, 1, 4, true}, 16, 768, 3072, 1, 132, 4), 1);

  // A forced split: grid = units, the workspace per (tile, consumer), the parameters.
  // B per batch entry, so that the batch stays (a shared B folds it into M).
  absl::StatusOr<Built> b = Build(GemmCase{DType::kFloat16, {3}, 65, 136, 1000}, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  const ops::Sm90GemmConfig two_wg = Sm90Split(128, 128, 2, 1, 4, 3);  // 1 x 2 tiles x 3 batches
  absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateMatMulGroupSm90(*b->node, &two_wg, 132);
  ASSERT_TRUE(l.ok()) << l.status();
  const KernelLaunch& k = (*l)[0];
  EXPECT_EQ(k.grid, (std::array<uint32_t, 3>{18, 1, 1}));
  EXPECT_EQ(k.semaphores, 6u * 2);
  EXPECT_EQ(k.scratch_bytes, 6u * 3 * 128 * 128 * 4);
  EXPECT_NE(k.source.find("#define GEMM_SPLIT_K 3\n"), std::string::npos);
  EXPECT_EQ(k.args, (std::vector<int>{0}));  // C: the workspace is not a tensor
  EXPECT_EQ((*ops::GenerateMatMulGroupSm90(*b->node, &two_wg, 4))[0].grid[0], 4u);
  // Unsplit: no workspace, no GEMM_SPLIT_K.
  const ops::Sm90GemmConfig one = Sm90Split(128, 128, 2, 1, 4, 1);
  absl::StatusOr<std::vector<KernelLaunch>> u = ops::GenerateMatMulGroupSm90(*b->node, &one, 132);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ((*u)[0].semaphores, 0u);
  EXPECT_EQ((*u)[0].scratch_bytes, 0u);
  const std::string& us = (*u)[0].source;  // only the template's default
  EXPECT_EQ(us.find("#define GEMM_SPLIT_K "), us.find("#ifndef GEMM_SPLIT_K\n#define GEMM_SPLIT_K 1\n") + 21);
  // Scratch beyond kGemmMaxScratchBytes: refused for a forced config (4096 tiles x 32
  // splits x 16 KiB).
  absl::StatusOr<Built> huge = Build(GemmCase{DType::kFloat16, {}, 4096, 4096, 2048}, 1);
  ASSERT_TRUE(huge.ok());
  const absl::Status scratch =
      ops::GenerateMatMulGroupSm90(*huge->node, ptr(Sm90Split(64, 64, 1, 1, 8, 32)), 132).status();
  EXPECT_EQ(scratch.code(), absl::StatusCode::kInvalidArgument) << scratch;
  EXPECT_NE(scratch.message().find("bytes of scratch"), absl::string_view::npos) << scratch;
  // 16 k tiles: 6 splits of 3 leave one; 17 splits of 1 would leave none (K = 1000).
  EXPECT_TRUE(ops::GenerateMatMulGroupSm90(*b->node, ptr(Sm90Split(64, 128, 1, 1, 8, 6)), 132).ok());
  const absl::Status refused = ops::GenerateMatMulGroupSm90(*b->node, ptr(Sm90Split(64, 128, 1, 1, 8, 17)), 132).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("K = 1000"), absl::string_view::npos) << refused;
  // The heuristic through GenerateGemm: M = 48 at BERT-base's FFN down splits the same
  // 12 tiles (N = 768: unswapped above M = 32, PreferSm90SwapAb); M = 16 swaps, unsplit
  // with 128 k per stage on the 12 tiles of N.
  EXPECT_EQ(ops::PickSm90GemmConfig(48, 768, 3072, 1, 132).split_k, m16.split_k);
  // PickSm90SplitK counts k tiles of the tile's bk: K = 4096 is 64 tiles of 64 (5 splits
  // of >= 12) but 32 of 128 (2).
  ops::Sm90GemmConfig narrow = Sm90Swap(64, 16, 1, 1, 8, 1);
  EXPECT_EQ(ops::PickSm90SplitK(narrow, 768, 16, 4096, 1, 132, 12, 132), 5);
  EXPECT_EQ(ops::PickSm90SplitK(Sm90Bk128(narrow), 768, 16, 4096, 1, 132, 12, 132), 2);
  absl::StatusOr<Built> small = Build(GemmCase{DType::kBFloat16, {}, 48, 768, 3072, false, false, true}, 1);
  ASSERT_TRUE(small.ok());
  KernelOptions options;
  options.matmul_groups = codegen::MatMulGroups::kGenerated;
  options.hopper = true;
  options.sm_count = 132;
  absl::StatusOr<std::vector<KernelLaunch>> h = ops::GenerateGemm(*small->node, options);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ((*h)[0].family, "gemm_sm90");
  EXPECT_EQ((*h)[0].grid[0], 12u * m16.split_k);
  EXPECT_EQ((*h)[0].semaphores, 12u);
  EXPECT_NE((*h)[0].source.find("#define GEMM_SWAP_AB 0"), std::string::npos);
  absl::StatusOr<Built> few = Build(GemmCase{DType::kBFloat16, {}, 16, 768, 3072, false, false, true}, 1);
  ASSERT_TRUE(few.ok());
  absl::StatusOr<std::vector<KernelLaunch>> swapped = ops::GenerateGemm(*few->node, options);
  ASSERT_TRUE(swapped.ok()) << swapped.status();
  EXPECT_EQ((*swapped)[0].grid[0], 12u);
  EXPECT_EQ((*swapped)[0].semaphores, 0u);
  EXPECT_NE((*swapped)[0].source.find("#define GEMM_SWAP_AB 1"), std::string::npos);
  EXPECT_NE((*swapped)[0].source.find("#define GEMM_BK 128"), std::string::npos);
}

// Stream-K: config strings, the verifier, the partition (Sm90StreamK) and the launches'
// grid, defines and workspace.
TEST(GemmCodegenTest, Sm90StreamKConfigsPartitionAndLaunches) {
  absl::StatusOr<ops::Sm90GemmConfig> c = ops::ParseSm90GemmConfig("128x256 c2x1 s4 sk");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->stream_k);
  EXPECT_EQ(ops::Sm90GemmConfigString(*c), "128x256 c2x1 s4 sk");
  EXPECT_FALSE(ops::ParseSm90GemmConfig("128x256 c2x1 s4").value().stream_k);
  for (const char* bad : {"64x256 p2x1 s5 sk", "64x128 c1x1 s8 k2 sk", "128x256 c2x1 s4 cl2 sk", "64x16 c1x1 s8 swap sk",
                          "128x256 c2x1 s4 sk cl2", "128x256 c2x1 s4 skx"}) {
    EXPECT_FALSE(ops::ParseSm90GemmConfig(bad).ok()) << bad;
  }
  EXPECT_NE(ops::ParseSm90GemmConfig("64x256 p2x1 s5 sk").status().message().find("stream-K"), std::string::npos);
  // The partition: the tiles past whole waves plus one wave; all of them under two
  // waves; none in whole waves; the grid at most the SMs and the iterations.
  auto split = [](int64_t tiles, int64_t k_tiles, int sms) {
    const ops::Sm90StreamKSplit s = ops::Sm90StreamK(tiles, k_tiles, sms);
    return std::array<int64_t, 2>{s.sk_tiles, s.grid};
  };
  EXPECT_EQ(split(512, 64, 132), (std::array<int64_t, 2>{132 + 116, 132}));  // 4096^3 at 128x256
  EXPECT_EQ(split(264, 64, 132), (std::array<int64_t, 2>{0, 132}));
  EXPECT_EQ(split(132, 64, 132), (std::array<int64_t, 2>{0, 132}));
  EXPECT_EQ(split(144, 50, 132), (std::array<int64_t, 2>{144, 132}));
  EXPECT_EQ(split(40, 44, 132), (std::array<int64_t, 2>{40, 132}));
  EXPECT_EQ(split(2, 16, 132), (std::array<int64_t, 2>{2, 32}));
  EXPECT_EQ(split(1, 1, 132), (std::array<int64_t, 2>{1, 1}));

  // Launches: 12 tiles of 64x128 (65 x 136 x 3 batches) on 5 SMs: 5 data-parallel, 7
  // stream-K tiles, grid 5, a semaphore per stream-K tile, a partial per CTA. B per
  // batch entry (a shared one folds the batch into M).
  absl::StatusOr<Built> b = Build(GemmCase{DType::kFloat16, {3}, 65, 136, 584}, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  const ops::Sm90GemmConfig sk = WithStreamK({64, 128, 1, 1, 8});
  absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateMatMulGroupSm90(*b->node, &sk, 5);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ((*l)[0].grid, (std::array<uint32_t, 3>{5, 1, 1}));
  EXPECT_EQ((*l)[0].semaphores, 7u);
  EXPECT_EQ((*l)[0].scratch_bytes, 5u * 64 * 128 * 4);
  EXPECT_NE((*l)[0].source.find("#define GEMM_STREAM_K 1\n#define GEMM_SK_TILES 7\n#define GEMM_GRID 5\n"),
            std::string::npos);
  // Whole waves (12 tiles on 4 or 6 SMs): the plain kernel, no workspace.
  for (int sms : {4, 6}) {
    absl::StatusOr<std::vector<KernelLaunch>> whole = ops::GenerateMatMulGroupSm90(*b->node, &sk, sms);
    ASSERT_TRUE(whole.ok()) << whole.status();
    EXPECT_EQ((*whole)[0].grid[0], static_cast<uint32_t>(sms));
    EXPECT_EQ((*whole)[0].semaphores, 0u);
    EXPECT_EQ((*whole)[0].scratch_bytes, 0u);
    EXPECT_EQ((*whole)[0].source.find("#define GEMM_STREAM_K 1"), std::string::npos);
  }
  // Two consumers: a semaphore per (stream-K tile, consumer).
  const ops::Sm90GemmConfig sk2 = WithStreamK({128, 128, 2, 1, 4});  // 1 x 2 x 3 = 6 tiles
  absl::StatusOr<std::vector<KernelLaunch>> l2 = ops::GenerateMatMulGroupSm90(*b->node, &sk2, 132);
  ASSERT_TRUE(l2.ok()) << l2.status();
  EXPECT_EQ((*l2)[0].grid[0], 60u);  // 6 tiles x 10 k tiles: one iteration a CTA
  EXPECT_EQ((*l2)[0].semaphores, 6u * 2);
}

// Swap-AB: config strings, the verifier, the heuristic (swapped where PreferSm90SwapAb:
// M <= 64, N and K >= 2048; split until the units fill the SMs) and the routing (plain
// matmul[+epilogue] groups with A stored [M, K]).
TEST(GemmCodegenTest, Sm90SwapAbConfigsHeuristicAndRouting) {
  for (const char* text : {"64x16 c1x1 s8 k4 swap", "128x8 c2x1 s4 swap", "128x32 c1x2 s6 k3 swap"}) {
    absl::StatusOr<ops::Sm90GemmConfig> c = ops::ParseSm90GemmConfig(text);
    ASSERT_TRUE(c.ok()) << text << ": " << c.status();
    EXPECT_TRUE(c->swap_ab) << text;
    EXPECT_EQ(ops::Sm90GemmConfigString(*c), text);
  }
  EXPECT_FALSE(ops::ParseSm90GemmConfig("64x128 c1x1 s8")->swap_ab);
  for (const char* bad : {"64x16 c1x1 s8 swap k4", "64x16 c1x1 s8 swapx", "64x16 c1x1 s8 k4 swap ", "64x16 c1x1 s8",
                          "64x12 c1x1 s8 swap", "64x8 c1x1 s8 k2 swap", "64x16 p2x1 s8 swap"}) {
    EXPECT_FALSE(ops::ParseSm90GemmConfig(bad).ok()) << bad;
  }
  EXPECT_NE(ops::VerifySm90GemmConfig(Sm90Swap(64, 12, 1, 1, 8, 1)).message().find("multiple of 8"),
            std::string::npos);
  EXPECT_NE(ops::VerifySm90GemmConfig(Sm90Swap(64, 8, 1, 1, 8, 2)).message().find("multiple of 16"),
            std::string::npos);
  EXPECT_TRUE(ops::VerifySm90GemmConfig(Sm90Swap(64, 256, 1, 1, 4, 1)).ok());
  EXPECT_FALSE(ops::VerifySm90GemmConfig(Sm90Swap(64, 264, 1, 1, 4, 1)).ok());
  // C's tile goes through shared memory where it fits beside the ring, else none
  // (C is stored from registers): 13 stages of n64 leave room for it, 14 do not.
  EXPECT_EQ(ops::Sm90GemmSharedBytes(Sm90Swap(64, 16, 1, 1, 8, 1)), 1024 + 8 * 80 * 128 + 128 + 16 + 64 * 16 * 2);
  EXPECT_EQ(ops::Sm90GemmSharedBytes(Sm90Bk128(Sm90Swap(64, 16, 1, 1, 8, 1))),
            1024 + 8 * 80 * 256 + 128 + 16 + 64 * 16 * 2);  // 128 k per stage: twice the ring
  EXPECT_EQ(ops::Sm90GemmSharedBytes(Sm90Swap(64, 64, 1, 1, 13, 1)), 1024 + 13 * 128 * 128 + 13 * 16 + 16 + 64 * 64 * 2);
  EXPECT_EQ(ops::Sm90GemmSharedBytes(Sm90Swap(64, 64, 1, 1, 14, 1)), 1024 + 14 * 128 * 128 + 14 * 16 + 16);
  EXPECT_EQ(ops::Sm90CChunks(Sm90Swap(128, 256, 2, 1, 4, 1)), 1);
  // The heuristic: 64-row tiles of N, bn = M rounded up to 8. From 32 of them unsplit,
  // the deepest ring up to 16 stages that fits; else 128 k per stage, up to 8 stages,
  // split in 4 (bn = M rounded up to 16) at up to 12 tiles with K >= 4096.
  for (auto [m, n, k, want] :
       {std::tuple<int64_t, int64_t, int64_t, const char*>{1, 4096, 4096, "64x8 c1x1 s16 swap"},  // 64 tiles
        {16, 2048, 3072, "64x16 c1x1 s16 swap"},           // 32 tiles
        {16, 1984, 3072, "64x16 c1x1 s8 swap bk128"},      // 31 tiles
        {16, 768, 3072, "64x16 c1x1 s8 swap bk128"},       // 12 tiles, K < 4096
        {8, 768, 4096, "64x16 c1x1 s8 k4 swap bk128"},     // 12 tiles, K = 4096: split, n16
        {16, 832, 4096, "64x16 c1x1 s8 swap bk128"},       // 13 tiles
        {64, 768, 4096, "64x64 c1x1 s7 k4 swap bk128"},    // 32 KiB stages: 7 fit
        {33, 4096, 768, "64x40 c1x1 s16 swap"},            // 64 tiles
        {33, 1024, 768, "64x40 c1x1 s8 swap bk128"},       // 16 tiles
        {1, 768, 768, "64x8 c1x1 s8 swap bk128"},
        {8, 64, 8, "64x8 c1x1 s8 swap bk128"},             // one k tile
        {64, 16384, 4096, "64x64 c1x1 s14 swap"}}) {  // 16 KiB stages: 14 fit in 227 KiB
    const ops::Sm90GemmConfig c = ops::PickSm90SwapAbConfig(m, n, k, 1);
    EXPECT_EQ(ops::Sm90GemmConfigString(c), want) << m << "x" << n << "x" << k;
    EXPECT_TRUE(ops::VerifySm90GemmConfig(c).ok()) << ops::Sm90GemmConfigString(c);
  }
  // Batches count as tiles: 4 x 8 tiles of N go unsplit.
  EXPECT_EQ(ops::Sm90GemmConfigString(ops::PickSm90SwapAbConfig(8, 512, 4096, 4)), "64x8 c1x1 s16 swap");
  EXPECT_TRUE(ops::PreferSm90SwapAb(1, 4096, 4096));
  EXPECT_TRUE(ops::PreferSm90SwapAb(16, 2048, 2048));
  EXPECT_TRUE(ops::PreferSm90SwapAb(32, 4096, 4096));
  EXPECT_FALSE(ops::PreferSm90SwapAb(33, 4096, 4096));  // unsplit 12-stage 64x64 tiles measured faster at 64
  EXPECT_FALSE(ops::PreferSm90SwapAb(64, 4096, 4096));
  EXPECT_TRUE(ops::PreferSm90SwapAb(16, 768, 3072));    // bk128 tiles from N = 768
  EXPECT_TRUE(ops::PreferSm90SwapAb(1, 1536, 768));     // and K = 768 below N = 2048
  EXPECT_FALSE(ops::PreferSm90SwapAb(16, 512, 3072));   // not measured below N = 768
  EXPECT_FALSE(ops::PreferSm90SwapAb(16, 1024, 512));   // nor below K = 768
  EXPECT_FALSE(ops::PreferSm90SwapAb(16, 4096, 768));   // from N = 2048: measured slower at K = 768
  // Routing: which groups swap (the heuristic) and why the others cannot.
  KernelOptions hopper;
  hopper.matmul_groups = codegen::MatMulGroups::kGenerated;
  hopper.hopper = true;
  GemmCase dual{DType::kFloat16, {}, 16, 64, 64};
  dual.dual = true;
  dual.k2 = 32;
  GemmCase pro{DType::kFloat16, {}, 16, 64, 64};
  pro.pro = Pro::kReluA;
  struct Route {
    GemmCase c;
    bool swapped;
    const char* why;  // in Sm90SwapAbEligible's message when not eligible
  };
  for (const Route& r : {Route{GemmCase{DType::kFloat16, {}, 16, 4096, 4096, false, false, true}, true, ""},
                         Route{GemmCase{DType::kBFloat16, {3}, 7, 2048, 2048, false, false, false, Epi::kBiasGelu},
                               true, ""},
                         Route{GemmCase{DType::kFloat16, {}, 16, 3072, 2048}, true, ""},
                         Route{GemmCase{DType::kFloat16, {}, 32, 3072, 2048}, true, ""},
                         Route{GemmCase{DType::kFloat16, {}, 33, 3072, 2048}, false, ""},  // eligible, M > 32
                         Route{GemmCase{DType::kFloat16, {}, 16, 768, 3072}, false, ""},   // eligible, N < 2048
                         Route{GemmCase{DType::kFloat16, {}, 16, 64, 64, false, true, false}, false, "[K, M]"},
                         Route{dual, false, "dual"}, Route{pro, false, "prologue"}}) {
    absl::StatusOr<Built> b = Build(r.c, 1);
    ASSERT_TRUE(b.ok()) << b.status();
    absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateGemm(*b->node, hopper);
    ASSERT_TRUE(l.ok()) << r.c.Name() << ": " << l.status();
    EXPECT_EQ((*l)[0].family, "gemm_sm90") << r.c.Name();
    const std::string& src = (*l)[0].source;
    EXPECT_NE(src.find(absl::StrCat("#define GEMM_SWAP_AB ", r.swapped ? 1 : 0, "\n")), std::string::npos)
        << r.c.Name();
    const absl::Status eligible = ops::Sm90SwapAbEligible(*b->node);
    EXPECT_EQ(eligible.ok(), std::string(r.why).empty()) << r.c.Name() << ": " << eligible;
    if (!eligible.ok()) {
      EXPECT_NE(eligible.message().find(r.why), absl::string_view::npos) << eligible;
      // A forced swapped config names the reason.
      const absl::Status forced = ops::GenerateMatMulGroupSm90(*b->node, ptr(Sm90Swap(64, 16, 1, 1, 8, 1))).status();
      EXPECT_EQ(forced.code(), absl::StatusCode::kInvalidArgument) << forced;
      EXPECT_NE(forced.message().find(r.why), absl::string_view::npos) << forced;
    }
    if (r.swapped) {
      // The kernel's problem is C^T: M and N trade places, B's map first, A's (box of
      // bn rows) second, then C's own (C's columns first, boxes of 64 of them x bn C
      // rows: the TMA store); the workspace counts C^T's tiles.
      EXPECT_NE(src.find(absl::StrCat("#define GEMM_M ", r.c.n, "\n#define GEMM_N ", r.c.m, "\n")),
                std::string::npos);
      ASSERT_EQ((*l)[0].tensor_maps.size(), 3u);
      const ops::Sm90GemmConfig plain{64, 128, 1, 1, 8};
      absl::StatusOr<std::vector<KernelLaunch>> u = ops::GenerateMatMulGroupSm90(*b->node, &plain);
      ASSERT_TRUE(u.ok()) << u.status();
      EXPECT_EQ((*l)[0].tensor_maps[0].tensor, (*u)[0].tensor_maps[1].tensor);
      EXPECT_EQ((*l)[0].tensor_maps[1].tensor, (*u)[0].tensor_maps[0].tensor);
      EXPECT_EQ((*u)[0].source.find("#define GEMM_SWAP_AB 1"), std::string::npos);
      EXPECT_EQ((*l)[0].tensor_maps[1].dims[1], static_cast<uint64_t>(r.c.m));
      const int64_t batch = r.c.batch.empty() ? 1 : r.c.batch[0];
      const ops::Sm90GemmConfig want = ops::PickSm90SwapAbConfig(r.c.m, r.c.n, r.c.k, batch);
      EXPECT_EQ((*l)[0].tensor_maps[1].box[1], static_cast<uint32_t>(want.bn));
      EXPECT_EQ((*l)[0].grid[0], static_cast<uint32_t>(std::min<int64_t>(
                                      ((r.c.n + 63) / 64) * ((r.c.m + want.bn - 1) / want.bn) * batch * want.split_k,
                                      132)));
      EXPECT_NE(src.find("#define GEMM_TMA_STORE 1"), std::string::npos);
      EXPECT_EQ((*l)[0].tensor_maps[2].dims[0], static_cast<uint64_t>(r.c.n));
      EXPECT_EQ((*l)[0].tensor_maps[2].box[0], 64u);
      EXPECT_EQ((*l)[0].tensor_maps[2].box[1], static_cast<uint32_t>(want.bn));
      EXPECT_NE(src.find(absl::StrCat("#define GEMM_TRANS_A ", r.c.tb ? 0 : 1, "\n#define GEMM_TRANS_B 1\n")),
                std::string::npos);
      // Clustered: pairs of tiles of N share A^T, each CTA multicasting bn / 2 of its
      // rows; the grid is whole clusters walking the pairs.
      const ops::Sm90GemmConfig pair = Sm90Cluster(Sm90Swap(64, 16, 1, 1, 16, 1));
      absl::StatusOr<std::vector<KernelLaunch>> cl = ops::GenerateMatMulGroupSm90(*b->node, &pair);
      ASSERT_TRUE(cl.ok()) << cl.status();
      EXPECT_NE((*cl)[0].source.find("#define GEMM_CLUSTER_M 2\n"), std::string::npos);
      EXPECT_EQ((*cl)[0].tensor_maps[1].box[1], 8u);
      EXPECT_EQ((*cl)[0].grid[0],
                static_cast<uint32_t>(2 * std::min<int64_t>((r.c.n + 127) / 128 * ((r.c.m + 15) / 16) * batch, 66)));
    }
  }
}

// Swapped tiles that fill the wave where the unswapped pick's 64-column steps leave it
// part-empty (PickSm90SwapWaveConfig), and the heuristic taking them.
TEST(GemmCodegenTest, Sm90SwapWaveTilesFillTheWave) {
  // 120 tiles of 64x192 over 1280x1024: 1280 x 1024 / (132 x 64 x 192).
  EXPECT_NEAR(ops::Sm90WaveUse(1280, 1024, 1, 64, 192, 132), 1280.0 * 1024 / (132 * 64 * 192), 1e-12);
  EXPECT_NEAR(ops::Sm90WaveUse(1024, 1280, 1, 128, 80, 132), 1280.0 * 1024 / (132 * 128 * 80), 1e-12);
  EXPECT_NEAR(ops::Sm90WaveUse(4096, 4096, 1, 128, 256, 132), 4096.0 * 4096 / (4 * 132 * 128 * 256), 1e-12);
  const ops::Sm90GemmConfig c64x192{64, 192, 1, 1, 6}, c192x128{192, 128, 3, 1, 5}, c128x256{128, 256, 2, 1, 4};
  for (auto [m, n, k, tile, want] : std::vector<std::tuple<int64_t, int64_t, int64_t, ops::Sm90GemmConfig, const char*>>{
           {1280, 1024, 2816, c64x192, "128x80 c2x1 s7 swap"},    // 8 x 16 tiles: the wave, none of them partial
           {2048, 1152, 1152, c192x128, "192x96 c3x1 s5 swap"},   // 6 x 22 = 132 tiles
           {2816, 256, 3840, {64, 128, 1, 1, 8}, "64x96 c1x1 s10 swap"},  // 4 x 30 tiles
           {640, 2176, 3200, c64x192, ""},                        // 17 x 7 tiles of 128x96: no better
           {1024, 1664, 3712, {128, 128, 2, 1, 5}, ""},           // 128x112: use 0.79 -> 0.90, under the margin
           {4096, 4096, 4096, c128x256, ""},                      // four full waves already
           {1280, 1024, 960, c64x192, ""},                        // K < 1024
       }) {
    const std::optional<ops::Sm90GemmConfig> c = ops::PickSm90SwapWaveConfig(tile, m, n, k, 1, 132);
    EXPECT_EQ(c ? ops::Sm90GemmConfigString(*c) : "", want) << m << "x" << n << "x" << k;
    if (c) {
      EXPECT_TRUE(ops::VerifySm90GemmConfig(*c).ok()) << ops::Sm90GemmConfigString(*c);
    }
  }
  ops::Sm90GemmConfig split = c64x192;
  split.split_k = 2;
  EXPECT_FALSE(ops::PickSm90SwapWaveConfig(split, 1280, 1024, 2816, 1, 132).has_value());
  // The heuristic: swapped where C's rows suit the TMA store; unswapped where they are
  // not 16-byte aligned (N = 1020, B stored [N, K]) and where A is stored [K, M].
  for (auto [n, ta, tb, swapped] : {std::tuple<int64_t, bool, bool, bool>{1024, false, false, true},
                                    {1024, false, true, true}, {1020, false, true, false}, {1024, true, false, false}}) {
    absl::StatusOr<Built> b = Build(GemmCase{DType::kFloat16, {}, 1280, n, 2816, false, ta, tb}, 1);
    ASSERT_TRUE(b.ok()) << b.status();
    absl::StatusOr<ops::Sm90GemmConfig> h = ops::HeuristicSm90GemmConfig(*b->node);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(h->swap_ab, swapped) << n << " " << ta << tb << ": " << ops::Sm90GemmConfigString(*h);
  }
}

// The swapped forms compile for sm_90a without spills, a stack frame, setmaxnreg
// warnings or serialized wgmmas: n8..n64 wgmmas with A' K-major (B stored [N, K]) and
// M-major (B [K, N]), one or two consumers, two m64 blocks, clusters, fp16 and bf16, C
// through shared memory and (n64 with 14 stages, no room for C's tile) from registers.
TEST(GemmCodegenTest, Sm90SwapAbCompilesForSm90a) {
  std::vector<ModuleKernel> kernels;
  int n = 0;
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    for (bool tb : {false, true}) {
      const GemmCase c{dt, {}, 33, 200, 584, false, false, tb, tb ? Epi::kBiasGelu : Epi::kResidual};
      absl::StatusOr<Built> b = Build(c, 1);
      ASSERT_TRUE(b.ok()) << b.status();
      for (const ops::Sm90GemmConfig& cfg :
           {Sm90Swap(64, 8, 1, 1, 16, 1), Sm90Swap(64, 48, 1, 1, 8, 1), Sm90Swap(128, 64, 2, 1, 6, 1),
            Sm90Swap(128, 32, 1, 2, 6, 1), Sm90Cluster(Sm90Swap(64, 16, 1, 1, 16, 1)),
            Sm90Cluster(Sm90Swap(128, 32, 2, 1, 8, 1)), Sm90Swap(64, 64, 1, 1, 14, 1)}) {
        absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateMatMulGroupSm90(*b->node, &cfg);
        ASSERT_TRUE(l.ok()) << c.Name() << ": " << l.status();
        kernels.push_back({absl::StrCat("kiln_gemm_swap_", c.Name(), "_", n++), (*l)[0].source});
      }
    }
  }
  absl::StatusOr<ModuleInspection> inspected = InspectModule(kernels, "sm_90a");
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  ExpectWgmmaPipelineKept(inspected->log);
  for (const char* shape : {"m64n8k16", "m64n48k16", "m64n64k16", "m64n32k16"}) {
    EXPECT_NE(inspected->ptx.find(shape), std::string::npos) << shape;
  }
  EXPECT_NE(inspected->ptx.find("shfl.sync.bfly"), std::string::npos);  // the transposing store
  EXPECT_NE(inspected->ptx.find("cp.async.bulk.tensor.3d.global.shared::cta"), std::string::npos);  // through smem
  EXPECT_NE(inspected->ptx.find("st.global"), std::string::npos);  // n64 with 14 stages: from registers
  for (const KernelResources& r : ParsePtxasResources(inspected->log)) {
    EXPECT_EQ(r.spill_store_bytes, 0) << r.function << " spills (" << r.registers << " registers)";
    EXPECT_EQ(r.stack_bytes, 0) << r.function << " has a stack frame";
  }
}

}  // namespace
}  // namespace kiln::codegen
