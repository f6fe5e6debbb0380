// Tests of the tensor-core GEMM generator (codegen/ops/gemm.cc) that need no GPU: a
// representative instantiation of every form (layouts, load modes, prologues, dual
// mainloops, epilogues, fp16/bf16) compiles with NVRTC for sm_80 and sm_90a without
// spilling; the sm_90a epilogue's source; the config verifiers, heuristics and routing.
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
#include "codegen/gemm_test_cases.h"

namespace kiln::codegen {
namespace {

using namespace gemm_test;  // NOLINT: the cases are this file's vocabulary

TEST(GemmCodegenTest, CompilesForSm80AndSm90a) {
  Generated gen;
  ASSERT_NO_FATAL_FAILURE(Generate(gen, Select::kFormsLight));
  std::set<std::string> forms;
  for (const KernelLaunch& l : gen.launches) forms.insert(Form(l));
  // Both dtypes x every group kind; {cp.async, staged vector, staged scalar} on A
  // and B in both layouts; fp32 prologue loads; dual mainloops in both layouts.
  EXPECT_GE(forms.size(), 20u) << absl::StrJoin(forms, "\n");
  for (const char* arch : {"sm_80", "sm_90a"}) {
    absl::StatusOr<std::vector<std::string>> cubins = CompileModules(gen.kernels, arch, kPerModule);
    EXPECT_TRUE(cubins.ok()) << arch << ": " << cubins.status();
  }
  std::printf("compiled %zu GEMM kernels (%zu forms) for sm_80 and sm_90a\n", gen.kernels.size(), forms.size());
}

// The register budget of VerifyGemmConfig holds: the heaviest forms (128x128 tiles
// with register-staged operands, fp32 prologue loads, two mainloops) do not spill.
TEST(GemmCodegenTest, LargeTilesDoNotSpill) {
  Generated gen;
  ASSERT_NO_FATAL_FAILURE(Generate(gen, Select::kFormsHeavy));
  std::vector<ModuleKernel> heavy;
  for (size_t i = 0; i < gen.cases.size(); ++i) {
    if (gen.launches[i].source.find("#define BM 128") != std::string::npos) heavy.push_back(gen.kernels[i]);
  }
  ASSERT_GE(heavy.size(), 16u);
  absl::StatusOr<ModuleInspection> inspected = InspectModule(heavy, "sm_80");
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  for (const KernelResources& r : ParsePtxasResources(inspected->log)) {
    EXPECT_EQ(r.spill_store_bytes, 0) << r.function << " spills (" << r.registers << " registers)";
    std::printf("%-60s %d registers, %lld bytes spilled\n", r.function.c_str(), r.registers,
                static_cast<long long>(r.spill_store_bytes));
  }
}

// Every sm90 form (dtype x layouts x group kind x tile config) compiles for sm_90a
// with NVRTC, without spills, with setmaxnreg honoured (no ptxas warning C7508) and
// with the wgmma instructions (SASS HGMMA) rather than a fallback.
TEST(GemmCodegenTest, Sm90CompilesForSm90a) {
  Generated gen;
  int routed = 0;
  ASSERT_NO_FATAL_FAILURE(Generate(gen, Select::kFormsLight, Family::kSm90, &routed));
  EXPECT_GE(gen.kernels.size(), 12u);
  EXPECT_GT(routed, 0);
  absl::StatusOr<ModuleInspection> inspected = InspectModule(gen.kernels, "sm_90a");
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  ExpectWgmmaPipelineKept(inspected->log);
  EXPECT_NE(inspected->ptx.find("wgmma.mma_async"), std::string::npos);
  // Dual groups and A-prologues are among the forms, the latter with the register-A
  // wgmma (A a vector of four registers after the accumulators).
  std::set<std::string> kinds;
  for (const GemmCase& c : gen.cases) kinds.insert(c.Kind());
  for (const char* kind : {"dual-matmul", "dual-matmul+epilogue", "prologue+matmul", "prologue+matmul+epilogue"}) {
    EXPECT_TRUE(kinds.count(kind)) << kind;
  }
  EXPECT_NE(inspected->ptx.find("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), std::string::npos);
  EXPECT_NE(inspected->ptx.find("}, {%r"), std::string::npos);
  EXPECT_NE(inspected->ptx.find("cp.async.bulk.tensor.3d"), std::string::npos);
  for (const KernelResources& r : ParsePtxasResources(inspected->log)) {
    EXPECT_EQ(r.spill_store_bytes, 0) << r.function << " spills (" << r.registers << " registers)";
    EXPECT_EQ(r.stack_bytes, 0) << r.function << " has a stack frame";
  }
  std::printf("compiled %zu sm90 GEMM kernels for sm_90a (%d cases routed to sm80)\n", gen.kernels.size(), routed);
}

// Every tile config (up to 128 accumulators a thread with setmaxnreg 232) on the
// large cases in each layout: no spills, no stack.
TEST(GemmCodegenTest, Sm90LargeTilesDoNotSpill) {
  Generated gen;
  ASSERT_NO_FATAL_FAILURE(Generate(gen, Select::kFormsHeavy, Family::kSm90));
  ASSERT_GE(gen.kernels.size(), 20u);
  absl::StatusOr<ModuleInspection> inspected = InspectModule(gen.kernels, "sm_90a");
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  // The clustered forms: B's multicast loads, remote releases, cluster barriers.
  for (const char* op : {".multicast::cluster", "mapa.shared::cluster", "barrier.cluster.arrive"}) {
    EXPECT_NE(inspected->ptx.find(op), std::string::npos) << op;
  }
  ExpectWgmmaPipelineKept(inspected->log);
  for (const KernelResources& r : ParsePtxasResources(inspected->log)) {
    EXPECT_EQ(r.spill_store_bytes, 0) << r.function << " spills (" << r.registers << " registers)";
    EXPECT_EQ(r.stack_bytes, 0) << r.function << " has a stack frame";
    if (std::getenv("KILN_GEMM_TEST_VERBOSE") != nullptr) {
      std::printf("%-60s %d registers, %lld bytes spilled\n", r.function.c_str(), r.registers,
                  static_cast<long long>(r.spill_store_bytes));
    }
  }
}

// The sm90 kernel source of `epi` on 256x512x256 (unswapped) or, with m = 16, on
// 16x2048x2048 (swap-AB).
absl::StatusOr<std::string> Sm90EpilogueSource(DType dt, Epi epi, int64_t m) {
  KernelOptions hopper;
  hopper.matmul_groups = codegen::MatMulGroups::kGenerated;
  hopper.hopper = true;
  absl::StatusOr<Built> b =
      Build(GemmCase{dt, {}, m, m == 16 ? 2048 : 512, m == 16 ? 2048 : 256, false, false, false, epi}, 1);
  if (!b.ok()) return b.status();
  absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateGemm(*b->node, hopper);
  if (!l.ok()) return l.status();
  if ((*l)[0].family != "gemm_sm90") return absl::InternalError("not on the sm90 family");
  return std::move((*l)[0].source);
}

// The sm90 epilogue prefetches into L1 the loads that depend on C's column alone (a
// bias), at the start of each tile, and nothing else: a residual (row and column)
// does not fit the L1 left beside the ring (it goes to L2 instead:
// Sm90ReadsRowDenseOperandsInPairs), and a scalar has nothing to prefetch. Unswapped, a 16-bit
// column vector is also loaded into registers (kiln_epilogue_columns).
TEST(GemmCodegenTest, Sm90PrefetchesColumnVectorsOnly) {
  for (auto [epi, prefetched] : {std::pair<Epi, bool>{Epi::kBiasRelu, true}, {Epi::kBiasGeluTanh, true},
                                 {Epi::kResidual, false}, {Epi::kScale, false}, {Epi::kNone, false}}) {
    // 256x512x256 stays unswapped; 16x2048x2048 swaps A and B (C's columns are the
    // kernel's rows).
    for (int64_t m : {256, 16}) {
      absl::StatusOr<std::string> source = Sm90EpilogueSource(DType::kFloat16, epi, m);
      ASSERT_TRUE(source.ok()) << source.status();
      const std::string& src = *source;
      EXPECT_EQ(src.find("#define GEMM_SWAP_AB 1") != std::string::npos, m == 16) << EpiName(epi) << " m " << m;
      EXPECT_EQ(src.find("#define KILN_EPILOGUE_PREFETCH(first, t) kiln_sm90_prefetch_columns(e0, first, t);") !=
                    std::string::npos,
                prefetched)
          << EpiName(epi) << " m " << m;
      // The 16-bit bias is also held in registers, two columns a register; the TMA-store
      // epilogue (unswapped here) loads them before the tile's last wgmma wait.
      EXPECT_EQ(src.find("#define KILN_EPILOGUE_COLUMNS 1\n") != std::string::npos, prefetched)
          << EpiName(epi) << " m " << m;
      if (prefetched) {
        absl::StatusOr<ModuleInspection> inspected = InspectModule({{"kiln_prefetch_check", src}}, "sm_90a");
        ASSERT_TRUE(inspected.ok()) << inspected.status();
        const std::string& ptx = inspected->ptx;
        EXPECT_NE(ptx.find("prefetch.global.L1"), std::string::npos) << EpiName(epi) << " m " << m;
        const size_t pair = std::min(ptx.find("ld.global.u32"), ptx.find("ld.global.nc.u32"));
        const size_t wait = ptx.find("wgmma.wait_group.sync.aligned 0;");
        ASSERT_NE(wait, std::string::npos);
        if (m == 256) {
          EXPECT_LT(pair, wait) << EpiName(epi) << ": no 4-byte bias load before the last wgmma wait";
        } else {
          EXPECT_EQ(pair, std::string::npos) << EpiName(epi) << ": swapped tiles load the bias per element";
        }
      }
    }
  }
}

// The TMA-store epilogue reads a 16-bit operand dense along C's rows (a residual) a
// column pair at a time: one 4-byte load for the two elements a thread's fragment
// holds, after the tile's last wgmma wait (a bias held in registers loads before it),
// when the pointers are 4-byte aligned (KILN_EPILOGUE_PAIRS_ALIGNED); partial tiles
// and unaligned pointers take 2-byte loads. The tile's rows of it are prefetched into
// L2 as the tile starts. Swapped tiles (direct stores) keep the per-element functor.
TEST(GemmCodegenTest, Sm90ReadsRowDenseOperandsInPairs) {
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    for (auto [epi, pairs] : {std::pair<Epi, bool>{Epi::kResidual, true}, {Epi::kBiasResidual, true},
                              {Epi::kBiasRelu, false}, {Epi::kScale, false}}) {
      for (int64_t m : {256, 16}) {
        SCOPED_TRACE(absl::StrCat(EpiName(epi), dt == DType::kFloat16 ? " f16" : " bf16", " m ", m));
        absl::StatusOr<std::string> source = Sm90EpilogueSource(dt, epi, m);
        ASSERT_TRUE(source.ok()) << source.status();
        const std::string& src = *source;
        const bool swapped = m == 16;
        ASSERT_EQ(src.find("#define GEMM_SWAP_AB 1") != std::string::npos, swapped);
        EXPECT_EQ(src.find("#define KILN_EPILOGUE_PAIRS_ALIGNED ((reinterpret_cast<unsigned long long>(e") !=
                      std::string::npos,
                  pairs);
        absl::StatusOr<ModuleInspection> inspected = InspectModule({{"kiln_pairs_check", src}}, "sm_90a");
        ASSERT_TRUE(inspected.ok()) << inspected.status();
        const std::string& ptx = inspected->ptx;
        const size_t wait = ptx.find("wgmma.wait_group.sync.aligned 0;");
        ASSERT_NE(wait, std::string::npos);
        const size_t pair = ptx.find("ld.global.nc.u32", wait);
        EXPECT_EQ(pair != std::string::npos, pairs && !swapped) << "a 4-byte residual load after the last wait";
        if (pairs && !swapped) {
          EXPECT_NE(ptx.find("ld.global.u16", wait), std::string::npos) << "no 2-byte fallback";
        }
        // Each consumer asks L2 for its tile's rows of the residual as the tile starts.
        EXPECT_EQ(ptx.find("cp.async.bulk.prefetch.L2.global") != std::string::npos, pairs && !swapped);
      }
    }
  }
}

// A ReLU that ends the epilogue runs on the packed 16-bit result in the TMA-store
// epilogue (relu(round(x)) == round(relu(x))): one max.f16x2 / max.bf16x2 per two
// elements, no fp32 max; so does GELU's tanh form for an fp16 result, in fp16x2
// arithmetic (tanh.approx.f16x2; PackedGeluTanhWithinBound bounds its error). A bf16
// GELU stays in the fp32 functor, and the swapped kernel (direct stores) keeps the
// whole functor.
TEST(GemmCodegenTest, Sm90LastOpRunsOnThePackedResult) {
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    const bool f16 = dt == DType::kFloat16;
    for (Epi epi : {Epi::kBiasRelu, Epi::kBiasGeluTanh}) {
      const bool relu = epi == Epi::kBiasRelu, tail = relu || f16;
      const std::string fn = relu ? (f16 ? "kiln_relu_f16x2" : "kiln_relu_bf16x2") : "kiln_gelu_tanh_f16x2";
      const std::string packed = relu ? (f16 ? "max.f16x2" : "max.bf16x2") : "tanh.approx.f16x2";
      const std::string scalar = relu ? "max.f32" : "tanh.approx.f32";
      for (int64_t m : {256, 16}) {
        SCOPED_TRACE(absl::StrCat(EpiName(epi), f16 ? " f16" : " bf16", " m ", m));
        absl::StatusOr<std::string> source = Sm90EpilogueSource(dt, epi, m);
        ASSERT_TRUE(source.ok()) << source.status();
        const std::string& src = *source;
        const bool swapped = m == 16;
        ASSERT_EQ(src.find("#define GEMM_SWAP_AB 1") != std::string::npos, swapped);
        EXPECT_EQ(src.find(absl::StrCat("#define KILN_EPILOGUE_TAIL(x) ", fn, "(x)\n")) != std::string::npos, tail);
        absl::StatusOr<ModuleInspection> inspected = InspectModule({{"kiln_tail_check", src}}, "sm_90a");
        ASSERT_TRUE(inspected.ok()) << inspected.status();
        const std::string& ptx = inspected->ptx;
        EXPECT_EQ(ptx.find(packed) != std::string::npos, tail && !swapped);
        EXPECT_EQ(ptx.find(scalar) != std::string::npos, !tail || swapped);
      }
    }
  }
}

// The planner tells the epilogue's work apart (EpilogueWork), and the sm90 heuristic
// picks the tile with it: at 2048x3072x768 (a BERT FFN at 2048 tokens) the plain GEMM
// takes cooperative 192x128 tiles, the others (a bias, a residual, a scale, GELU) the
// 128x128 ping-pong tile, whose consumers overlap one's epilogue with the other's
// mainloop (H100: bias+ReLU 20.9 -> 19.8 us, bias+GELU 22.5 -> 21.6 us; RESULTS.md
// 2026-11-23 (e)). A through registers never takes ping-pong (one consumer's prologue
// at a time would starve the tensor cores).
TEST(GemmCodegenTest, Sm90EpilogueWorkPicksTheTile) {
  KernelOptions hopper;
  hopper.matmul_groups = codegen::MatMulGroups::kGenerated;
  hopper.hopper = true;
  for (auto [epi, work] : {std::pair<Epi, ops::EpilogueWork>{Epi::kNone, ops::EpilogueWork::kNone},
                           {Epi::kBiasRelu, ops::EpilogueWork::kLight},
                           {Epi::kResidual, ops::EpilogueWork::kLight},
                           {Epi::kScale, ops::EpilogueWork::kLight},
                           {Epi::kBiasGelu, ops::EpilogueWork::kSpecial},
                           {Epi::kBiasGeluTanh, ops::EpilogueWork::kSpecial}}) {
    absl::StatusOr<Built> b = Build(GemmCase{DType::kFloat16, {}, 2048, 3072, 768, false, false, false, epi}, 1);
    ASSERT_TRUE(b.ok()) << b.status();
    absl::StatusOr<ops::GemmFamilyPlan> plan = ops::PlanGemmForFamily(*b->node);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->epilogue_work, work) << EpiName(epi);
    absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateGemm(*b->node, hopper);
    ASSERT_TRUE(l.ok()) << l.status();
    ASSERT_EQ((*l)[0].family, "gemm_sm90");
    const bool pingpong = (*l)[0].source.find("#define GEMM_PINGPONG 1") != std::string::npos;
    EXPECT_EQ(pingpong, work != ops::EpilogueWork::kNone) << EpiName(epi);
    EXPECT_EQ((*l)[0].config, absl::StrCat("sm90 ", pingpong ? "128x128 p2x2 s5" : "192x128 c3x1 s5",
                                           " (heuristic, epilogue work: ", ops::EpilogueWorkName(work), ")"));
  }
  EXPECT_EQ(ops::Sm90GemmConfigString(ops::PickSm90GemmConfig(2048, 3072, 768, 1, 132)), "192x128 c3x1 s5");
  for (ops::EpilogueWork work : {ops::EpilogueWork::kLight, ops::EpilogueWork::kSpecial}) {
    EXPECT_EQ(ops::Sm90GemmConfigString(ops::PickSm90GemmConfig(2048, 3072, 768, 1, 132, false, work)),
              "128x128 p2x2 s5");
    // 4096^3: the epilogue is a sliver of each tile's time; the tile stays.
    EXPECT_EQ(ops::Sm90GemmConfigString(ops::PickSm90GemmConfig(4096, 4096, 4096, 1, 132, false, work)),
              "128x256 c2x1 s4");
    for (int64_t m : {128, 512, 2048, 8192}) {
      for (int64_t n : {768, 3072}) {
        for (int64_t k : {128, 768, 3072}) {
          EXPECT_FALSE(ops::PickSm90GemmConfig(m, n, k, 1, 132, /*register_a=*/true, work).pingpong)
              << m << "x" << n << "x" << k;
        }
      }
    }
  }
}

// GELU takes its one-MUFU-op forms (kiln_gelu_tanh_fast, kiln_gelu_erf_fast) where its
// result is a 16-bit value and keeps tanhf / erff where it is fp32 (here after a Cast
// of the product), in both GEMM families (one epilogue generator,
// codegen/ops/pointwise.cc).
TEST(GemmCodegenTest, FastGeluOnlyForSixteenBitResults) {
  auto epilogue_of = [](const KernelLaunch& l) { return l.source.substr(l.source.find("float kiln_epilogue(")); };
  KernelOptions hopper;
  hopper.matmul_groups = codegen::MatMulGroups::kGenerated;
  hopper.hopper = true;
  KernelOptions sm80;
  sm80.matmul_groups = codegen::MatMulGroups::kGenerated;
  for (auto [epi, fast] : {std::pair<Epi, const char*>{Epi::kBiasGeluTanh, "kiln_gelu_tanh_fast("},
                           {Epi::kBiasGelu, "kiln_gelu_erf_fast("}}) {
    for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
      absl::StatusOr<Built> b = Build(GemmCase{dt, {}, 64, 64, 64, false, false, false, epi}, 1);
      ASSERT_TRUE(b.ok()) << b.status();
      for (const KernelOptions& options : {hopper, sm80}) {
        absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateGemm(*b->node, options);
        ASSERT_TRUE(l.ok()) << l.status();
        EXPECT_NE(epilogue_of((*l)[0]).find(fast), std::string::npos) << (*l)[0].family;
      }
    }
  }
  for (const std::string approximate : {"tanh", "none"}) {
    Graph g;
    auto input = [&](const std::string& name, DType dt, Shape shape) {
      Value* v = g.AddValue(name);
      v->SetType(dt, std::move(shape));
      g.AddInput(v);
      return v;
    };
    std::vector<Node*> members;
    auto add = [&](const std::string& op, std::vector<Value*> ins) {
      Value* out = g.AddValue(absl::StrCat(op, "_out"));
      members.push_back(g.AddNode(op, ins, {out}, op));
      return out;
    };
    Value* y = add("MatMul", {input("a", DType::kFloat16, {64, 64}), input("b", DType::kFloat16, {64, 64})});
    y = add("Cast", {y});
    members.back()->SetAttr("to", int64_t{1});
    y = add("Add", {y, input("bias", DType::kFloat32, {64})});
    y = add("Gelu", {y});
    members.back()->SetAttr("approximate", approximate);
    g.AddOutput(y);
    InferShapesOptions options;
    options.fold_constants = false;
    ASSERT_TRUE(InferShapes(g, options).ok());
    absl::StatusOr<Node*> group = FormFusedGroup(g, members, "matmul+epilogue", members[0]);
    ASSERT_TRUE(group.ok()) << group.status();
    const std::string accurate = approximate == "tanh" ? "kiln_gelu_tanh(" : "kiln_gelu_erf(";
    for (const KernelOptions& options : {hopper, sm80}) {
      absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateGemm(**group, options);
      ASSERT_TRUE(l.ok()) << l.status();
      const std::string epilogue = epilogue_of((*l)[0]);
      EXPECT_NE(epilogue.find(accurate), std::string::npos) << (*l)[0].family << "\n" << epilogue;
      EXPECT_EQ(epilogue.find("_fast("), std::string::npos) << (*l)[0].family << "\n" << epilogue;
    }
  }
}

TEST(GemmCodegenTest, Sm90ConfigVerifierAndHeuristic) {
  EXPECT_TRUE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{128, 256, 2, 1, 3}).ok());
  EXPECT_TRUE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{128, 256, 2, 1, 4}, /*tma_store=*/false).ok());
  // 4 stages of 128x256 leave room for half the C tile: the epilogue stores it in 2 chunks.
  EXPECT_TRUE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{128, 256, 2, 1, 4}).ok());
  EXPECT_EQ(ops::Sm90CChunks(ops::Sm90GemmConfig{128, 256, 2, 1, 4}), 2);
  EXPECT_EQ(ops::Sm90CChunks(ops::Sm90GemmConfig{128, 256, 2, 1, 3}), 1);
  EXPECT_EQ(ops::Sm90GemmSharedBytes(ops::Sm90GemmConfig{128, 256, 2, 1, 4}),
            1024 + 4 * 384 * 128 + 2 * 64 * 128 * 2 + 64 + 16);
  EXPECT_TRUE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{64, 128, 1, 1, 8}).ok());
  EXPECT_EQ(ops::Sm90GemmSharedBytes(ops::Sm90GemmConfig{128, 256, 2, 1, 4}, false), 1024 + 4 * 384 * 128 + 64 + 16);
  EXPECT_EQ(ops::Sm90GemmSharedBytes(ops::Sm90GemmConfig{128, 256, 2, 1, 3}), 1024 + 3 * 384 * 128 + 128 * 256 * 2 + 48 + 16);
  const absl::Status smem = ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{128, 256, 2, 1, 5}, false);
  EXPECT_NE(smem.message().find("shared memory"), absl::string_view::npos) << smem;
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{128, 96, 2, 1, 4}).message().find("multiple of 64"),
            absl::string_view::npos);
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{256, 256, 2, 2, 2}).message().find("accumulator"),
            absl::string_view::npos);
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{128, 128, 1, 1, 4}).message().find("64 * WG_M"),
            absl::string_view::npos);
  EXPECT_FALSE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{128, 128, 2, 1, 1}).ok());
  EXPECT_TRUE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{64, 256, 2, 1, 4, true}).ok());
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{128, 256, 2, 1, 4, true}).message().find("ping-pong"),
            absl::string_view::npos);
  // Three consumers (152 registers a thread through setmaxnreg): at most 96 accumulators.
  EXPECT_TRUE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{192, 192, 3, 1, 4}).ok());
  EXPECT_EQ(ops::Sm90CChunks(ops::Sm90GemmConfig{192, 192, 3, 1, 4}), 3);
  EXPECT_EQ(ops::Sm90CChunks(ops::Sm90GemmConfig{192, 128, 3, 1, 5}), 2);
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{192, 256, 3, 1, 3}).message().find("3 consumer"),
            absl::string_view::npos);
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{256, 128, 4, 1, 3}).message().find("1 to 3"),
            absl::string_view::npos);
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{64, 128, 3, 1, 4, true}).message().find("ping-pong"),
            absl::string_view::npos);
  // Their split and stream-K reductions spill past 64 accumulators: BN <= 128, and the
  // split-K heuristic never asks for more.
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{192, 192, 3, 1, 4, false, 2}).message().find("BN <= 128"),
            absl::string_view::npos);
  EXPECT_FALSE(ops::ParseSm90GemmConfig("192x192 c3x1 s4 sk").ok());
  EXPECT_TRUE(ops::ParseSm90GemmConfig("192x128 c3x1 s5 k2").ok());
  EXPECT_EQ(ops::PickSm90SplitK(ops::Sm90GemmConfig{192, 192, 3, 1, 4}, 192, 192, 8192, 1, 132), 1);
  EXPECT_GT(ops::PickSm90SplitK(ops::Sm90GemmConfig{192, 128, 3, 1, 5}, 192, 128, 8192, 1, 132), 1);
  for (const char* text : {"128x256 c2x1 s3", "64x256 p2x1 s4", "64x128 c1x1 s8", "128x256 c2x1 s3 cl2",
                           "192x192 c3x1 s4", "192x128 c3x1 s5 sk",
                           "128x128 p2x2 s4 cl2", "64x128 c1x1 s8 k6", "64x16 c1x1 s8 k4 swap",
                           "64x16 c1x1 s16 swap cl2", "64x16 c1x1 s8 swap bk128"}) {
    absl::StatusOr<ops::Sm90GemmConfig> c = ops::ParseSm90GemmConfig(text);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(ops::Sm90GemmConfigString(*c), text);
  }
  EXPECT_EQ(ops::ParseSm90GemmConfig("128x256 c2x1 s3 cl2")->cluster_m, 2);
  for (const char* text : {"128x256 x2x1 s4", "128x256 c2x1 s9", "128x256 c2x1 s3 cl", "128x256 c2x1 s3 cl2 k2",
                           "128x256 c2x1 s3 swap k2", "128x256 c2x1 s3 cl2 cl2", "128x256 c2x1 s3 kx",
                           "128x256 c2x1 s3 swapx"}) {
    EXPECT_FALSE(ops::ParseSm90GemmConfig(text).ok()) << text;
  }
  // Clusters: 1 or 2 CTAs, not split; swapped, 16-row multiples of A^T (8 rows a CTA).
  for (const char* text : {"128x256 c2x1 s3 cl3", "64x128 c1x1 s8 k2 cl2", "64x16 c1x1 s8 k2 swap cl2",
                           "64x8 c1x1 s16 swap cl2", "64x24 c1x1 s16 swap cl2"}) {
    const absl::StatusOr<ops::Sm90GemmConfig> c = ops::ParseSm90GemmConfig(text);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(c.status().message().find("cluster"), absl::string_view::npos) << c.status();
  }
  // 128 k per stage: swapped tiles without clusters or stream-K only.
  EXPECT_EQ(ops::ParseSm90GemmConfig("64x16 c1x1 s8 swap bk128")->bk, 128);
  EXPECT_EQ(ops::ParseSm90GemmConfig("64x16 c1x1 s8 k3 swap bk128")->split_k, 3);
  for (const char* text : {"64x64 c1x1 s8 bk128", "64x16 c1x1 s8 swap bk96",
                           "64x16 c1x1 s8 swap cl2 bk128", "128x256 c2x1 s4 sk bk128"}) {
    const absl::StatusOr<ops::Sm90GemmConfig> c = ops::ParseSm90GemmConfig(text);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(c.status().message().find("bk128"), absl::string_view::npos) << c.status();
  }
  EXPECT_FALSE(ops::ParseSm90GemmConfig("64x16 c1x1 s8 bk128 swap").ok());  // token order
  for (auto [m, n, k] : {std::array<int64_t, 3>{4096, 4096, 4096}, {1, 64, 8}, {128, 768, 768}, {8192, 3072, 768}}) {
    const ops::Sm90GemmConfig c = ops::PickSm90GemmConfig(m, n, k, 1, 132);
    EXPECT_TRUE(ops::VerifySm90GemmConfig(c).ok()) << ops::Sm90GemmConfigString(c);
  }
  // Short K over at least a wave of 128x128 tiles (EfficientNet's 1x1 convs at batch
  // 32): 128x128 ping-pong tiles, 128x64 cooperative ones where N <= 64 (also with A
  // through registers, which otherwise keeps the cost model's pick); below a wave, or
  // with K past kSm90ShortK, the cost model's pick.
  auto pick = [](int64_t m, int64_t n, int64_t k, bool register_a) {
    return ops::Sm90GemmConfigString(
        ops::PickSm90GemmConfig(m, n, k, 1, 132, register_a, ops::EpilogueWork::kSpecial));
  };
  EXPECT_EQ(pick(401408, 96, 16, false), "128x128 p2x2 s4");
  EXPECT_EQ(pick(25088, 240, 40, false), "128x128 p2x2 s4");
  EXPECT_EQ(pick(100352, 24, 96, false), "128x64 c2x1 s4");
  EXPECT_EQ(pick(100352, 24, 96, true), "128x64 c2x1 s4");
  EXPECT_NE(pick(100352, 144, 24, true), "128x128 p2x2 s4");
  EXPECT_NE(pick(12544, 96, 16, false), "128x128 p2x2 s4");
  EXPECT_NE(pick(25088, 240, 256, false), "128x128 p2x2 s4");
  // Unsplit: the config of Sm90TileCosts with the least predicted time, which is
  // where the waves come out best (2304x1920: 270 tiles of 128x128 = 3 waves, 180 of
  // 64x192 = 2 shorter ones, 120 of 192x192 = one; on the H100 57.7 -> 48.9 us).
  for (auto [m, n, k, want] : {std::tuple<int64_t, int64_t, int64_t, const char*>{4096, 4096, 4096, "128x256 c2x1 s4"},
                               {8192, 768, 3072, "128x192 c2x1 s5"},
                               {2304, 1920, 3712, "192x192 c3x1 s4"},
                               {1024, 1024, 1024, "64x128 p2x1 s8"}}) {
    const ops::Sm90GemmConfig c = ops::PickSm90GemmConfig(m, n, k, 1, 132);
    EXPECT_EQ(ops::Sm90GemmConfigString(c), want) << m << "x" << n << "x" << k;
    double picked_us = -1;
    for (const ops::Sm90TileCost& cost : ops::Sm90TileCosts()) {
      if (ops::Sm90GemmConfigString(cost.config) == want) picked_us = cost.PredictUs(m, n, k, 1, 132);
    }
    ASSERT_GT(picked_us, 0) << want << " is not in Sm90TileCosts";
    for (const ops::Sm90TileCost& cost : ops::Sm90TileCosts()) {
      EXPECT_TRUE(ops::VerifySm90GemmConfig(cost.config).ok()) << ops::Sm90GemmConfigString(cost.config);
      EXPECT_LE(picked_us, cost.PredictUs(m, n, k, 1, 132)) << ops::Sm90GemmConfigString(cost.config);
    }
  }
  // Few tiles with a long K: 64x64 tiles, split until the units fill the SMs
  // (1024x128x3328: 32 tiles, 52 k tiles: at most 132 units of 12 k tiles -> 4 splits
  // of 13; 128x1280x3968: 40 tiles, 62 k tiles -> 3 of 21).
  EXPECT_EQ(ops::Sm90GemmConfigString(ops::PickSm90GemmConfig(1024, 128, 3328, 1, 132)), "64x64 c1x1 s8 k4");
  EXPECT_EQ(ops::Sm90GemmConfigString(ops::PickSm90GemmConfig(128, 1280, 3968, 1, 132)), "64x64 c1x1 s8 k3");
  // Past 40 tiles the 64x64 tiles stay unsplit, and unsplit with K >= 1024 they take a
  // 12-stage ring (48 tiles here; M = 64 no longer swaps).
  EXPECT_EQ(ops::Sm90GemmConfigString(ops::PickSm90GemmConfig(64, 3072, 3072, 1, 132)), "64x64 c1x1 s12");
  // The 12-stage ring only with M <= 128 or N <= 512; ViT-B/16's FFN2 at 197 tokens takes 8.
  EXPECT_EQ(ops::Sm90GemmConfigString(ops::PickSm90GemmConfig(197, 768, 3072, 1, 132)), "64x64 c1x1 s8");
  // Where the cost model's cheapest tile is the 64x64 ping-pong one (each consumer
  // warpgroup its own tiles, 12 stages), it takes it over the cooperative 64x64 tile and
  // its ring rule.
  for (auto [m, n, k, batch] : {std::array<int64_t, 4>{2944, 128, 2432, 1}, {512, 768, 768, 1}, {128, 1280, 3968, 2},
                                {1792, 256, 2304, 1}, {512, 1024, 4096, 1}}) {
    EXPECT_EQ(ops::Sm90GemmConfigString(ops::PickSm90GemmConfig(m, n, k, batch, 132)), "64x64 p2x1 s12")
        << m << "x" << n << "x" << k << " batch " << batch;
  }
  EXPECT_TRUE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{64, 64, 1, 1, 12}).ok());
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{64, 64, 1, 1, 17}).message().find("[2, 16]"),
            absl::string_view::npos);
  EXPECT_NE(ops::VerifySm90GemmConfig(ops::Sm90GemmConfig{64, 128, 1, 1, 10}).message().find("shared memory"),
            absl::string_view::npos);
  // A through registers: cooperative tiles only (64x128 while one wave holds them).
  for (auto [m, n, k, want] : {std::tuple<int64_t, int64_t, int64_t, const char*>{128, 768, 3072, "64x128 c1x1 s8 k3"},
                               {1024, 1024, 1024, "64x128 c1x1 s8"},
                               {2048, 768, 3072, "128x128 c2x1 s5"},
                               {2048, 768, 768, "128x128 c2x1 s5"},
                               {8192, 4096, 1024, "128x256 c2x1 s4"},
                               // One wave of 192x192 (120 tiles) against 3 of 128x128.
                               {2304, 1920, 3712, "192x192 c3x1 s4"}}) {
    const ops::Sm90GemmConfig c = ops::PickSm90GemmConfig(m, n, k, 1, 132, /*register_a=*/true);
    EXPECT_EQ(ops::Sm90GemmConfigString(c), want) << m << "x" << n << "x" << k;
    EXPECT_TRUE(ops::VerifySm90GemmConfig(c).ok());
  }
}

// A batched group whose A is stored [batch..., M, K] and whose B is shared by the
// batch runs as one GEMM of batch * M rows, the epilogue's operands indexed in C's
// folded rows, an A-prologue's at A's folded row; not with A transposed, a prologue on
// B, a batched B, or an epilogue operand shared by the batch but not the rows (its
// offset needs the batch entry). Both families: the sm90 plan (PlanGemmForFamily) and
// the sm_80 template's source and grid.
TEST(GemmCodegenTest, FoldsTheBatchIntoRows) {
  struct Fold {
    GemmCase c;
    bool folds;
  };
  GemmCase pro{DType::kFloat16, {4}, 77, 768, 256, true, false, false, Epi::kBiasRelu};
  pro.pro = Pro::kReluA;
  GemmCase pro_b = pro;
  pro_b.pro = Pro::kClipB;
  // Squeeze-excitation's scale of A [4, 6, 10, 48] per (image, channel): 60 rows an image.
  GemmCase se{DType::kFloat16, {4, 6}, 10, 72, 48, true, false, false, Epi::kBiasResidual};
  se.pro = Pro::kChannelScaleA;
  GemmCase dual{DType::kFloat16, {2, 3}, 77, 136, 72, true, false, true, Epi::kResidual};
  dual.dual = true;
  dual.k2 = 40;
  GemmCase dual_t = dual;
  dual_t.ta2 = true;
  for (const Fold& f : {Fold{{DType::kFloat16, {4}, 77, 768, 256, true, false, true, Epi::kBiasResidual}, true},
                        Fold{{DType::kBFloat16, {2, 3}, 77, 136, 72, true, false, false, Epi::kBiasGeluTanh}, true},
                        Fold{{DType::kFloat16, {4}, 77, 768, 256, true}, true}, Fold{dual, true},
                        Fold{dual_t, false},
                        Fold{{DType::kFloat16, {4}, 77, 768, 256, false, false, true, Epi::kBiasResidual}, false},
                        Fold{{DType::kFloat16, {4}, 80, 768, 256, true, true, false, Epi::kBiasRelu}, false},
                        Fold{{DType::kFloat16, {2, 3}, 77, 136, 72, true, false, false, Epi::kRowsResidual}, false},
                        Fold{pro, true}, Fold{pro_b, false}, Fold{se, true}}) {
    SCOPED_TRACE(f.c.Name());
    absl::StatusOr<Built> b = Build(f.c, 1);
    ASSERT_TRUE(b.ok()) << b.status();
    absl::StatusOr<ops::GemmFamilyPlan> p = ops::PlanGemmForFamily(*b->node);
    ASSERT_TRUE(p.ok()) << p.status();
    const int64_t batch = NumElements(f.c.batch);
    EXPECT_EQ(p->m, f.folds ? batch * f.c.m : f.c.m);
    EXPECT_EQ(p->batch, f.folds ? 1 : batch);
    if (f.folds) {
      EXPECT_EQ(p->a_batch, 0);
      EXPECT_EQ(p->a_shape, (Shape{batch * f.c.m, f.c.k}));
      if (f.c.dual) {
        EXPECT_EQ(p->a2_shape, (Shape{batch * f.c.m, f.c.k2}));
      }
      // A residual dense over C is read at C's folded row, a bias at the column alone.
      if (f.c.epi == Epi::kBiasResidual) {
        EXPECT_NE(p->epilogue_function.find(absl::StrCat("row * ", f.c.n)), std::string::npos)
            << p->epilogue_function;
        EXPECT_EQ(p->epilogue_function.find("(batch /"), std::string::npos) << p->epilogue_function;
      }
      // The scale's image is the folded row over the 60 rows of an image.
      if (f.c.pro == Pro::kChannelScaleA) {
        EXPECT_NE(p->prologue_a_functor.find("((kiln_index)row / 60LL) * 48LL + (kiln_index)col * 1LL"),
                  std::string::npos)
            << p->prologue_a_functor;
        EXPECT_EQ(p->prologue_a_functor.find("batch /"), std::string::npos) << p->prologue_a_functor;
      }
    }
    // The sm_80 template folds the same groups: one GEMM of batch * M rows, no batch.
    absl::StatusOr<std::vector<KernelLaunch>> sm80 = ops::GenerateMatMulGroup(*b->node);
    ASSERT_TRUE(sm80.ok()) << sm80.status();
    const std::string& src = sm80->at(0).source;
    EXPECT_NE(src.find(absl::StrCat("#define GEMM_M ", f.folds ? batch * f.c.m : f.c.m, "\n")), std::string::npos);
    EXPECT_EQ(src.find("#define GEMM_C_BATCH 0LL\n") != std::string::npos, f.folds) << src.substr(0, 2000);
    EXPECT_EQ(sm80->at(0).grid[2], f.folds ? 1u : static_cast<uint32_t>(batch));
  }
}

// With `hopper`, GenerateNodeKernels gives the sm90 family what it takes (dual groups
// and A-prologues included) and the sm_80 template the rest: rows that are not 16-byte
// aligned (TMA), prologues on B or loading fp32, with the reason in Sm90Eligible.
TEST(GemmCodegenTest, Sm90Routing) {
  KernelOptions hopper;
  hopper.matmul_groups = codegen::MatMulGroups::kGenerated;
  hopper.hopper = true;
  struct Route {
    GemmCase c;
    const char* family;
    const char* why;  // in Sm90Eligible's message when routed
  };
  GemmCase dual{DType::kFloat16, {}, 64, 64, 64};
  dual.dual = true;
  dual.k2 = 32;
  GemmCase dual_odd = dual;  // A2 [64, 9]: TMA cannot read it
  dual_odd.k2 = 9;
  GemmCase pro{DType::kFloat16, {}, 64, 64, 64};
  pro.pro = Pro::kReluA;
  GemmCase pro_t{DType::kBFloat16, {3}, 64, 136, 72, true, true, false, Epi::kBiasGelu};
  pro_t.pro = Pro::kScaleBiasA;
  GemmCase pro_b = pro;
  pro_b.pro = Pro::kClipB;
  GemmCase pro_both = pro;
  pro_both.pro = Pro::kBoth;
  GemmCase pro_f32 = pro;
  pro_f32.pro = Pro::kCastA;
  GemmCase pro_odd = pro;  // A [37, 65]
  pro_odd.m = 37;
  pro_odd.k = 65;
  for (const Route& r :
       {Route{GemmCase{DType::kFloat16, {}, 256, 512, 128}, "gemm_sm90", ""},
        Route{GemmCase{DType::kBFloat16, {3}, 64, 136, 72, true, true, true, Epi::kBiasGelu}, "gemm_sm90", ""},
        Route{GemmCase{DType::kFloat16, {}, 1, 64, 8}, "gemm_sm90", ""},
        Route{GemmCase{DType::kFloat16, {}, 37, 129, 64}, "gemm_sm80", "multiple of 16 bytes"},
        Route{GemmCase{DType::kFloat16, {}, 37, 128, 65}, "gemm_sm80", "multiple of 16 bytes"},
        Route{pro, "gemm_sm90", ""}, Route{pro_t, "gemm_sm90", ""}, Route{dual, "gemm_sm90", ""},
        Route{pro_b, "gemm_sm80", "prologue on B"}, Route{pro_both, "gemm_sm80", "prologue on B"},
        Route{pro_f32, "gemm_sm80", "loading f32"}, Route{pro_odd, "gemm_sm80", "multiple of 16 bytes"},
        Route{dual_odd, "gemm_sm80", "multiple of 16 bytes"}}) {
    absl::StatusOr<Built> b = Build(r.c, 1);
    ASSERT_TRUE(b.ok()) << b.status();
    absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateGemm(*b->node, hopper);
    ASSERT_TRUE(l.ok()) << r.c.Name() << ": " << l.status();
    EXPECT_EQ((*l)[0].family, r.family) << r.c.Name();
    const absl::Status eligible = ops::Sm90Eligible(*b->node);
    EXPECT_EQ(eligible.ok(), std::string(r.family) == "gemm_sm90") << r.c.Name();
    if (!eligible.ok()) {
      EXPECT_NE(eligible.message().find(r.why), absl::string_view::npos) << eligible;
    }
    if ((*l)[0].family == "gemm_sm90") {
      // A, B [, A2, B2] and C (TMA store: N % 8 == 0); these small shapes do not swap.
      EXPECT_NE((*l)[0].source.find("#define GEMM_SWAP_AB 0"), std::string::npos) << r.c.Name();
      EXPECT_EQ((*l)[0].tensor_maps.size(), r.c.dual ? 5u : 3u);
      EXPECT_LE((*l)[0].grid[0], 132u);
      const std::string& src = (*l)[0].source;
      EXPECT_NE(src.find(absl::StrCat("#define GEMM_DUAL ", r.c.dual ? 1 : 0)), std::string::npos);
      EXPECT_NE(src.find(absl::StrCat("#define GEMM_PROLOGUE ", r.c.pro != Pro::kNone ? 1 : 0)), std::string::npos);
      if (r.c.pro == Pro::kScaleBiasA) {  // C, the prologue's bias, then the epilogue's
        EXPECT_EQ((*l)[0].args.size(), 3u);
        EXPECT_NE(src.find("struct kiln_prologue_a"), std::string::npos);
      }
    }
    // Without `hopper` the sm_80 template takes everything.
    KernelOptions sm80;
    sm80.matmul_groups = codegen::MatMulGroups::kGenerated;
    absl::StatusOr<std::vector<KernelLaunch>> l80 = ops::GenerateGemm(*b->node, sm80);
    ASSERT_TRUE(l80.ok());
    EXPECT_EQ((*l80)[0].family, "gemm_sm80");
  }
}

TEST(GemmCodegenTest, ConfigVerifier) {
  EXPECT_TRUE(ops::VerifyGemmConfig(ops::GemmConfig{128, 128, 32, 2, 2, 3}).ok());
  EXPECT_TRUE(ops::VerifyGemmConfig(ops::GemmConfig{64, 64, 32, 2, 2, 4}).ok());
  const absl::Status bad_m = ops::VerifyGemmConfig(ops::GemmConfig{48, 128, 32, 2, 2, 3});
  EXPECT_NE(bad_m.message().find("16 * WARPS_M"), absl::string_view::npos) << bad_m;
  EXPECT_FALSE(ops::VerifyGemmConfig(ops::GemmConfig{128, 128, 24, 2, 2, 3}).ok());
  const absl::Status smem = ops::VerifyGemmConfig(ops::GemmConfig{256, 256, 64, 2, 2, 4});
  EXPECT_NE(smem.message().find("shared memory"), absl::string_view::npos) << smem;
  EXPECT_FALSE(ops::VerifyGemmConfig(ops::GemmConfig{512, 512, 16, 8, 8, 2}).ok());  // 2048 threads

  // Shared memory follows the layouts: A [BM][BK+8] or [BK][BM+8], B [BK][BN+8] or
  // [BN][BK+8]; a dual kernel takes its larger mainloop.
  const ops::GemmConfig c{128, 64, 32, 2, 2, 3};
  ops::GemmVariant nn;
  EXPECT_EQ(ops::GemmSharedBytes(c, nn), 3 * (128 * 40 + 32 * 72) * 2);
  ops::GemmVariant tt;
  tt.mainloops[0].a.trans = tt.mainloops[0].b.trans = true;
  EXPECT_EQ(ops::GemmSharedBytes(c, tt), 3 * (32 * 136 + 64 * 40) * 2);
  ops::GemmVariant dual = nn;
  dual.mainloops.push_back(tt.mainloops[0]);
  EXPECT_EQ(ops::GemmSharedBytes(c, dual), 3 * std::max(128 * 40 + 32 * 72, 32 * 136 + 64 * 40) * 2);
  // Thin k tiles: both operands k-major ([BK][BM+8], [BK][BN+8]) fit in 84 KB, both
  // k-contiguous ([BM][BK+8], [BN][BK+8]) need 120 KB.
  const ops::GemmConfig thin{256, 256, 16, 4, 4, 5};
  ops::GemmVariant tn;
  tn.mainloops[0].a.trans = true;
  ops::GemmVariant nt;
  nt.mainloops[0].b.trans = true;
  EXPECT_EQ(ops::GemmSharedBytes(thin, tn), 5 * (16 * 264 + 16 * 264) * 2);
  EXPECT_EQ(ops::GemmSharedBytes(thin, nt), 5 * (256 * 24 + 256 * 24) * 2);
  EXPECT_TRUE(ops::VerifyGemmConfig(thin, tn).ok()) << ops::VerifyGemmConfig(thin, tn);
  EXPECT_NE(ops::VerifyGemmConfig(thin, nt).message().find("shared memory"), absl::string_view::npos);

  // Registers: accumulators + fragments + the register-staged tiles.
  EXPECT_EQ(ops::GemmRegisterEstimate(ops::GemmConfig{128, 128, 32, 2, 2, 3}), 128 + 16 + 4);
  ops::GemmVariant staged;
  staged.mainloops[0].a.load = ops::GemmLoad::kStagedVector;
  staged.mainloops[0].a.element_bytes = 4;                      // fp32: 4 items x 8 words
  staged.mainloops[0].b.load = ops::GemmLoad::kStagedScalar;    // 4096 / 128 = 32 words
  EXPECT_EQ(ops::GemmRegisterEstimate(ops::GemmConfig{128, 128, 32, 2, 2, 3}, staged), 148 + 32 + 32);
  const absl::Status regs = ops::VerifyGemmConfig(ops::GemmConfig{128, 128, 32, 2, 2, 3}, staged);
  EXPECT_NE(regs.message().find("registers"), absl::string_view::npos) << regs;
  EXPECT_FALSE(ops::VerifyGemmConfig(ops::GemmConfig{256, 128, 32, 2, 2, 3}).ok());  // 256 accumulators
  // The heuristic falls back to a config the variant admits.
  const ops::GemmConfig picked = ops::PickGemmConfig(4096, 4096, 1024, 1, staged);
  EXPECT_TRUE(ops::VerifyGemmConfig(picked, staged).ok());
  EXPECT_EQ(picked.bm, 128);
  EXPECT_EQ(picked.warps_n, 4);
  ops::GemmVariant dual2;
  dual2.mainloops.resize(2);
  EXPECT_EQ(ops::GemmRegisterEstimate(ops::GemmConfig{128, 128, 32, 2, 2, 3}, dual2), 148 + 40);
  EXPECT_EQ(ops::PickGemmConfig(4096, 4096, 1024, 1, dual2).warps_n, 4);
  EXPECT_EQ(ops::PickGemmConfig(4096, 4096, 1024, 1).bm, 128);
  ops::GemmVariant three;
  three.mainloops.resize(3);
  EXPECT_NE(ops::VerifyGemmConfig(ops::GemmConfig{}, three).message().find("mainloops"), absl::string_view::npos);
}

TEST(GemmCodegenTest, UnsupportedForms) {
  Graph g;
  Value* a = g.AddValue("a");
  a->SetType(DType::kInt32, {4, 8});
  Value* b = g.AddValue("b");
  b->SetType(DType::kInt32, {8, 4});
  g.AddInput(a);
  g.AddInput(b);
  Value* y = g.AddValue("y");
  Node* mm = g.AddNode("MatMul", {a, b}, {y}, "mm");
  g.AddOutput(y);
  InferShapesOptions options;
  options.fold_constants = false;
  ASSERT_TRUE(InferShapes(g, options).ok());
  const absl::Status ints = ops::GenerateMatMulGroup(*mm).status();
  EXPECT_EQ(ints.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(ints.message().find("non-floating"), absl::string_view::npos) << ints;
}

// Prologue and dual groups run on the GEMM template when it is chosen and name the
// option otherwise (library mode expands them: cuBLASLt has no prologue).
TEST(GemmCodegenTest, RoutesPrologueAndDualGroups) {
  for (GemmCase c : {GemmCase{DType::kFloat16, {}, 64, 64, 64, false, false, false, Epi::kNone, Pro::kReluA},
                     GemmCase{DType::kFloat16, {}, 64, 64, 64, false, false, false, Epi::kBiasRelu, Pro::kClipB}}) {
    absl::StatusOr<Built> b = Build(c, 1);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(IsMatMulGroup(*b->node)) << c.Kind();
    KernelOptions on;
    on.matmul_groups = codegen::MatMulGroups::kGenerated;
    EXPECT_TRUE(GenerateNodeKernels(*b->node, on).ok()) << c.Kind();
    const absl::Status off = GenerateNodeKernels(*b->node, KernelOptions{}).status();
    EXPECT_EQ(off.code(), absl::StatusCode::kUnimplemented);
    EXPECT_NE(off.message().find("--matmul-groups generated"), absl::string_view::npos) << off;
  }
  GemmCase dual{DType::kBFloat16, {}, 64, 64, 64, false, false, false, Epi::kScale};
  dual.dual = true;
  dual.k2 = 32;
  absl::StatusOr<Built> b = Build(dual, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(IsMatMulGroup(*b->node));
  KernelOptions on;
  on.matmul_groups = codegen::MatMulGroups::kGenerated;
  absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*b->node, on);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_NE((*l)[0].source.find("#define GEMM_DUAL 1"), std::string::npos);
  EXPECT_EQ((*l)[0].args, (std::vector<int>{0, 1, 2, 3, 4}));  // C, A, B, A2, B2
}

}  // namespace
}  // namespace kiln::codegen
