// Tests for the NVRTC module builder (no GPU needed: NVRTC runs on the host).
#include "codegen/nvrtc_module.h"

#include <gtest/gtest.h>

#include "codegen/templates.h"

namespace kiln::codegen {
namespace {

const char* kScaleKernel = R"(
extern "C" __global__ void KILN_KERNEL(kiln_f16* y, const kiln_f16* x) {
  kiln_index i = blockIdx.x * (kiln_index)blockDim.x + threadIdx.x;
  if (i < 1000) {
    float v = KILN_LOAD_f16(x, i);
    KILN_STORE_f16(y, i, erff(v) + expf(v) + tanhf(v) + fmaxf(v, 0.f) + kiln_bf16_to_f32(kiln_f32_to_bf16(v)));
  }
})";

TEST(NvrtcModuleTest, PreludeIsEmbedded) {
  EXPECT_NE(TemplateSource("prelude.cuh").find("kiln_f16_to_f32"), absl::string_view::npos);
  EXPECT_TRUE(TemplateSource("no_such.cuh").empty());
}

TEST(NvrtcModuleTest, CompilesKernelsToCubinForEveryArch) {
  for (const char* arch : {"sm_90a", "sm_89", "sm_86", "sm_80"}) {
    auto cubin = CompileModule({{"k_a", kScaleKernel}, {"k_b", kScaleKernel}}, arch);
    ASSERT_TRUE(cubin.ok()) << arch << ": " << cubin.status();
    ASSERT_GE(cubin->size(), 4u);
    EXPECT_EQ(cubin->substr(0, 4), std::string("\x7f" "ELF", 4)) << arch;  // cubins are ELF images
    EXPECT_NE(cubin->find("k_a"), std::string::npos);
    EXPECT_NE(cubin->find("k_b"), std::string::npos);
  }
}

TEST(NvrtcModuleTest, CompileErrorQuotesTheLog) {
  auto cubin = CompileModule({{"k_bad", "extern \"C\" __global__ void KILN_KERNEL(float* y) { y[0] = undefined_name; }"}},
                             "sm_90a");
  ASSERT_FALSE(cubin.ok());
  EXPECT_EQ(cubin.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(cubin.status().message().find("undefined_name"), absl::string_view::npos) << cubin.status();
}

TEST(NvrtcModuleTest, RejectsUnknownArch) {
  auto cubin = CompileModule({{"k", kScaleKernel}}, "sm_75");
  EXPECT_EQ(cubin.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NvrtcModuleTest, CompilesChunksInParallel) {
  std::vector<ModuleKernel> kernels;
  for (int i = 0; i < 5; ++i) kernels.push_back({"k" + std::to_string(i), kScaleKernel});
  auto cubins = CompileModules(kernels, "sm_80", 2);
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  ASSERT_EQ(cubins->size(), 3u);
  EXPECT_NE((*cubins)[2].find("k4"), std::string::npos);
}

}  // namespace
}  // namespace kiln::codegen
