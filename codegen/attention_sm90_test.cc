// Tests of the Hopper (wgmma) attention kernel's generator that need no GPU: every
// form (fp16/bf16, K stored [Sk, D] or [D, Sk], the Q prologue, the causal skip, head
// dims padded to 64, Dv != D, the models' head layout, 1-3 warpgroups, 64- and
// 128-key blocks) compiles with NVRTC for sm_90a without spilling; the verifier's
// limits; the heuristic's choice for an sm_90a target (not yet taken by the
// compiler: the kernel has not run on a GPU).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/attention_test_cases.h"
#include "codegen/nvrtc_module.h"
#include "codegen/op_kernels.h"
#include "codegen/ops/families.h"

namespace kiln::codegen {
namespace {

using ops::AttentionConfig;
using test::AttnCase;
using test::AttnMask;

constexpr AttentionConfig Wgmma(int bm, int bn, bool overlap = false) {
  return AttentionConfig{bm, bn, 1, true, overlap};
}

TEST(AttentionSm90Test, EveryFormCompilesWithoutSpills) {
  AttnCase prologue{DType::kBFloat16, 2, 3, 77, 80, 64, 64, AttnMask::kFill, false};
  prologue.q_scale_input = true;
  AttnCase sdpa_causal{DType::kFloat16, 2, 8, 77, 77, 64, 64, AttnMask::kSdpa, true, true, 2};
  sdpa_causal.sdpa_mask = AttnCase::SdpaMask::kCausal;
  const std::vector<std::pair<AttnCase, AttentionConfig>> cases = {
      {{DType::kFloat16, 1, 8, 1500, 1500, 64, 64, AttnMask::kNone, true}, Wgmma(64, 128)},
      {{DType::kFloat16, 2, 12, 128, 128, 64, 64, AttnMask::kAdd, true, true}, Wgmma(128, 128)},
      {{DType::kBFloat16, 2, 4, 150, 152, 64, 64, AttnMask::kCausal, false}, Wgmma(192, 64)},
      {prologue, Wgmma(64, 64)},
      {sdpa_causal, Wgmma(128, 64)},
      {{DType::kFloat16, 1, 4, 200, 200, 128, 128, AttnMask::kAdd, true}, Wgmma(128, 128)},
      {{DType::kBFloat16, 1, 4, 96, 96, 128, 128, AttnMask::kNone, false}, Wgmma(64, 128)},
      {{DType::kFloat16, 1, 4, 100, 100, 80, 96, AttnMask::kAdd, true}, Wgmma(64, 64)},
      // Block j + 1's softmax beside block j's P V.
      {{DType::kFloat16, 1, 8, 1500, 1500, 64, 64, AttnMask::kNone, true}, Wgmma(64, 128, true)},
      {prologue, Wgmma(128, 64, true)},
      {{DType::kBFloat16, 1, 4, 200, 200, 128, 128, AttnMask::kCausal, false}, Wgmma(128, 64, true)},
      {sdpa_causal, Wgmma(64, 64, true)},
  };
  std::vector<ModuleKernel> kernels;
  for (const auto& [c, cfg] : cases) {
    absl::StatusOr<test::AttnBuilt> b = test::BuildAttention(c, 5);
    ASSERT_TRUE(b.ok()) << c.Name() << ": " << b.status();
    absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateAttentionGroup(*b->group, &cfg);
    ASSERT_TRUE(l.ok()) << c.Name() << ": " << l.status();
    const KernelLaunch& k = (*l)[0];
    EXPECT_NE(k.source.find("wgmma.mma_async"), std::string::npos) << c.Name();
    EXPECT_EQ(k.block[0], static_cast<uint32_t>(cfg.bm * 2)) << c.Name();
    EXPECT_EQ(k.grid[0], static_cast<uint32_t>((c.sq + cfg.bm - 1) / cfg.bm)) << c.Name();
    EXPECT_EQ(k.shared_bytes, static_cast<uint32_t>(ops::AttentionSharedBytes(cfg, c.d, c.dv, c.k_trans)));
    EXPECT_NE(k.source.find(absl::StrCat("#define ATTN_OVERLAP ", cfg.overlap ? 1 : 0)), std::string::npos);
    kernels.push_back(
        {absl::StrCat("kiln_attn90_bm", cfg.bm, "_bn", cfg.bn, cfg.overlap ? "_overlap_" : "_", c.Name()), k.source});
  }
  absl::StatusOr<ModuleInspection> inspected = InspectModule(kernels, "sm_90a");
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  const std::vector<KernelResources> resources = ParsePtxasResources(inspected->log);
  EXPECT_EQ(resources.size(), kernels.size()) << inspected->log;
  for (const KernelResources& r : resources) {
    EXPECT_EQ(r.spill_store_bytes, 0) << r.function << " spills (" << r.registers << " registers)\n" << inspected->log;
    std::printf("%-70s %d registers, %lld bytes spilled\n", r.function.c_str(), r.registers,
                static_cast<long long>(r.spill_store_bytes));
  }
  // ptxas serialises wgmmas it cannot keep in flight and says so (C75xx warnings).
  EXPECT_EQ(inspected->log.find("wgmma"), std::string::npos)
      << inspected->log;  // Each exponential of the softmax is one ex2.approx.ftz (kiln_attn_exp2), not exp2f's
  // subnormal-preserving form (three more instructions).
  EXPECT_NE(inspected->ptx.find("ex2.approx.ftz.f32"), std::string::npos);
  EXPECT_EQ(inspected->ptx.find("ex2.approx.f32"), std::string::npos);
}

TEST(AttentionSm90Test, VerifierLimits) {
  EXPECT_TRUE(ops::VerifyAttentionConfig(Wgmma(192, 64), 64, 64, false).ok());
  EXPECT_NE(ops::VerifyAttentionConfig(Wgmma(96, 64), 64, 64, true).message().find("BM 64, 128 or 192"),
            absl::string_view::npos);
  EXPECT_NE(ops::VerifyAttentionConfig(Wgmma(64, 32), 64, 64, true).message().find("BN 64 or 128"),
            absl::string_view::npos);
  EXPECT_NE(ops::VerifyAttentionConfig(AttentionConfig{64, 64, 2, true}, 64, 64, true).message().find("splits"),
            absl::string_view::npos);
  EXPECT_TRUE(ops::VerifyAttentionConfig(Wgmma(128, 128, true), 64, 64, false).ok());
  // The overlap keeps the next block's scores beside P in flight: 128-wide heads take
  // 64-key blocks with it (64 + 64 + 64 + 12 for 128 keys is over 192).
  EXPECT_EQ(ops::AttentionRegisterEstimate(Wgmma(64, 128, true), 128, 128), 64 + 64 + 64 + 12);
  EXPECT_FALSE(ops::VerifyAttentionConfig(Wgmma(64, 128, true), 128, 128, true).ok());
  EXPECT_NE(ops::VerifyAttentionConfig(AttentionConfig{64, 64, 1, false, true}, 64, 64, true).message().find("wgmma"),
            absl::string_view::npos);
  // 1024 + (Q [BM][DP] + 2 x (K [BN][DP] + V [BN][DVP])) x 2 bytes, D and Dv padded to 64.
  EXPECT_EQ(ops::AttentionSharedBytes(Wgmma(64, 128), 64, 64, true), 1024 + (64 * 64 + 2 * 128 * 128) * 2);
  EXPECT_EQ(ops::AttentionSharedBytes(Wgmma(128, 64), 80, 40, false), 1024 + (128 * 128 + 2 * 64 * 192) * 2);
  // Three warpgroups leave 168 registers a thread: 192 rows take 64-key blocks of
  // 64-wide heads (estimate 92 of 105), not 128-key blocks (140).
  EXPECT_TRUE(ops::VerifyAttentionConfig(Wgmma(192, 64), 64, 64, true).ok());
  const absl::Status regs = ops::VerifyAttentionConfig(Wgmma(192, 128), 64, 64, true);
  EXPECT_NE(regs.message().find("registers per thread"), absl::string_view::npos) << regs;
  EXPECT_TRUE(ops::VerifyAttentionConfig(Wgmma(128, 128), 128, 128, true).ok());
  // Registers: BN/2 scores + DVP/2 accumulators + BN/4 of P + 12.
  EXPECT_EQ(ops::AttentionRegisterEstimate(Wgmma(64, 128), 128, 128), 64 + 64 + 32 + 12);
}

TEST(AttentionSm90Test, HeuristicForHopperTargets) {
  // One warpgroup of 64 rows: BERT-base at batch 32 takes blocks of 64 keys,
  // Whisper-base's 1500 frames blocks of 128.
  AttentionConfig c = ops::PickAttentionConfig(384, 128, 128, 64, 64, true, true);
  EXPECT_TRUE(c.wgmma);
  EXPECT_EQ(c.bm, 64);
  EXPECT_EQ(c.bn, 64);
  c = ops::PickAttentionConfig(8, 1500, 1500, 64, 64, true, true);
  EXPECT_TRUE(c.wgmma);
  EXPECT_EQ(c.bm, 64);
  EXPECT_EQ(c.bn, 128);
  // One query row, or 32-wide heads (padding would double the work): mma.sync.
  EXPECT_FALSE(ops::PickAttentionConfig(4096, 1, 128, 64, 64, true, true).wgmma);
  EXPECT_FALSE(ops::PickAttentionConfig(192, 49, 49, 32, 32, true, true).wgmma);
  // Without the hopper flag, never.
  EXPECT_FALSE(ops::PickAttentionConfig(384, 128, 128, 64, 64, true).wgmma);

  // GenerateAttentionGroup with `hopper` takes the heuristic's wgmma config, and so
  // does the compiler's routing for an sm_90a target (KernelOptions::hopper); other
  // targets keep the mma.sync kernel.
  absl::StatusOr<test::AttnBuilt> b =
      test::BuildAttention({DType::kFloat16, 2, 12, 128, 128, 64, 64, AttnMask::kAdd}, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  for (bool hopper : {false, true}) {
    absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateAttentionGroup(*b->group, nullptr, hopper);
    ASSERT_TRUE(l.ok()) << l.status();
    ASSERT_EQ(l->size(), 1u);
    EXPECT_EQ((*l)[0].source.find("wgmma.mma_async") != std::string::npos, hopper);
  }
  for (bool hopper : {false, true}) {
    KernelOptions options;
    options.hopper = hopper;
    absl::StatusOr<std::vector<KernelLaunch>> routed = GenerateNodeKernels(*b->group, options);
    ASSERT_TRUE(routed.ok()) << routed.status();
    EXPECT_EQ((*routed)[0].source.find("wgmma.mma_async") != std::string::npos, hopper);
  }
  // K' [D, Sk] with Sk not a multiple of 8 is loaded element by element: mma.sync,
  // and a forced wgmma config is refused with the reason.
  b = test::BuildAttention({DType::kFloat16, 2, 3, 77, 77, 64, 64, AttnMask::kNone, false}, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateAttentionGroup(*b->group, nullptr, true);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ((*l)[0].source.find("wgmma.mma_async"), std::string::npos);
  const AttentionConfig forced = Wgmma(64, 64);
  const absl::Status refused = ops::GenerateAttentionGroup(*b->group, &forced).status();
  EXPECT_NE(refused.message().find("16-byte aligned"), absl::string_view::npos) << refused;
}

}  // namespace
}  // namespace kiln::codegen
