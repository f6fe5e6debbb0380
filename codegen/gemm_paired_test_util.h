// Checks shared by the host tests of the products whose epilogue pairs accumulator
// columns on the Hopper family (codegen/gemm_gated_test.cc, gemm_rotary_test.cc):
// the tile rules and routing of one group, and that kernels compile for sm_90a.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "codegen/kernel_choice.h"
#include "codegen/nvrtc_module.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_sm90.h"

namespace kiln::codegen::paired_test {

// `group`'s tile rules and routing: each of `refused` (configs of other widths, a
// swapped one) is InvalidArgument naming `product` ("gated product", "rotary
// product"); no swap-AB; every tuner candidate unswapped and a multiple of
// `bn_multiple` wide; the sm_80 template refuses with kPairedEpilogueRefusal (the
// group is then expanded), and auto on sm_90a takes it.
inline void ExpectTileRulesAndRouting(const Node& group, const std::vector<const char*>& refused,
                                      absl::string_view product, int64_t bn_multiple) {
  for (const char* text : refused) {
    absl::StatusOr<ops::Sm90GemmConfig> cfg = ops::ParseSm90GemmConfig(text);
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    const absl::Status st = ops::Sm90ConfigFits(group, *cfg);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << text << ": " << st;
    EXPECT_NE(st.message().find(product), absl::string_view::npos) << st;
  }
  EXPECT_FALSE(ops::Sm90SwapAbEligible(group).ok());
  // Every config the tuner would measure is one the generator takes.
  for (const ops::Sm90GemmConfig& cfg : ops::Sm90CandidateConfigs(group)) {
    EXPECT_EQ(cfg.bn % bn_multiple, 0) << ops::Sm90GemmConfigString(cfg);
    EXPECT_FALSE(cfg.swap_ab) << ops::Sm90GemmConfigString(cfg);
  }
  const absl::Status sm80 = ops::GenerateMatMulGroup(group).status();
  EXPECT_EQ(sm80.code(), absl::StatusCode::kUnimplemented) << sm80;
  EXPECT_NE(sm80.message().find(ops::kPairedEpilogueRefusal), absl::string_view::npos) << sm80;
  KernelOptions hopper;
  hopper.matmul_groups = MatMulGroups::kAuto;
  hopper.hopper = true;
  EXPECT_EQ(ChooseKernel(group, hopper).kind, KernelKind::kGemm) << ChooseKernel(group, hopper).Describe();
  KernelOptions sm80_generated;
  sm80_generated.matmul_groups = MatMulGroups::kGenerated;
  const KernelChoice none = ChooseKernel(group, sm80_generated);
  ASSERT_FALSE(none.gemm.ok()) << none.Describe();
  EXPECT_NE(none.gemm.status().message().find(ops::kPairedEpilogueRefusal), absl::string_view::npos) << none.Describe();
  EXPECT_EQ(GenerateNodeKernels(group, sm80_generated).status().code(), absl::StatusCode::kUnimplemented);
}

// Appends `group`'s kernel at `config` (nullptr: the heuristic's) to `kernels` as
// function `name`.
inline void AppendSm90Kernel(const Node& group, const char* config, const std::string& name,
                             std::vector<ModuleKernel>& kernels) {
  absl::StatusOr<std::vector<KernelLaunch>> l;
  if (config == nullptr) {
    l = ops::GenerateMatMulGroupSm90(group);
  } else {
    absl::StatusOr<ops::Sm90GemmConfig> cfg = ops::ParseSm90GemmConfig(config);
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    l = ops::GenerateMatMulGroupSm90(group, &*cfg);
  }
  ASSERT_TRUE(l.ok()) << name << ": " << l.status();
  kernels.push_back({name, (*l)[0].source});
}

}  // namespace kiln::codegen::paired_test
