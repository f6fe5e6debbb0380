// The tf32 forms (fp32 operands of MatMuls marked tf32): the Hopper family's (wgmma k8
// .tf32) and the sm_80 template's (mma m16n8k8 .tf32): which groups each takes and why
// it leaves the others, where auto and generated modes route tf32 groups, and that
// every form compiles without spills. GemmGpuTest.Tf32MatchesCpuReference and
// Sm80Tf32MatchesCpuReference run them.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "codegen/gemm_test_cases.h"
#include "codegen/kernel_choice.h"
#include "codegen/nvrtc_module.h"
#include "codegen/op_kernels.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_sm90.h"

namespace kiln::codegen {
namespace {

using namespace gemm_test;  // NOLINT: the cases are this file's vocabulary

GemmCase Tf32Case(int64_t m, int64_t n, int64_t k, bool ta, bool tb, Epi epi = Epi::kNone) {
  GemmCase c{DType::kFloat32, {}, m, n, k, false, ta, tb, epi};
  c.tf32 = true;
  return c;
}

// K-major A and B: the family takes the group, with GEMM_TF32, fp32 tensor maps of
// 32-element boxes and the k8 tf32 wgmma. Other layouts, prologues and rows that are
// not 16-byte aligned are refused with the reason; fp32 without the mark is the SIMT
// template's.
TEST(GemmTf32Test, FamilyTakesKMajorOperandsOnly) {
  absl::StatusOr<Built> nt = Build(Tf32Case(256, 512, 128, false, true, Epi::kBiasGelu), 1);
  ASSERT_TRUE(nt.ok()) << nt.status();
  ASSERT_TRUE(ops::Sm90Eligible(*nt->node).ok()) << ops::Sm90Eligible(*nt->node);
  absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateMatMulGroupSm90(*nt->node);
  ASSERT_TRUE(l.ok()) << l.status();
  const KernelLaunch& k = (*l)[0];
  EXPECT_NE(k.source.find("#define GEMM_TF32 1"), std::string::npos);
  EXPECT_NE(k.source.find("k8.f32.tf32.tf32"), std::string::npos);
  EXPECT_NE(k.source.find("#define GEMM_TMA_STORE 0"), std::string::npos);  // fp32 C: register stores
  ASSERT_EQ(k.tensor_maps.size(), 2u);
  for (const TensorMapSpec& t : k.tensor_maps) {
    EXPECT_EQ(t.dtype, DType::kFloat32);
    EXPECT_EQ(t.box[0], 32u);  // 128 bytes of k
    EXPECT_EQ(t.strides_bytes[0], 128u * 4);
  }

  struct Refused {
    GemmCase c;
    const char* why;
  };
  GemmCase pro = Tf32Case(64, 64, 64, false, true);
  pro.pro = Pro::kReluA;
  GemmCase unmarked = Tf32Case(64, 64, 64, false, true);
  unmarked.tf32 = false;
  for (const Refused& r :
       {Refused{Tf32Case(64, 64, 64, false, false), "N-major"}, Refused{Tf32Case(64, 64, 64, true, true), "M-major"},
        Refused{pro, "prologue on A"}, Refused{Tf32Case(64, 64, 66, false, true), "16 bytes"},
        Refused{unmarked, "without TF32 math"}}) {
    absl::StatusOr<Built> b = Build(r.c, 1);
    ASSERT_TRUE(b.ok()) << b.status();
    const absl::Status st = ops::Sm90Eligible(*b->node);
    EXPECT_FALSE(st.ok()) << r.c.Name();
    EXPECT_NE(st.message().find(r.why), absl::string_view::npos) << r.c.Name() << ": " << st;
  }
}

// Auto mode on sm_90a: the tf32 groups the family takes get it; the others stay on
// cuBLASLt (its TF32 math) with the family's reason. Generated mode runs those on
// the SIMT template (exact fp32), and the tuning key tells tf32 from fp32.
TEST(GemmTf32Test, Routing) {
  KernelOptions automatic, generated;
  automatic.matmul_groups = MatMulGroups::kAuto;
  generated.matmul_groups = MatMulGroups::kGenerated;
  automatic.hopper = generated.hopper = true;
  absl::StatusOr<Built> nt = Build(Tf32Case(256, 512, 128, false, true, Epi::kBiasRelu), 1);
  ASSERT_TRUE(nt.ok()) << nt.status();
  EXPECT_EQ(ChooseKernel(*nt->node, automatic).kind, KernelKind::kGemm);
  absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*nt->node, automatic);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ((*l)[0].family, "gemm_sm90");

  absl::StatusOr<Built> nn = Build(Tf32Case(256, 512, 128, false, false, Epi::kBiasRelu), 1);
  ASSERT_TRUE(nn.ok()) << nn.status();
  const KernelChoice lib = ChooseKernel(*nn->node, automatic);
  EXPECT_EQ(lib.kind, KernelKind::kLibrary) << lib.Describe();
  EXPECT_NE(lib.reason.find("tf32 wgmma"), std::string::npos) << lib.reason;
  l = GenerateNodeKernels(*nn->node, generated);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ((*l)[0].family, "gemm_simt");

  GemmCase exact = Tf32Case(256, 512, 128, false, true, Epi::kBiasRelu);
  exact.tf32 = false;
  absl::StatusOr<Built> fp32 = Build(exact, 1);
  ASSERT_TRUE(fp32.ok()) << fp32.status();
  absl::StatusOr<ops::GemmProblem> a = ops::DescribeMatMulGroup(*nt->node), b = ops::DescribeMatMulGroup(*fp32->node);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->variant.tf32);
  EXPECT_FALSE(b->variant.tf32);
  EXPECT_NE(a->signature, b->signature);
}

// Every tf32 form (dtype x group kind x tile config, swapped and split included)
// compiles for sm_90a with NVRTC to the tf32 wgmma, with the pipeline kept, no spills
// and no stack.
TEST(GemmTf32Test, CompilesForSm90aWithoutSpills) {
  Generated gen;
  int routed = 0;
  ASSERT_NO_FATAL_FAILURE(Generate(gen, Select::kFormsLight, Family::kTf32, &routed));
  EXPECT_GE(gen.kernels.size(), 6u);
  std::set<std::string> kinds;
  for (const GemmCase& c : gen.cases) kinds.insert(c.Kind());
  for (const char* kind : {"MatMul", "matmul+epilogue", "dual-matmul", "dual-matmul+epilogue"}) {
    EXPECT_TRUE(kinds.count(kind)) << kind;
  }
  absl::StatusOr<ModuleInspection> inspected = InspectModule(gen.kernels, "sm_90a");
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  ExpectWgmmaPipelineKept(inspected->log);
  EXPECT_NE(inspected->ptx.find("wgmma.mma_async.sync.aligned.m64n"), std::string::npos);
  EXPECT_NE(inspected->ptx.find(".f32.tf32.tf32"), std::string::npos);
  for (const KernelResources& r : ParsePtxasResources(inspected->log)) {
    EXPECT_EQ(r.spill_store_bytes, 0) << r.function << " spills (" << r.registers << " registers)";
    EXPECT_EQ(r.stack_bytes, 0) << r.function << " has a stack frame";
  }
  std::printf("compiled %zu tf32 sm90 GEMM kernels for sm_90a (%d cases left to others)\n", gen.kernels.size(), routed);
}

// The sm_80 template's tf32 form (what --precision tf32 gives an sm_80/86/89 target):
// K-major fp32 operands without a prologue, K a multiple of 4, run on mma m16n8k8
// .tf32 with K counted in 16-bit units; the other tf32 groups stay on the SIMT
// template in exact fp32, and the tuner's configs for the form are the template's.
TEST(GemmTf32Test, Sm80TemplateTakesKMajorOperands) {
  KernelOptions sm80;
  sm80.matmul_groups = MatMulGroups::kAuto;
  absl::StatusOr<Built> nt = Build(Tf32Case(256, 512, 132, false, true, Epi::kBiasRelu), 1);
  ASSERT_TRUE(nt.ok()) << nt.status();
  EXPECT_EQ(ChooseKernel(*nt->node, sm80).kind, KernelKind::kGemm);
  absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*nt->node, sm80);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ((*l)[0].family, "gemm_sm80");
  EXPECT_NE((*l)[0].source.find("#define GEMM_TF32 1"), std::string::npos);
  EXPECT_NE((*l)[0].source.find("#define GEMM_K 264\n"), std::string::npos);  // 132 fp32 = 264 16-bit units
  absl::StatusOr<ops::GemmProblem> p = ops::DescribeMatMulGroup(*nt->node);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->variant.tf32);
  EXPECT_FALSE(p->variant.simt);
  EXPECT_EQ(p->variant.mainloops[0].k, 264);
  EXPECT_EQ(p->k[0], 132);
  for (const ops::GemmConfig& c : ops::GemmCandidateConfigs(*p)) {
    EXPECT_EQ(c.bk % 16, 0) << ops::GemmConfigString(c);
    EXPECT_TRUE(ops::VerifyGemmConfig(c, p->variant).ok()) << ops::GemmConfigString(c);
  }

  GemmCase pro = Tf32Case(64, 64, 64, false, true);
  pro.pro = Pro::kReluA;
  for (const GemmCase& c :
       {Tf32Case(64, 64, 64, false, false, Epi::kBiasRelu), Tf32Case(64, 64, 64, true, true, Epi::kBiasRelu),
        Tf32Case(64, 64, 66, false, true, Epi::kBiasRelu), pro}) {
    absl::StatusOr<Built> b = Build(c, 1);
    ASSERT_TRUE(b.ok()) << b.status();
    absl::StatusOr<std::vector<KernelLaunch>> x = GenerateNodeKernels(*b->node, sm80);
    ASSERT_TRUE(x.ok()) << c.Name() << ": " << x.status();
    EXPECT_EQ((*x)[0].family, "gemm_simt") << c.Name();
  }
}

// Every form of it (group kind, dual, split, the 128x128 tiles) compiles for sm_80,
// sm_86 and sm_90a to the tf32 mma; the heavy ones without spills.
TEST(GemmTf32Test, Sm80TemplateCompilesWithoutSpills) {
  Generated light, heavy;
  int routed = 0;
  ASSERT_NO_FATAL_FAILURE(Generate(light, Select::kFormsLight, Family::kSm80Tf32, &routed));
  ASSERT_NO_FATAL_FAILURE(Generate(heavy, Select::kFormsHeavy, Family::kSm80Tf32));
  std::set<std::string> kinds;
  for (const GemmCase& c : light.cases) kinds.insert(c.Kind());
  for (const char* kind : {"MatMul", "matmul+epilogue", "dual-matmul", "dual-matmul+epilogue"}) {
    EXPECT_TRUE(kinds.count(kind)) << kind;
  }
  int split = 0;
  for (const KernelLaunch& k : light.launches) {
    EXPECT_EQ(k.family, "gemm_sm80");
    EXPECT_NE(k.source.find("#define GEMM_TF32 1"), std::string::npos);
    split += k.source.find("#define GEMM_SPLIT_K") != std::string::npos;
  }
  EXPECT_GE(split, 1) << "no split-K form among the compiled ones";
  for (const char* arch : {"sm_80", "sm_86", "sm_90a"}) {
    absl::StatusOr<ModuleInspection> inspected = InspectModule(light.kernels, arch);
    ASSERT_TRUE(inspected.ok()) << arch << ": " << inspected.status();
    EXPECT_NE(inspected->ptx.find("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"), std::string::npos) << arch;
  }
  ASSERT_GE(heavy.kernels.size(), 2u);
  absl::StatusOr<ModuleInspection> inspected = InspectModule(heavy.kernels, "sm_80");
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  for (const KernelResources& r : ParsePtxasResources(inspected->log)) {
    EXPECT_EQ(r.spill_store_bytes, 0) << r.function << " spills (" << r.registers << " registers)";
    std::printf("%-60s %d registers\n", r.function.c_str(), r.registers);
  }
  std::printf("compiled %zu tf32 sm_80 GEMM kernels (%d cases left to the SIMT template)\n", light.kernels.size(),
              routed);
}

}  // namespace
}  // namespace kiln::codegen
