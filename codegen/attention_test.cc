// Tests of the fused attention generator (codegen/ops/attention.cc) that need no
// GPU: every form (fp16/bf16, the four mask patterns, K stored [Sk, D] or [D, Sk]
// with aligned and unaligned Sk, head dims 32..128 and Dv != D, partial tiles)
// compiles with NVRTC for sm_80 and sm_90a, the largest ones without spilling; the
// tile config verifier and heuristic; routing (every --matmul-groups mode, no library
// kernel, not a GEMM group); a causal mask computed in the kernel instead of read
// (the Where form and torch.export's constant additive form).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "codegen/attention_test_cases.h"
#include "codegen/kernel_choice.h"
#include "codegen/library_kernels.h"
#include "codegen/nvrtc_module.h"
#include "codegen/op_kernels.h"
#include "codegen/ops/families.h"
#include "common/status_macros.h"
#include "fusion/fuse_attention.h"
#include "fusion/mark_causal_masks.h"
#include "graph/fused_group.h"
#include "graph/gpt2_mask_test_graph.h"
#include "graph/infer_shapes.h"
#include "graph/text_format.h"

namespace kiln::codegen {
namespace {

using test::AttnCase;
using test::AttnMask;

// One case per kernel form (dtype x K layout and load x Q scale x causal skip) plus
// the head dims 32, 80, 96, 128 and Dv != D, odd sizes throughout.
std::vector<AttnCase> CompileCases() {
  std::vector<AttnCase> cases;
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    cases.push_back({dt, 2, 3, 77, 77, 64, 64, AttnMask::kAdd, true});
    cases.push_back({dt, 2, 3, 77, 77, 64, 64, AttnMask::kCausal, true});
    cases.push_back({dt, 2, 3, 77, 80, 64, 64, AttnMask::kCausal, false});  // K' [D, 80]: cp.async
    cases.push_back({dt, 2, 3, 77, 77, 64, 64, AttnMask::kFill, false});    // K' [D, 77]: element loads
    cases.push_back({dt, 2, 3, 77, 77, 64, 64, AttnMask::kFill, true});
    AttnCase computed_scale{dt, 2, 3, 77, 77, 64, 64, AttnMask::kFill, false};
    computed_scale.q_scale_input = true;  // the Q prologue
    cases.push_back(computed_scale);
    computed_scale.k_trans = true;
    cases.push_back(computed_scale);
    cases.push_back({dt, 1, 2, 1, 13, 32, 32, AttnMask::kNone, false});     // Sq 1
  }
  for (int64_t d : {32, 80, 96, 128}) cases.push_back({DType::kFloat16, 1, 2, 128, 128, d, d, AttnMask::kAdd, true});
  cases.push_back({DType::kBFloat16, 2, 2, 40, 200, 64, 40, AttnMask::kAdd, true});  // Sq != Sk, Dv != D
  // The models' [B,S,H,D] layout through the head Transposes.
  cases.push_back({DType::kFloat16, 2, 12, 77, 77, 64, 64, AttnMask::kAdd, true, true});
  cases.push_back({DType::kBFloat16, 2, 4, 77, 77, 64, 64, AttnMask::kCausal, false, true});
  // torch.export's SDPA form, with GQA's repeated key/value heads.
  cases.push_back({DType::kFloat16, 2, 8, 77, 77, 64, 64, AttnMask::kSdpa, true, true, 2});
  cases.push_back({DType::kBFloat16, 2, 4, 33, 45, 32, 32, AttnMask::kSdpa, true, false, 2});
  AttnCase causal{DType::kFloat16, 2, 8, 77, 77, 64, 64, AttnMask::kSdpa, true, true, 2};
  causal.sdpa_mask = AttnCase::SdpaMask::kCausal;  // its constant causal mask
  cases.push_back(causal);
  // Swin's packed QKV selects and its shifted windows' mask.
  cases.push_back({DType::kFloat16, 4, 3, 49, 49, 32, 32, AttnMask::kWindows, false, false, 0, true});
  return cases;
}

struct Generated {
  std::vector<AttnCase> cases;
  std::vector<test::AttnBuilt> built;
  std::vector<KernelLaunch> launches;
  std::vector<ModuleKernel> kernels;
};

void Generate(const std::vector<AttnCase>& cases, Generated& out) {
  uint32_t seed = 1;
  for (const AttnCase& c : cases) {
    absl::StatusOr<test::AttnBuilt> b = test::BuildAttention(c, seed += 10);
    ASSERT_TRUE(b.ok()) << c.Name() << ": " << b.status();
    absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*b->group);
    ASSERT_TRUE(l.ok()) << c.Name() << ": " << l.status();
    ASSERT_EQ(l->size(), 1u);
    out.cases.push_back(c);
    out.kernels.push_back({absl::StrCat("kiln_attn_", c.Name()), (*l)[0].source});
    out.launches.push_back((*l)[0]);
    out.built.push_back(*std::move(b));
  }
}

std::string Define(const KernelLaunch& l, const std::string& name) {
  const std::string key = absl::StrCat("#define ", name, " ");
  const size_t at = l.source.find(key);
  if (at == std::string::npos) return "-";
  return l.source.substr(at + key.size(), l.source.find('\n', at) - at - key.size());
}

// The value each kernel parameter points to.
std::vector<std::string> ArgNames(const Node& node, const KernelLaunch& l) {
  std::vector<std::string> names;
  for (int a : l.args) {
    names.push_back(a < node.num_outputs() ? node.output(a)->name() : node.input(a - node.num_outputs())->name());
  }
  return names;
}

TEST(AttentionCodegenTest, CompilesForSm80AndSm90a) {
  Generated gen;
  ASSERT_NO_FATAL_FAILURE(Generate(CompileCases(), gen));
  std::set<std::string> forms;
  for (const KernelLaunch& l : gen.launches) {
    forms.insert(absl::StrCat(Define(l, "ATTN_BF16"), Define(l, "ATTN_K_TRANS"), Define(l, "ATTN_K_ASYNC"),
                              Define(l, "ATTN_Q_PROLOGUE"), Define(l, "ATTN_CAUSAL_LIMIT")));
  }
  // Both dtypes x {K [Sk, D], K' [D, Sk] by cp.async, K' by element loads} x Q scale
  // x causal skip, as listed in CompileCases.
  EXPECT_GE(forms.size(), 10u);
  // Every case for sm_80; the fp16 forms for sm_90a too (NVRTC takes ~0.3 s a kernel).
  absl::StatusOr<std::vector<std::string>> cubins = CompileModules(gen.kernels, "sm_80", 4);
  EXPECT_TRUE(cubins.ok()) << "sm_80: " << cubins.status();
  std::vector<ModuleKernel> f16(gen.kernels.begin(), gen.kernels.begin() + 6);
  cubins = CompileModules(f16, "sm_90a", 3);
  EXPECT_TRUE(cubins.ok()) << "sm_90a: " << cubins.status();
  std::printf("compiled %zu attention kernels (%zu forms) for sm_80, %zu of them for sm_90a\n", gen.kernels.size(),
              forms.size(), f16.size());
}

// The register budget of VerifyAttentionConfig holds: D = Dv = 128 (the largest
// accumulators, 32-key blocks) and D = 64, 96 (64-key blocks) do not spill, in either
// dtype and K layout.
TEST(AttentionCodegenTest, LargestHeadDimsDoNotSpill) {
  Generated gen;
  ASSERT_NO_FATAL_FAILURE(Generate({{DType::kFloat16, 4, 12, 512, 512, 128, 128, AttnMask::kAdd, true},
                                    {DType::kBFloat16, 4, 12, 512, 512, 128, 128, AttnMask::kCausal, false},
                                    {DType::kFloat16, 4, 12, 512, 512, 64, 64, AttnMask::kFill, true},
                                    {DType::kFloat16, 4, 12, 512, 512, 96, 96, AttnMask::kNone, false}},
                                   gen));
  if (const char* dir = std::getenv("KILN_ATTN_DUMP")) {  // the module text, for ptxas/cuobjdump by hand
    for (const ModuleKernel& k : gen.kernels) {
      FILE* f = std::fopen(absl::StrCat(dir, "/", k.function, ".cu").c_str(), "w");
      const std::string text = ModuleSource({k});
      std::fwrite(text.data(), 1, text.size(), f);
      std::fclose(f);
    }
  }
  absl::StatusOr<ModuleInspection> inspected = InspectModule(gen.kernels, "sm_80");
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  const std::vector<KernelResources> resources = ParsePtxasResources(inspected->log);
  EXPECT_EQ(resources.size(), gen.kernels.size()) << inspected->log;
  for (const KernelResources& r : resources) {
    EXPECT_EQ(r.spill_store_bytes, 0) << r.function << " spills (" << r.registers << " registers)\n" << inspected->log;
    std::printf("%-60s %d registers, %lld bytes spilled\n", r.function.c_str(), r.registers,
                static_cast<long long>(r.spill_store_bytes));
  }
  for (size_t i = 0; i < gen.cases.size(); ++i) {
    EXPECT_EQ(Define(gen.launches[i], "ATTN_BN"), gen.cases[i].d == 128 ? "32" : "64") << gen.cases[i].Name();
  }  // Each exponential of the softmax is one ex2.approx.ftz (kiln_attn_exp2), not exp2f's
  // subnormal-preserving form (three more instructions).
  EXPECT_NE(inspected->ptx.find("ex2.approx.ftz.f32"), std::string::npos);
  EXPECT_EQ(inspected->ptx.find("ex2.approx.f32"), std::string::npos);
}

// Key groups per CTA (AttentionConfig::splits): both K layouts, 2 and 4 groups,
// compile for sm_80 and sm_90a without spills; the block has a warp per 16 rows per
// group and each stage loads a block of keys per group.
TEST(AttentionCodegenTest, KeyGroupsCompileWithoutSpills) {
  const std::vector<std::pair<AttnCase, ops::AttentionConfig>> cases = {
      {{DType::kFloat16, 1, 8, 1500, 1500, 64, 64, AttnMask::kNone, true}, {64, 32, 2}},
      {{DType::kFloat16, 1, 8, 300, 300, 64, 64, AttnMask::kCausal, false}, {32, 64, 2}},
      {{DType::kBFloat16, 2, 4, 200, 200, 128, 128, AttnMask::kAdd, true}, {32, 16, 4}},
      {{DType::kFloat16, 2, 4, 77, 77, 64, 64, AttnMask::kFill, false}, {16, 16, 4}},
  };
  std::vector<ModuleKernel> kernels;
  for (const auto& [c, cfg] : cases) {
    absl::StatusOr<test::AttnBuilt> b = test::BuildAttention(c, 3);
    ASSERT_TRUE(b.ok()) << c.Name() << ": " << b.status();
    absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateAttentionGroup(*b->group, &cfg);
    ASSERT_TRUE(l.ok()) << c.Name() << ": " << l.status();
    const KernelLaunch& k = (*l)[0];
    EXPECT_EQ(Define(k, "ATTN_SPLITS"), absl::StrCat(cfg.splits));
    EXPECT_EQ(k.block[0], static_cast<uint32_t>(cfg.bm / 16 * 32 * cfg.splits)) << c.Name();
    EXPECT_EQ(k.shared_bytes, static_cast<uint32_t>(ops::AttentionSharedBytes(cfg, c.d, c.dv, c.k_trans)));
    kernels.push_back({absl::StrCat("kiln_attn_split", cfg.splits, "_", c.Name()), k.source});
  }
  for (const char* arch : {"sm_80", "sm_90a"}) {
    absl::StatusOr<ModuleInspection> inspected = InspectModule(kernels, arch);
    ASSERT_TRUE(inspected.ok()) << arch << ": " << inspected.status();
    for (const KernelResources& r : ParsePtxasResources(inspected->log)) {
      EXPECT_EQ(r.spill_store_bytes, 0) << arch << " " << r.function << " spills (" << r.registers << " registers)";
    }
  }
}

TEST(AttentionCodegenTest, ConfigVerifierAndHeuristic) {
  using ops::AttentionConfig;
  EXPECT_TRUE(ops::VerifyAttentionConfig(AttentionConfig{64, 64}, 64, 64, true).ok());
  EXPECT_TRUE(ops::VerifyAttentionConfig(AttentionConfig{128, 64}, 64, 64, false).ok());
  EXPECT_TRUE(ops::VerifyAttentionConfig(AttentionConfig{64, 32}, 128, 128, false).ok());
  EXPECT_NE(ops::VerifyAttentionConfig(AttentionConfig{56, 64}, 64, 64, true).message().find("BM"),
            absl::string_view::npos);
  EXPECT_NE(ops::VerifyAttentionConfig(AttentionConfig{64, 24}, 64, 64, true).message().find("BN"),
            absl::string_view::npos);
  EXPECT_NE(ops::VerifyAttentionConfig(AttentionConfig{64, 64}, 136, 64, true).message().find("head dims"),
            absl::string_view::npos);
  // Q [BM][DP+8] + 2 K [BN][DP+8] + 2 V [BN][DVP+8], 2 bytes: 64 rows x 72 each.
  EXPECT_EQ(ops::AttentionSharedBytes(AttentionConfig{64, 64}, 64, 64, true), 5 * 64 * 72 * 2);
  // K' [DP][BN+8]; D = 40 and Dv = 24 round up to 48 and 32.
  EXPECT_EQ(ops::AttentionSharedBytes(AttentionConfig{32, 64}, 40, 24, false),
            (32 * 56 + 2 * 48 * 72 + 2 * 64 * 40) * 2);
  const absl::Status smem = ops::VerifyAttentionConfig(AttentionConfig{128, 128}, 128, 128, true);
  EXPECT_NE(smem.message().find("shared memory"), absl::string_view::npos) << smem;
  // Registers: BN/2 scores + DVP/2 accumulators + DP/4 Q fragments + 12.
  EXPECT_EQ(ops::AttentionRegisterEstimate(AttentionConfig{64, 64}, 128, 128), 32 + 64 + 32 + 12);
  const absl::Status regs = ops::VerifyAttentionConfig(AttentionConfig{64, 64}, 128, 128, true);
  EXPECT_NE(regs.message().find("registers"), absl::string_view::npos) << regs;

  // BERT-base at batch 32 (384 heads x 2 blocks of 64 rows) keeps 64 rows and one key
  // group; at batch 1 (12 heads) 32-row CTAs with four groups of 32 keys; ViT-B/16 at
  // batch 1 (197 keys) two groups of 64; one query row takes one warp.
  auto pick = [](int64_t batch, int64_t s, int64_t d) {
    const AttentionConfig c = ops::PickAttentionConfig(batch, s, s, d, d, true);
    return std::make_tuple(c.bm, c.bn, c.splits);
  };
  EXPECT_EQ(pick(384, 128, 64), std::make_tuple(64, 64, 1));
  EXPECT_EQ(pick(12, 128, 64), std::make_tuple(32, 32, 4));
  EXPECT_EQ(pick(12, 197, 64), std::make_tuple(32, 64, 2));
  EXPECT_EQ(ops::PickAttentionConfig(4096, 1, 128, 64, 64, true).bm, 16);
  // Whisper-base's encoder at batch 1 (8 heads x 1500 frames: 192 CTAs of 64 rows)
  // takes 48 rows in two groups of 32 keys; at batch 2 (384 CTAs), and with few keys,
  // 64 rows.
  EXPECT_EQ(pick(8, 1500, 64), std::make_tuple(48, 32, 2));
  EXPECT_EQ(pick(16, 1500, 64), std::make_tuple(64, 64, 1));
  // Swin-T's 49-key windows at batch 1: stage 1 (64 windows x 3 heads, 192 CTAs of 64
  // rows) and stage 3 (4 x 12, 32-row CTAs) in four groups of 16 keys; at batch 32 (6144
  // CTAs) one group; keys one group covers stay in one group.
  EXPECT_EQ(pick(192, 49, 32), std::make_tuple(64, 16, 4));
  EXPECT_EQ(pick(48, 49, 32), std::make_tuple(32, 16, 4));
  EXPECT_EQ(pick(6144, 49, 32), std::make_tuple(64, 64, 1));
  EXPECT_EQ(ops::PickAttentionConfig(16, 8, 8, 32, 32, true).splits, 1);
  EXPECT_EQ(ops::PickAttentionConfig(384, 128, 128, 64, 64, true).bn, 64);
  EXPECT_EQ(ops::PickAttentionConfig(384, 128, 128, 96, 96, true).bn, 64);
  EXPECT_EQ(ops::PickAttentionConfig(384, 128, 128, 128, 128, true).bn, 32);
  for (int64_t d : {32, 64, 80, 96, 128}) {
    const AttentionConfig c = ops::PickAttentionConfig(8, 300, 300, d, d, false);
    EXPECT_TRUE(ops::VerifyAttentionConfig(c, d, d, false).ok()) << d;
  }
  // Key groups: 1, 2 or 4 (BM 128 with 4 groups is 1024 threads); the merge buffer ((splits - 1) *
  // BM * 2 threads x (DVP / 2 + 4) floats) counts when the tiles are smaller.
  EXPECT_TRUE(ops::VerifyAttentionConfig(AttentionConfig{64, 32, 2}, 64, 64, true).ok());
  EXPECT_NE(ops::VerifyAttentionConfig(AttentionConfig{64, 32, 3}, 64, 64, true).message().find("splits"),
            absl::string_view::npos);
  EXPECT_EQ(ops::AttentionSharedBytes(AttentionConfig{64, 32, 2}, 64, 64, true), 5 * 64 * 72 * 2);
  EXPECT_EQ(ops::AttentionSharedBytes(AttentionConfig{64, 16, 4}, 64, 64, true), 3 * 128 * (32 + 4) * 4);
  // The fusion pass and the kernel agree on the head dims.
  EXPECT_EQ(FuseAttention::kMaxHeadDim, ops::kAttentionMaxHeadDim);
}

// torch.export's SDPA form with GQA: the group reads the unrepeated K and V ([B,S,Hkv,D]
// projections) through the head split, repeat_kv and the key reshapes; query head h
// reads key/value head h / 4 (the flat batch index's factors: batch, key head, and a
// stride-0 repeat); the keys' scale joins the scores and the NaN guard costs nothing.
TEST(AttentionCodegenTest, SdpaWithGroupedQueryHeads) {
  const AttnCase c{DType::kFloat16, 2, 8, 77, 77, 64, 64, AttnMask::kSdpa, true, true, 2};
  absl::StatusOr<test::AttnBuilt> b = test::BuildAttention(c, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  const Node& group = *b->group;
  absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(group);
  ASSERT_TRUE(l.ok()) << l.status();
  const KernelLaunch& k = (*l)[0];
  EXPECT_EQ(ArgNames(group, k), (std::vector<std::string>{"merge_heads_out", "q", "k", "v", "mask"}));
  EXPECT_EQ(group.input(1)->shape(), (Shape{2, 77, 2, 64}));
  // K rows (keys) at the pitch of [B,S,Hkv,D]: 2 * 64; batch b = 8 * n + h reaches
  // n * 77 * 128 + (h / 4) * 64.
  EXPECT_EQ(Define(k, "ATTN_K_TRANS"), "1");
  EXPECT_EQ(Define(k, "ATTN_K_LD"), "128");
  EXPECT_NE(k.source.find("kiln_attn_k_offset(int batch KILN_ATTN_PARAMS) { return (kiln_index)((batch / 4) % 2) * 64LL + "
                          "(kiln_index)((batch / 8) % 2) * 9856LL; }"),
            std::string::npos)
      << k.source.substr(k.source.find("kiln_attn_k_offset"), 200);
  int expands = 0;
  for (const Node* n : FusedGroupBody(group).value()->nodes()) expands += n->op_type() == "Expand";
  EXPECT_EQ(expands, 2) << "repeat_kv of K and V inside the group";
}

// Swin's window attention: the group reads the packed QKV product [B,N,3,H,D] once,
// Q, K and V at offsets 0, H*D, 2*H*D (the Gathers of index 0, 1, 2 through the
// Transpose [2,0,3,1,4]), and adds the shifted windows' mask where the scores are
// regrouped as [B/2, 2, H, N, N]: batch b = 3 * w + h reads mask window w % 2.
TEST(AttentionCodegenTest, PackedQkvAndShiftedWindows) {
  const AttnCase c{DType::kFloat16, 4, 3, 49, 49, 32, 32, AttnMask::kWindows, false, false, 0, true};
  absl::StatusOr<test::AttnBuilt> b = test::BuildAttention(c, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  const Node& group = *b->group;
  absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(group);
  ASSERT_TRUE(l.ok()) << l.status();
  const KernelLaunch& k = (*l)[0];
  EXPECT_EQ(ArgNames(group, k), (std::vector<std::string>{"context_out", "qkv", "qkv", "qkv", "bias", "wmask"}));
  EXPECT_EQ(Define(k, "ATTN_Q_LD"), "288");  // 3 * H * D
  EXPECT_EQ(Define(k, "ATTN_K_TRANS"), "1");  // K's Transpose read through strides: rows of keys
  for (const char* want : {"kiln_attn_q_offset(int batch KILN_ATTN_PARAMS) { return (kiln_index)((batch / 1) % 3) * 32LL + "
                           "(kiln_index)((batch / 3) % 4) * 14112LL; }",
                           "kiln_attn_k_offset(int batch KILN_ATTN_PARAMS) { return (kiln_index)((batch / 1) % 3) * 32LL + "
                           "(kiln_index)((batch / 3) % 4) * 14112LL + 96LL; }",
                           "kiln_attn_v_offset(int batch KILN_ATTN_PARAMS) { return (kiln_index)((batch / 1) % 3) * 32LL + "
                           "(kiln_index)((batch / 3) % 4) * 14112LL + 192LL; }"}) {
    EXPECT_NE(k.source.find(want), std::string::npos) << want;
  }
  const std::string score = k.source.substr(k.source.find("kiln_attn_score"), 1200);
  EXPECT_NE(score.find("% 2"), std::string::npos) << score;
  int gathers = 0, reshapes = 0;
  for (const Node* n : FusedGroupBody(group).value()->nodes()) {
    gathers += n->op_type() == "Gather";
    reshapes += n->op_type() == "Reshape";
  }
  EXPECT_EQ(gathers, 3) << "the selects of Q, K and V inside the group";
  EXPECT_EQ(reshapes, 2) << "the scores' regrouping and its inverse inside the group";
}

TEST(AttentionCodegenTest, RoutedToTheKernelInEveryMode) {
  absl::StatusOr<test::AttnBuilt> b = test::BuildAttention({DType::kFloat16, 1, 12, 128, 128, 64, 64, AttnMask::kAdd}, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  const Node& group = *b->group;
  EXPECT_EQ(group.GetString("pattern", "").value_or(""), "attention");
  EXPECT_FALSE(IsMatMulGroup(group));
  EXPECT_EQ(LibraryKernelName(group), "");
  for (bool gemm : {false, true}) {
    KernelOptions options;
    options.matmul_groups = gemm ? codegen::MatMulGroups::kGenerated : codegen::MatMulGroups::kLibrary;
    absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(group, options);
    ASSERT_TRUE(l.ok()) << l.status();
    ASSERT_EQ(l->size(), 1u);
    const KernelLaunch& k = (*l)[0];
    EXPECT_NE(k.source.find("kiln_attn_score"), std::string::npos);
    // O, Q, K, V, the mask; grid (Sq / 32 rows, 12 heads), two warps in each of four
    // key groups.
    EXPECT_EQ(ArgNames(group, k), (std::vector<std::string>{"context_out", "q", "k", "v", "mask"}));
    EXPECT_EQ(k.grid, (std::array<uint32_t, 3>{4, 12, 1}));
    EXPECT_EQ(k.block, (std::array<uint32_t, 3>{256, 1, 1}));
  }
  // A config override is verified.
  ops::AttentionConfig bad{40, 64};
  EXPECT_EQ(ops::GenerateAttentionGroup(group, &bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(AttentionCodegenTest, CausalMaskIsComputedAndSkipsKeys) {
  absl::StatusOr<test::AttnBuilt> b =
      test::BuildAttention({DType::kBFloat16, 2, 2, 100, 100, 32, 32, AttnMask::kCausal}, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*b->group);
  ASSERT_TRUE(l.ok()) << l.status();
  const KernelLaunch& k = (*l)[0];
  EXPECT_EQ(Define(k, "ATTN_CAUSAL_LIMIT"), "1");
  EXPECT_NE(k.source.find("col <= row"), std::string::npos);
  EXPECT_EQ(ArgNames(*b->group, k), (std::vector<std::string>{"context_out", "q", "k", "v"}));  // no mask read
  // Where(cond, fill, scores) with a full-shape condition input is read, not skipped;
  // the constant scale on Q is applied to the scores (no Q prologue), a computed one
  // to the Q tile.
  AttnCase fill{DType::kFloat16, 2, 2, 100, 100, 32, 32, AttnMask::kFill};
  b = test::BuildAttention(fill, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  l = GenerateNodeKernels(*b->group);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(Define((*l)[0], "ATTN_CAUSAL_LIMIT"), "0");
  EXPECT_EQ(Define((*l)[0], "ATTN_Q_PROLOGUE"), "0");
  EXPECT_EQ(ArgNames(*b->group, (*l)[0]), (std::vector<std::string>{"context_out", "q", "k", "v", "cond"}));
  fill.q_scale_input = true;
  b = test::BuildAttention(fill, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  l = GenerateNodeKernels(*b->group);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(Define((*l)[0], "ATTN_Q_PROLOGUE"), "1");
  EXPECT_EQ(ArgNames(*b->group, (*l)[0]), (std::vector<std::string>{"context_out", "q", "k", "v", "cond", "qscale"}));
}

// torch.export writes GPT-2's and Llama's causal mask as a constant [B,1,S,S] added to
// the scores, 0 on and below the diagonal and -inf (finfo.min in fp16) above: the
// kernel computes it and skips the keys past its rows, as for the Where form. A
// constant that is not causal by one key is read.
TEST(AttentionCodegenTest, SdpaConstantCausalMaskIsComputedAndSkipsKeys) {
  AttnCase c{DType::kFloat16, 2, 8, 77, 77, 64, 64, AttnMask::kSdpa, true, true, 2};
  c.sdpa_mask = AttnCase::SdpaMask::kCausal;
  absl::StatusOr<test::AttnBuilt> b = test::BuildAttention(c, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*b->group);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(Define((*l)[0], "ATTN_CAUSAL_LIMIT"), "1");
  EXPECT_NE((*l)[0].source.find("(col <= row ? 0 : __int_as_float(0xff800000));  // causal mask mask"),
            std::string::npos);
  EXPECT_EQ(ArgNames(*b->group, (*l)[0]), (std::vector<std::string>{"merge_heads_out", "q", "k", "v"}));

  c.sdpa_mask = AttnCase::SdpaMask::kNearCausal;
  b = test::BuildAttention(c, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  l = GenerateNodeKernels(*b->group);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(Define((*l)[0], "ATTN_CAUSAL_LIMIT"), "0");
  EXPECT_EQ((*l)[0].source.find("causal mask"), std::string::npos);
  EXPECT_EQ(ArgNames(*b->group, (*l)[0]), (std::vector<std::string>{"merge_heads_out", "q", "k", "v", "mask"}));
}

// Q, K, V and the output in [B,S,H,D]: the group reads the head-split inputs and
// writes the merged output through row pitches of H * D; K' = Transpose [0,2,3,1] is
// read by rows of keys like K with trans_b.
TEST(AttentionCodegenTest, HeadLayoutThroughStrides) {
  for (bool k_trans : {true, false}) {
    SCOPED_TRACE(k_trans);
    absl::StatusOr<test::AttnBuilt> b =
        test::BuildAttention({DType::kFloat16, 2, 12, 128, 128, 64, 64, AttnMask::kAdd, k_trans, true}, 1);
    ASSERT_TRUE(b.ok()) << b.status();
    absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*b->group);
    ASSERT_TRUE(l.ok()) << l.status();
    const KernelLaunch& k = (*l)[0];
    EXPECT_EQ(ArgNames(*b->group, k), (std::vector<std::string>{"merge_heads_out", "q", "k", "v", "mask"}));
    for (const char* ld : {"ATTN_Q_LD", "ATTN_K_LD", "ATTN_V_LD", "ATTN_O_LD"}) EXPECT_EQ(Define(k, ld), "768") << ld;
    EXPECT_EQ(Define(k, "ATTN_K_TRANS"), "1");
    EXPECT_EQ(Define(k, "ATTN_K_ASYNC"), "1");
    // Batch entry (b, h) starts at b * S * H * D + h * D.
    EXPECT_NE(k.source.find("kiln_attn_q_offset(int batch KILN_ATTN_PARAMS) { return (kiln_index)((batch / 1) % 12) * "
                            "64LL + (kiln_index)((batch / 12) % 2) * 98304LL; }"),
              std::string::npos)
        << k.source.substr(k.source.find("kiln_attn_q_offset"), 200);
  }
}

// `text` parsed, typed and through FuseAttention, with the attention group it formed
// (beside it the views the group reads as they are); an error when it formed none.
struct FusedAttention {
  std::unique_ptr<Graph> graph;
  const Node* group = nullptr;
};
absl::StatusOr<FusedAttention> FuseOneAttention(const std::string& text) {
  FusedAttention f;
  KILN_ASSIGN_OR_RETURN(f.graph, ParseGraph(text));
  KILN_RETURN_IF_ERROR(InferShapes(*f.graph));
  KILN_ASSIGN_OR_RETURN(bool fused, FuseAttention().Run(*f.graph));
  if (!fused) return absl::NotFoundError("fuse-attention formed no group");
  KILN_RETURN_IF_ERROR(InferShapes(*f.graph, {.fold_constants = false}));
  for (const Node* n : f.graph->nodes()) {
    if (IsFusedGroup(*n)) f.group = n;
  }
  return f;
}

// The legacy torch exporter's BERT self-attention (transformers' SDPA path, cut from
// the zoo's bert.legacy compiled with --dim batch=1..8 --dim seq=1..64): the head split
// Reshapes to symbolic targets, the sqrt scale on Q and on K', the [batch, 1, seq, seq]
// additive mask, torch's NaN guard and the head merge.
constexpr char kDynamicBert[] = R"(graph @main {
  dim batch in [1, 8]
  dim seq in [1, 64]
  input %q_in : f16[8,64,64] dims "batch, seq, 64"
  input %k_in : f16[8,64,64] dims "batch, seq, 64"
  input %v_in : f16[8,64,64] dims "batch, seq, 64"
  input %mask : f16[8,1,64,64] dims "batch, 1, seq, seq"
  const %split : i64[4] = [8, 64, -1, 32] symbolic "batch, seq, -1, 32"
  const %scale : f16[] = [0.4204]
  const %zero : f16[1] = [0.0]
  %q4 : f16[8,64,2,32] = Reshape(%q_in, %split)
  %q = Transpose(%q4) {perm = [0, 2, 1, 3]}
  %k4 : f16[8,64,2,32] = Reshape(%k_in, %split)
  %v4 : f16[8,64,2,32] = Reshape(%v_in, %split)
  %v = Transpose(%v4) {perm = [0, 2, 1, 3]}
  %kt = Transpose(%k4) {perm = [0, 2, 3, 1]}
  %qs = Mul(%q, %scale)
  %ks = Mul(%kt, %scale)
  %s = MatMul(%qs, %ks)
  %sm = Add(%s, %mask)
  %p = Softmax(%sm) {axis = -1}
  %nan = IsNaN(%p)
  %pg = Where(%nan, %zero, %p)
  %o = MatMul(%pg, %v)
  %out = Transpose(%o) {perm = [0, 2, 1, 3]}
  output %out
})";

// The group formed on it: the kernel takes the sequence length and the batch at run
// time (kiln_dims), reads every operand and the mask at strides that are expressions
// of them, launches a grid that follows the sizes, comes in tile-config variants for
// size boxes that cover the ranges once, and compiles (the wgmma kernel too).
TEST(AttentionCodegenTest, RunTimeSizesOfTheLegacyBertExport) {
  absl::StatusOr<FusedAttention> g = FuseOneAttention(kDynamicBert);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*g->group);
  ASSERT_TRUE(l.ok()) << l.status();
  // Tile configs per size: several variants, each size served by exactly one.
  ASSERT_GE(l->size(), 2u);
  for (int64_t b = 1; b <= 8; ++b) {
    for (int64_t s = 1; s <= 64; ++s) {
      int serving = 0;
      for (const KernelLaunch& k : *l) {
        for (const auto& box : k.size_boxes) {
          ASSERT_EQ(box.size(), 2u);
          serving += box[0][0] <= b && b <= box[0][1] && box[1][0] <= s && s <= box[1][1] ? 1 : 0;
        }
      }
      EXPECT_EQ(serving, 1) << "batch " << b << ", seq " << s;
    }
  }
  std::vector<ModuleKernel> kernels;
  for (const KernelLaunch& k : *l) {
    SCOPED_TRACE(Define(k, "ATTN_BM") + "x" + Define(k, "ATTN_BN") + "/" + Define(k, "ATTN_SPLITS"));
    EXPECT_TRUE(k.dim_param);
    EXPECT_EQ(Define(k, "ATTN_SQ"), "(int)(KILN_DIM(1))");
    EXPECT_EQ(Define(k, "ATTN_SK"), "(int)(KILN_DIM(1))");
    for (const char* ld : {"ATTN_Q_LD", "ATTN_K_LD", "ATTN_V_LD", "ATTN_O_LD"}) EXPECT_EQ(Define(k, ld), "64") << ld;
    EXPECT_EQ(Define(k, "ATTN_K_TRANS"), "1");
    // Batch entry (b, h) of Q, K, V and the output starts at b * seq * 64 + h * 32;
    // the mask's (b, row, col) at b * seq * seq + row * seq + col.
    for (const char* f : {"q", "k", "v", "o"}) {
      EXPECT_NE(k.source.find(absl::StrCat("kiln_attn_", f,
                                           "_offset(int batch KILN_ATTN_PARAMS) { return (kiln_index)(batch % (2)) * "
                                           "(32) + (kiln_index)(batch / (2)) * (64*KILN_DIM(1)); }")),
                std::string::npos)
          << f << ": " << k.source.substr(k.source.find(absl::StrCat("kiln_attn_", f, "_offset")), 200);
    }
    EXPECT_NE(k.source.find("(kiln_index)(batch / (2)) * (KILN_DIM(1)*KILN_DIM(1)) + (kiln_index)row * (KILN_DIM(1)) + "
                            "(kiln_index)col * (1)"),
              std::string::npos);
    EXPECT_EQ(k.grid_extents[0].ToString(g->graph->dim_symbols()), "seq");
    EXPECT_EQ(k.grid_extents[1].ToString(g->graph->dim_symbols()), "2*batch");
    EXPECT_EQ(k.grid_per_block[0], std::stoi(Define(k, "ATTN_BM")));
    EXPECT_EQ(k.grid_per_block[1], 1);
    kernels.push_back({absl::StrCat("attn", kernels.size()), k.source});
  }
  for (const char* arch : {"sm_90a", "sm_80"}) {
    absl::StatusOr<std::string> cubin = CompileModule(kernels, arch);
    EXPECT_TRUE(cubin.ok()) << arch << ": " << cubin.status();
  }
  // The wgmma kernel (codegen/templates/attention_sm90.cuh) takes the same run-time
  // sizes, with and without the overlap: one variant each, the grid per 64 rows.
  std::vector<ModuleKernel> wgmma;
  for (bool overlap : {false, true}) {
    const ops::AttentionConfig cfg{64, 64, 1, true, overlap};
    absl::StatusOr<std::vector<KernelLaunch>> w = ops::GenerateAttentionGroup(*g->group, &cfg);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_EQ(w->size(), 1u);
    EXPECT_TRUE((*w)[0].dim_param);
    EXPECT_EQ(Define((*w)[0], "ATTN_SQ"), "(int)(KILN_DIM(1))");
    EXPECT_EQ((*w)[0].grid_per_block[0], 64);
    wgmma.push_back({absl::StrCat("attn_wgmma", wgmma.size()), (*w)[0].source});
  }
  absl::StatusOr<std::string> cubin = CompileModule(wgmma, "sm_90a");
  EXPECT_TRUE(cubin.ok()) << cubin.status();
}

// GPT-2's packed-sequence mask built from the sizes (graph/gpt2_mask_test_graph.h) on a
// dynamic graph: once mark-causal-masks has marked it, every size variant computes it
// from col <= row and skips the keys past its rows; unmarked, the kernel loads it.
TEST(AttentionCodegenTest, RunTimeSizesComputeAMarkedSizeOnlyMask) {
  absl::StatusOr<FusedAttention> g = FuseOneAttention(kiln::test::Gpt2MaskedAttention());
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::vector<KernelLaunch>> unmarked = GenerateNodeKernels(*g->group);
  ASSERT_TRUE(unmarked.ok()) << unmarked.status();
  for (const KernelLaunch& k : *unmarked) {
    EXPECT_EQ(Define(k, "ATTN_CAUSAL_LIMIT"), "0");
    EXPECT_EQ(k.source.find("causal mask"), std::string::npos);
  }
  absl::StatusOr<bool> marked = MarkCausalMasks().Run(*g->graph);
  ASSERT_TRUE(marked.ok() && *marked) << marked.status();
  absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*g->group);
  ASSERT_TRUE(l.ok()) << l.status();
  std::vector<ModuleKernel> kernels;
  for (const KernelLaunch& k : *l) {
    EXPECT_TRUE(k.dim_param);
    EXPECT_EQ(Define(k, "ATTN_CAUSAL_LIMIT"), "1");
    EXPECT_NE(k.source.find("(col <= row ? 0 : __int_as_float(0xff800000));  // causal mask mask"), std::string::npos);
    // One parameter fewer: the mask is not read.
    EXPECT_EQ(k.args.size() + 1, (*unmarked)[0].args.size());
    kernels.push_back({absl::StrCat("attn", kernels.size()), k.source});
  }
  absl::StatusOr<std::string> cubin = CompileModule(kernels, "sm_90a");
  EXPECT_TRUE(cubin.ok()) << cubin.status();
}

// A packed QKV product selected by Gathers (torchvision's and Swin's in_proj form) on
// a dynamic graph: K and V start 64 and 128 elements into each row of 192.
TEST(AttentionCodegenTest, RunTimeSizesReadAPackedQkvThroughItsSelects) {
  absl::StatusOr<FusedAttention> g = FuseOneAttention(R"(graph @main {
  dim batch in [1, 8]
  dim seq in [1, 64]
  input %qkv : f16[8,64,192] dims "batch, seq, 192"
  const %split : i64[5] = [8, 64, 3, 2, 32] symbolic "batch, seq, 3, 2, 32"
  const %i0 : i64[] = [0]
  const %i1 : i64[] = [1]
  const %i2 : i64[] = [2]
  const %scale : f16[] = [0.1767]
  %p5 = Reshape(%qkv, %split)
  %pt = Transpose(%p5) {perm = [2, 0, 3, 1, 4]}
  %q = Gather(%pt, %i0) {axis = 0}
  %k = Gather(%pt, %i1) {axis = 0}
  %v = Gather(%pt, %i2) {axis = 0}
  %qs = Mul(%q, %scale)
  %kt = Transpose(%k) {perm = [0, 1, 3, 2]}
  %s = MatMul(%qs, %kt)
  %p = Softmax(%s) {axis = -1}
  %o = MatMul(%p, %v)
  output %o
})");
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*g->group);
  ASSERT_TRUE(l.ok()) << l.status();
  const KernelLaunch& k = l->front();
  EXPECT_TRUE(k.dim_param);
  EXPECT_EQ(Define(k, "ATTN_Q_LD"), "192");
  EXPECT_EQ(Define(k, "ATTN_K_LD"), "192");
  EXPECT_NE(k.source.find("kiln_attn_k_offset(int batch KILN_ATTN_PARAMS) { return (64) + (kiln_index)(batch % (2)) * "
                          "(32) + (kiln_index)(batch / (2)) * (192*KILN_DIM(1)); }"),
            std::string::npos)
      << k.source.substr(k.source.find("kiln_attn_k_offset"), 200);
  EXPECT_NE(k.source.find("kiln_attn_v_offset(int batch KILN_ATTN_PARAMS) { return (128) + "), std::string::npos);
}

// Heads merged into the batch after the head Transpose ([batch, 2, seq, 32] to
// [2 * batch, seq, 32], the 3-D bmm form): a static group reads it through two stride
// factors, but no one stride per dim holds at every size, so the group with run-time
// sizes has no kernel (and is expanded) rather than one for the largest sizes.
TEST(AttentionCodegenTest, RunTimeSizesRefuseHeadsMergedIntoTheBatch) {
  const std::string body = R"(
  %q4 = Reshape(%q_in, %split)
  %q = Transpose(%q4) {perm = [0, 2, 1, 3]}
  %q3 = Reshape(%q, %merge)
  %k4 = Reshape(%k_in, %split)
  %k = Transpose(%k4) {perm = [0, 2, 1, 3]}
  %k3 = Reshape(%k, %merge)
  %kt = Transpose(%k3) {perm = [0, 2, 1]}
  %v4 = Reshape(%v_in, %split)
  %v = Transpose(%v4) {perm = [0, 2, 1, 3]}
  %v3 = Reshape(%v, %merge)
  %s = MatMul(%q3, %kt)
  %sd = Div(%s, %scale)
  %p = Softmax(%sd) {axis = -1}
  %o = MatMul(%p, %v3)
  output %o
})";
  const std::string fixed = R"(graph @main {
  input %q_in : f16[8,64,64]
  input %k_in : f16[8,64,64]
  input %v_in : f16[8,64,64]
  const %split : i64[4] = [8, 64, -1, 32]
  const %merge : i64[3] = [16, 64, 32]
  const %scale : f16[] = [5.657])";
  const std::string ranged = R"(graph @main {
  dim batch in [1, 8]
  dim seq in [1, 64]
  input %q_in : f16[8,64,64] dims "batch, seq, 64"
  input %k_in : f16[8,64,64] dims "batch, seq, 64"
  input %v_in : f16[8,64,64] dims "batch, seq, 64"
  const %split : i64[4] = [8, 64, -1, 32] symbolic "batch, seq, -1, 32"
  const %merge : i64[3] = [16, 64, 32] symbolic "2*batch, seq, 32"
  const %scale : f16[] = [5.657])";
  for (bool dynamic : {false, true}) {
    SCOPED_TRACE(dynamic);
    absl::StatusOr<FusedAttention> g = FuseOneAttention((dynamic ? ranged : fixed) + body);
    ASSERT_TRUE(g.ok()) << g.status();
    absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*g->group);
    if (!dynamic) {
      EXPECT_TRUE(l.ok()) << l.status();
      continue;
    }
    ASSERT_FALSE(l.ok());
    EXPECT_EQ(l.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_NE(l.status().message().find("strides are not expressions of the sizes"), std::string::npos) << l.status();
  }
}

// torch.export's K^T in GPT-2 with dynamic batch and seq (dynamo exporter, cut from
// that export): the head-split K [batch, 2, seq, 32] reshaped to [-1, seq, 32] (heads
// merged into the batch, not contiguous), transposed, and split back to [batch, 2,
// 32, seq]. The merge is undone within the chain, so K has one stride per dim at
// every size and the group takes its sizes at run time.
TEST(AttentionCodegenTest, RunTimeSizesReadKThroughAMergeSplitBack) {
  // kDynamicBert with K^T written that way.
  const std::string text = absl::StrReplaceAll(
      kDynamicBert,
      {{"  const %scale", "  const %merge : i64[3] = [-1, 64, 32] symbolic \"-1, seq, 32\"\n"
                        "  const %back : i64[4] = [8, 2, 32, 64] symbolic \"batch, 2, 32, seq\"\n  const %scale"},
       {"  %kt = Transpose(%k4) {perm = [0, 2, 3, 1]}\n",
        "  %k = Transpose(%k4) {perm = [0, 2, 1, 3]}\n  %k3 = Reshape(%k, %merge)\n"
        "  %k3t = Transpose(%k3) {perm = [0, 2, 1]}\n  %kt = Reshape(%k3t, %back)\n"}});
  ASSERT_NE(text.find("%back : i64[4]"), std::string::npos);
  ASSERT_NE(text.find("%kt = Reshape(%k3t, %back)"), std::string::npos);
  absl::StatusOr<FusedAttention> g = FuseOneAttention(text);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*g->group);
  ASSERT_TRUE(l.ok()) << l.status();
  std::vector<ModuleKernel> kernels;
  for (const KernelLaunch& k : *l) {
    EXPECT_TRUE(k.dim_param);
    EXPECT_EQ(Define(k, "ATTN_K_TRANS"), "1");
    EXPECT_EQ(Define(k, "ATTN_K_LD"), "64");
    // K's (b, h) entry starts where the head split puts it, as if no merge were made.
    EXPECT_NE(k.source.find("kiln_attn_k_offset(int batch KILN_ATTN_PARAMS) { return (kiln_index)(batch % (2)) * "
                            "(32) + (kiln_index)(batch / (2)) * (64*KILN_DIM(1)); }"),
              std::string::npos)
        << k.source.substr(k.source.find("kiln_attn_k_offset"), 200);
    kernels.push_back({absl::StrCat("attn", kernels.size()), k.source});
  }
  absl::StatusOr<std::string> cubin = CompileModule(kernels, "sm_90a");
  EXPECT_TRUE(cubin.ok()) << cubin.status();
}

TEST(AttentionCodegenTest, UnsupportedGroupsAreUnimplemented) {
  // An f32 attention group (the pass refuses it; formed by hand here).
  absl::StatusOr<test::AttnBuilt> b =
      test::BuildAttention({DType::kFloat16, 1, 2, 16, 16, 32, 32, AttnMask::kNone}, 1, /*fuse=*/false);
  ASSERT_TRUE(b.ok()) << b.status();
  Graph& g = *b->graph;
  for (Value* v : g.values()) {
    if (v->has_type() && v->dtype() == DType::kFloat16) v->SetType(DType::kFloat32, v->shape());
  }
  for (Value* c : g.constants()) g.SetConstant(c, Tensor::FromFloat(DType::kFloat32, c->shape(), c->constant().ToFloat()));
  std::vector<Node*> members = g.nodes();
  absl::StatusOr<Node*> group = FormFusedGroup(g, members, "attention", members[0]);
  ASSERT_TRUE(group.ok()) << group.status();
  const absl::Status st = GenerateNodeKernels(**group).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
  EXPECT_NE(st.message().find("f32"), absl::string_view::npos) << st;
}

}  // namespace
}  // namespace kiln::codegen
