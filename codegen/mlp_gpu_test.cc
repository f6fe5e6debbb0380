// GPU test of the one-kernel MLP (codegen/ops/mlp.cc): every case of
// codegen/mlp_test_cases.h against the CPU reference (EvaluateNode of the group).
// Skips without a device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "codegen/gpu_test_util.h"
#include "codegen/mlp_test_cases.h"
#include "codegen/nvrtc_module.h"
#include "codegen/op_kernels.h"
#include "graph/evaluate.h"

namespace kiln::codegen {
namespace {

TEST(MlpGpuTest, MatchesCpuReference) {
  KILN_ARCH_OR_SKIP(arch);
  uint32_t seed = 1;
  int cases = 0;
  float worst_all = 0.f;
  for (const test::MlpCase& c : test::MlpCases()) {
    SCOPED_TRACE(c.Name());
    absl::StatusOr<test::MlpBuilt> b = test::BuildMlp(c, seed += 10);
    ASSERT_TRUE(b.ok()) << b.status();
    const Node& node = *b->node;
    absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(node, KernelOptions{});
    ASSERT_TRUE(l.ok()) << l.status();
    ASSERT_EQ(l->size(), 1u);
    absl::StatusOr<std::string> cubin = CompileModule({{"kiln_mlp", (*l)[0].source}}, arch);
    ASSERT_TRUE(cubin.ok()) << cubin.status();
    cudaLibrary_t lib;
    KILN_CUDA_OK(cudaLibraryLoadData(&lib, cubin->data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    test::NodeBuffers buf;
    ASSERT_NO_FATAL_FAILURE(buf.SetUp(node, b->feeds));
    cudaKernel_t kernel;
    ASSERT_NO_FATAL_FAILURE(test::GetKernel(lib, "kiln_mlp", (*l)[0].shared_bytes, &kernel));
    ASSERT_NO_FATAL_FAILURE(test::LaunchAndWait(kernel, (*l)[0], buf.dev));
    absl::StatusOr<std::vector<Tensor>> ref = EvaluateNode(node, buf.inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    const std::vector<float> got = buf.Output(node).ToFloat(), want = (*ref)[0].ToFloat();
    // The reference rounds the hidden layer to the storage dtype; the kernel keeps it
    // in fp32. The gate is in [0, 1].
    const float tol = c.dtype == DType::kFloat16 ? 1e-2f : c.dtype == DType::kBFloat16 ? 4e-2f : 1e-5f;
    const test::ScaledError e = test::MaxScaledError(got, want);
    EXPECT_LE(e.worst, tol) << "at " << e.at << ": got " << got[e.at] << ", want " << want[e.at];
    worst_all = std::max(worst_all, e.worst);
    ++cases;
    cudaLibraryUnload(lib);
  }
  std::printf("ran %d MLP cases on %s (%s): worst scaled err %.3g\n", cases, test::DeviceName().c_str(), arch.c_str(),
              worst_all);
}

}  // namespace
}  // namespace kiln::codegen
