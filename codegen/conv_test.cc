// Tests of the generated convolutions (codegen/ops/conv.cc) that need no GPU: every
// form (im2col gather by cp.async or register-staged, W by cp.async or staged, the
// 128x128 tiles, grouped implicit GEMM, depthwise with 8-channel vectors or one channel, fp16/bf16/fp32,
// epilogues) compiles with NVRTC for sm_80 and sm_90a, the 128x128 implicit-GEMM
// kernels do not spill, the gather's config check, and routing (what the kernels
// take, what stays on cuDNN and why). codegen/conv_gpu_test.cc runs them.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/conv_test_cases.h"
#include "codegen/nvrtc_module.h"
#include "codegen/kernel_choice.h"
#include "codegen/op_kernels.h"
#include "codegen/ops/families.h"

namespace kiln::codegen {
namespace {

using test::BuildConv;
using test::ConvCase;
using test::ConvEpi;

std::string Define(const std::string& src, const std::string& name) {
  const std::string key = absl::StrCat("#define ", name, " ");
  const size_t at = src.find(key);
  if (at == std::string::npos) return "-";
  return src.substr(at + key.size(), src.find('\n', at) - at - key.size());
}

// The kernel's form: implicit GEMM (dtype, A and B modes, 128-wide tiles, grouped) or
// depthwise (dtype, vector width).
std::string Form(const std::string& src) {
  if (Define(src, "GEMM_CONV") == "1") {
    return absl::StrCat("gemm bf16=", Define(src, "GEMM_BF16"), " a=", Define(src, "GEMM_A_MODE"),
                        " b=", Define(src, "GEMM_B_MODE"), " tile=", Define(src, "BM"), "x", Define(src, "BN"),
                        Define(src, "CONV_GROUPED") == "1" ? " grouped" : "");
  }
  return absl::StrCat("depthwise ", Define(src, "DW_T"), " vec=", Define(src, "DW_VEC"));
}

KernelOptions ConvOn() {
  KernelOptions o;
  o.conv_groups = codegen::ConvGroups::kGenerated;
  return o;
}

TEST(ConvCodegenTest, CompilesForSm80AndSm90a) {
  std::vector<ModuleKernel> kernels;
  std::set<std::string> forms;
  uint32_t seed = 1;
  for (const ConvCase& c : test::ConvCases()) {
    absl::StatusOr<test::ConvBuilt> b = BuildConv(c, seed += 10);
    ASSERT_TRUE(b.ok()) << c.Name() << ": " << b.status();
    ASSERT_TRUE(ops::ConvKernelFits(*b->node).ok()) << c.Name() << ": " << ops::ConvKernelFits(*b->node);
    // The heuristic's tiles, and 64x64 ones (which it gives these small problems only
    // on GPUs with few SMs).
    const ops::GemmConfig tiles64{64, 64, 32, 2, 2, 4};
    for (int forced = 0; forced < 2; ++forced) {
      absl::StatusOr<std::vector<KernelLaunch>> l =
          forced ? ops::GenerateConv(*b->node, &tiles64) : GenerateNodeKernels(*b->node, ConvOn());
      ASSERT_TRUE(l.ok()) << c.Name() << ": " << l.status();
      ASSERT_EQ(l->size(), 1u);
      // A kernel when it adds a form or an epilogue kind, which keeps the test to seconds
      // (the tile and load forms are checked in fp16; bf16 changes only the mma type).
      const std::string form = Form((*l)[0].source);
      const bool new_form = forms.insert(form.rfind("gemm bf16=1", 0) == 0 ? "gemm bf16=1" : form).second;
      const bool new_epi = forms.insert(absl::StrCat("epilogue ", static_cast<int>(c.epi), c.bias)).second;
      if (!new_form && !new_epi) continue;
      kernels.push_back({absl::StrCat("kiln_conv_", c.Name(), forced ? "_tiles64" : ""), (*l)[0].source});
    }
  }
  std::set<std::string> distinct;
  for (const ModuleKernel& k : kernels) distinct.insert(Form(k.source));
  // Implicit GEMM: {cp.async gather with cp.async W, staged gather with staged W
  // (C = 3, 5: K % 8 != 0)} x {32x32, 64x64, 128x128} tiles in fp16, and bf16;
  // depthwise: f16/bf16 x {8 channels, 1}, and f32; grouped: both gathers, staged or
  // cp.async W, several tiles.
  EXPECT_GE(distinct.size(), 16u) << absl::StrJoin(distinct, "\n");
  int grouped = 0;
  for (const std::string& f : distinct) grouped += f.find(" grouped") != std::string::npos;
  EXPECT_GE(grouped, 4) << absl::StrJoin(distinct, "\n");
  for (const char* arch : {"sm_80", "sm_90a"}) {
    absl::StatusOr<std::vector<std::string>> cubins = CompileModules(kernels, arch, 8);
    EXPECT_TRUE(cubins.ok()) << arch << ": " << cubins.status();
  }
  std::printf("compiled %zu conv kernels (%zu forms) for sm_80 and sm_90a:\n  %s\n", kernels.size(), distinct.size(),
              absl::StrJoin(distinct, "\n  ").c_str());
}

// The register estimate (GemmRegisterEstimate with the gather's rows) holds for the
// 128x128 implicit-GEMM kernels of both gathers (the first fp16 case of each, the
// tile forced): no spills.
TEST(ConvCodegenTest, LargeTilesDoNotSpill) {
  std::vector<ModuleKernel> heavy;
  std::set<std::string> modes;
  uint32_t seed = 1;
  for (const ConvCase& c : test::ConvCases()) {
    if (c.dtype != DType::kFloat16 || c.group != 1) continue;
    absl::StatusOr<test::ConvBuilt> b = BuildConv(c, seed += 10);
    ASSERT_TRUE(b.ok()) << b.status();
    // 128x128 in 4 warps, or in 8 where the scalar gather's registers need them.
    for (const ops::GemmConfig& large :
         {ops::GemmConfig{128, 128, 32, 2, 2, 3}, ops::GemmConfig{128, 128, 32, 2, 4, 3}}) {
      absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateConv(*b->node, &large, 132);
      if (!l.ok()) continue;
      if (modes.insert(Define((*l)[0].source, "GEMM_A_MODE")).second) {
        heavy.push_back({absl::StrCat("kiln_conv_", c.Name()), (*l)[0].source});
      }
      break;
    }
  }
  ASSERT_EQ(heavy.size(), 2u);
  EXPECT_NE(Define(heavy[0].source, "GEMM_A_MODE"), Define(heavy[1].source, "GEMM_A_MODE"));
  absl::StatusOr<ModuleInspection> inspected = InspectModule(heavy, "sm_80");
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  for (const KernelResources& r : ParsePtxasResources(inspected->log)) {
    EXPECT_EQ(r.spill_store_bytes, 0) << r.function << " spills (" << r.registers << " registers)";
    std::printf("%-60s %d registers, %lld bytes spilled\n", r.function.c_str(), r.registers,
                static_cast<long long>(r.spill_store_bytes));
  }
}

TEST(ConvCodegenTest, GatherConfigCheck) {
  ops::GemmVariant scalar;
  scalar.mainloops[0].a.load = ops::GemmLoad::kIm2colScalar;
  scalar.mainloops[0].b.trans = true;
  EXPECT_TRUE(ops::VerifyConvGemmConfig(ops::GemmConfig{64, 64, 32, 2, 2, 4}, scalar).ok());
  EXPECT_TRUE(ops::VerifyConvGemmConfig(ops::GemmConfig{128, 128, 32, 2, 2, 3}, scalar).ok());
  // 128 threads, a 256 x 16 A tile: runs of 32 k's do not fit in BK = 16.
  const ops::GemmConfig wide{256, 32, 16, 4, 1, 3};
  ASSERT_TRUE(ops::VerifyGemmConfig(wide, scalar).ok()) << ops::VerifyGemmConfig(wide, scalar);
  const absl::Status bad = ops::VerifyConvGemmConfig(wide, scalar);
  EXPECT_NE(bad.message().find("must divide BK"), absl::string_view::npos) << bad;
  ops::GemmVariant async = scalar;
  async.mainloops[0].a.load = ops::GemmLoad::kIm2colAsync;
  EXPECT_TRUE(ops::VerifyConvGemmConfig(wide, async).ok());
  // The gather's registers count: 3 per row decomposed (+ the staged elements).
  EXPECT_EQ(ops::GemmRegisterEstimate(ops::GemmConfig{128, 128, 32, 2, 2, 3}, async), 148 + 3 * 4);
  EXPECT_EQ(ops::GemmRegisterEstimate(ops::GemmConfig{128, 128, 32, 2, 2, 3}, scalar), 148 + 3 + 32);
}

// The implicit GEMM's source: problem size, gather and the bias in the epilogue.
TEST(ConvCodegenTest, ImplicitGemmSource) {
  ConvCase c{DType::kFloat16, 2, 17, 19, 32, 48};
  c.epi = ConvEpi::kResidualRelu;
  absl::StatusOr<test::ConvBuilt> b = BuildConv(c, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(IsConvGroup(*b->node));
  absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*b->node, ConvOn());
  ASSERT_TRUE(l.ok()) << l.status();
  const std::string& src = (*l)[0].source;
  EXPECT_EQ(Define(src, "GEMM_M"), "646");  // 2 * 17 * 19
  EXPECT_EQ(Define(src, "GEMM_N"), "48");
  EXPECT_EQ(Define(src, "GEMM_K"), "288");  // 3 * 3 * 32
  EXPECT_EQ(Define(src, "GEMM_A_MODE"), "3");
  EXPECT_EQ(Define(src, "GEMM_B_MODE"), "0");
  EXPECT_EQ(Define(src, "CONV_PT"), "1");
  // 11 tiles of 64x64 fill no wave of 132 SMs: the 32x32 tiles give the most (42).
  EXPECT_EQ(Define(src, "BM"), "32");
  EXPECT_EQ(Define(src, "BN"), "32");
  absl::StatusOr<std::vector<KernelLaunch>> few_sms = ops::GenerateConv(*b->node, nullptr, /*sm_count=*/8);
  ASSERT_TRUE(few_sms.ok()) << few_sms.status();
  EXPECT_EQ(Define((*few_sms)[0].source, "BM"), "64");
  EXPECT_EQ(Define((*few_sms)[0].source, "BN"), "64");
  EXPECT_NE(src.find("const float cb = acc + g0;"), std::string::npos);
  // Whisper-base's first stem conv as conv1d-to-conv2d writes it (1 x 3000 x 80 NHWC,
  // 512 channels, kernel 1x3, pad 1): 96 tiles of 128x128 are short of two waves, so
  // 64x64 tiles (376); at batch 4 (384 tiles of 128x128) the larger tiles stay.
  for (int64_t batch : {1, 4}) {
    ConvCase whisper{DType::kFloat16, batch, 1, 3000, 80, 512, 1, 3, 1, 1, 0, 1, 0, 1};
    absl::StatusOr<test::ConvBuilt> w = BuildConv(whisper, 1);
    ASSERT_TRUE(w.ok()) << w.status();
    absl::StatusOr<std::vector<KernelLaunch>> wl = GenerateNodeKernels(*w->node, ConvOn());
    ASSERT_TRUE(wl.ok()) << wl.status();
    EXPECT_EQ(Define((*wl)[0].source, "GEMM_K"), "240");
    EXPECT_EQ(Define((*wl)[0].source, "BM"), batch == 1 ? "64" : "128") << batch;
    EXPECT_EQ(Define((*wl)[0].source, "BN"), batch == 1 ? "64" : "128") << batch;
  }
  // Stems of 16 and 32 channels (MobileNetV3, EfficientNet; 224x224 images padded to
  // 8 channels, 3x3 stride 2): tiles as wide as the output, all warps along M, 256
  // rows once they make two waves (batch 32), else 64.
  for (int64_t oc : {16, 32}) {
    for (int64_t batch : {1, 32}) {
      ConvCase stem{DType::kFloat16, batch, 224, 224, 8, oc, 3, 3, 2, 2};
      absl::StatusOr<test::ConvBuilt> st = BuildConv(stem, 1);
      ASSERT_TRUE(st.ok()) << st.status();
      absl::StatusOr<std::vector<KernelLaunch>> sl = GenerateNodeKernels(*st->node, ConvOn());
      ASSERT_TRUE(sl.ok()) << sl.status();
      EXPECT_EQ(Define((*sl)[0].source, "BM"), batch == 1 ? "64" : "256") << oc << " " << batch;
      EXPECT_EQ(Define((*sl)[0].source, "BN"), absl::StrCat(oc)) << oc << " " << batch;
      EXPECT_EQ(Define((*sl)[0].source, "WARPS_N"), "1");
    }
  }
  // Y, X, W, then the epilogue's bias and residual.
  EXPECT_EQ((*l)[0].args.size(), 5u);
  EXPECT_EQ((*l)[0].args[0], 0);
}

// A grouped conv's source and launch: one GEMM per group over gridDim.z, each M =
// N*OH*OW, N = OC/G, K = KH*KW*C/G, reading X from channel g*C/G, W from row
// g*OC/G and writing Y's columns from g*OC/G (row pitch OC); the gathers by C/G.
TEST(ConvCodegenTest, GroupedImplicitGemmSource) {
  ConvCase c{DType::kFloat16, 2, 15, 17, 128, 256, 3, 3, 2, 2};  // OH 8, OW 9
  c.group = 8;
  c.epi = ConvEpi::kRelu;
  absl::StatusOr<test::ConvBuilt> b = BuildConv(c, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*b->node, ConvOn());
  ASSERT_TRUE(l.ok()) << l.status();
  const KernelLaunch& k = (*l)[0];
  EXPECT_EQ(Define(k.source, "GEMM_M"), "144");  // 2 * 8 * 9
  EXPECT_EQ(Define(k.source, "GEMM_N"), "32");   // 256 / 8
  EXPECT_EQ(Define(k.source, "GEMM_K"), "144");  // 3 * 3 * 16
  EXPECT_EQ(Define(k.source, "GEMM_A_BATCH"), "16LL");
  EXPECT_EQ(Define(k.source, "GEMM_B_BATCH"), "4608LL");  // 32 * 144
  EXPECT_EQ(Define(k.source, "GEMM_C_BATCH"), "32LL");
  EXPECT_EQ(Define(k.source, "CONV_GROUPED"), "1");
  EXPECT_EQ(Define(k.source, "CONV_CG"), "16");
  EXPECT_EQ(Define(k.source, "CONV_OC"), "256");
  EXPECT_EQ(Define(k.source, "CONV_C"), "128");
  EXPECT_EQ(Define(k.source, "GEMM_A_MODE"), "3");
  EXPECT_EQ(Define(k.source, "GEMM_B_MODE"), "0");
  EXPECT_EQ(k.grid[2], 8u);
  const int bm = std::stoi(Define(k.source, "BM")), bn = std::stoi(Define(k.source, "BN"));
  EXPECT_EQ(k.grid[0], static_cast<uint32_t>(((144 + bm - 1) / bm) * ((32 + bn - 1) / bn)));
  // C/G = 6 (ShuffleNet's first 1x1, K = 6): the register-staged gather and W.
  ConvCase s{DType::kFloat16, 1, 28, 28, 24, 112, 1, 1, 1, 1, 0, 0, 0, 0};
  s.group = 4;
  b = BuildConv(s, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  l = GenerateNodeKernels(*b->node, ConvOn());
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(Define((*l)[0].source, "GEMM_A_MODE"), "4");
  EXPECT_EQ(Define((*l)[0].source, "GEMM_B_MODE"), "2");
  EXPECT_EQ(Define((*l)[0].source, "GEMM_N"), "28");
  EXPECT_EQ(Define((*l)[0].source, "CONV_CG"), "6");
  // Group 1 keeps the ungrouped kernel (the template's default CONV_GROUPED 0).
  ConvCase one{DType::kFloat16, 1, 8, 8, 16, 16};
  b = BuildConv(one, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  l = GenerateNodeKernels(*b->node, ConvOn());
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(Define((*l)[0].source, "CONV_GROUPED"), "0");
  EXPECT_EQ(Define((*l)[0].source, "GEMM_A_BATCH"), "0LL");
  EXPECT_EQ((*l)[0].grid[2], 1u);
}

// What the generated kernels take and what stays on cuDNN, with the reason.
TEST(ConvCodegenTest, Routing) {
  auto status = [](const ConvCase& c, const KernelOptions& o) {
    absl::StatusOr<test::ConvBuilt> b = BuildConv(c, 1);
    EXPECT_TRUE(b.ok()) << c.Name() << ": " << b.status();
    if (!b.ok()) return b.status();
    return GenerateNodeKernels(*b->node, o).status();
  };
  ConvCase nhwc{DType::kFloat16, 1, 8, 8, 16, 16};
  EXPECT_TRUE(status(nhwc, ConvOn()).ok());
  // Off: a Conv has no generated kernel (cuDNN), a conv group names the option.
  EXPECT_EQ(status(nhwc, KernelOptions{}).code(), absl::StatusCode::kUnimplemented);
  ConvCase group = nhwc;
  group.epi = ConvEpi::kRelu;
  const absl::Status off = status(group, KernelOptions{});
  EXPECT_EQ(off.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(off.message().find("--conv-groups generated"), absl::string_view::npos) << off;
  // NCHW convs and groups stay on cuDNN.
  ConvCase nchw = group;
  nchw.nchw = true;
  const absl::Status n = status(nchw, ConvOn());
  EXPECT_EQ(n.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(n.message().find("NCHW"), absl::string_view::npos) << n;
  // Grouped, not depthwise: the grouped implicit GEMM.
  ConvCase grouped = nhwc;
  grouped.group = 2;
  EXPECT_TRUE(status(grouped, ConvOn()).ok());
  // fp32 implicit GEMM: no tensor-core path (depthwise fp32 is generated).
  ConvCase f32 = nhwc;
  f32.dtype = DType::kFloat32;
  EXPECT_EQ(status(f32, ConvOn()).code(), absl::StatusCode::kUnimplemented);
  f32.group = 16;
  EXPECT_TRUE(status(f32, ConvOn()).ok());
}

}  // namespace
}  // namespace kiln::codegen
