// GPU tests of the GEMM generator (codegen/ops/gemm.cc, gemm_sm90.cc; fp32 on the SIMT template):
// every case of codegen/gemm_test_cases.h (plain MatMul in each layout, matmul+epilogue,
// prologue+matmul[+epilogue], dual-matmul[+epilogue], odd shapes including M = 1 and
// K = 8, batched) and of gemm_split_test_cases.h against the CPU reference (EvaluateNode
// of the MatMul or the group node), and the packed tanh-GELU's error bound. Skips without
// a GPU.
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

void RunOnGpu(Family family) {
  KILN_ARCH_OR_SKIP(arch);
  const bool sm90 = family == Family::kSm90 || family == Family::kTf32;
  if (sm90 && arch != "sm_90a") GTEST_SKIP() << "skipped: the sm90 GEMM family needs sm_90a, not " << arch;

  Generated gen;
  int routed = 0;
  ASSERT_NO_FATAL_FAILURE(Generate(gen, Select::kAll, family, &routed));
  if (sm90 || family == Family::kSm80Tf32) {
    std::printf("%zu cases, %d routed to other families\n", gen.cases.size(), routed);
  }
  absl::StatusOr<std::vector<std::string>> cubins = CompileModules(gen.kernels, arch, kPerModule);
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  std::vector<cudaLibrary_t> libs(cubins->size());
  for (size_t i = 0; i < cubins->size(); ++i) {
    KILN_CUDA_OK(cudaLibraryLoadData(&libs[i], (*cubins)[i].data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  }
  int failures = 0;
  std::map<std::string, std::pair<int, float>> per_kind;  // kind -> cases, worst error
  for (size_t ci = 0; ci < gen.cases.size(); ++ci) {
    const std::string name = gen.cases[ci].Name();
    SCOPED_TRACE(name);
    const Node& node = *gen.built[ci].node;
    const KernelLaunch& l = gen.launches[ci];
    const Value* y = node.output(0);
    test::NodeBuffers buf;
    ASSERT_NO_FATAL_FAILURE(buf.SetUp(node, gen.built[ci].feeds));
    cudaKernel_t kernel;
    ASSERT_NO_FATAL_FAILURE(test::GetKernel(libs[ci / kPerModule], gen.kernels[ci].function, l.shared_bytes, &kernel));
    absl::StatusOr<std::vector<Tensor>> ref = EvaluateNode(node, buf.inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    const std::vector<float> w = (*ref)[0].ToFloat();
    // fp32 (the SIMT template): the CPU reference and the kernel differ only in the
    // order of their fp32 sums and in the special functions' last bits.
    // tf32: the tensor cores read each fp32 input's top 10 mantissa bits (truncated:
    // up to 2^-9 relative a product) into fp32 sums and an fp32 C, so the error is a
    // random walk of K such terms: largest where |C| is near 1 (the scale's floor),
    // 0.019 at K = 3072 on the H200. Bound: 6e-4 sqrt(K), at least 1.5e-2.
    const GemmCase& gc = gen.cases[ci];
    const float tf32_tol = std::max(1.5e-2f, 6e-4f * std::sqrt(static_cast<float>(gc.k + (gc.dual ? gc.k2 : 0))));
    const float tol = y->dtype() == DType::kFloat16   ? 2e-2f
                      : gc.tf32                       ? tf32_tol
                      : y->dtype() == DType::kFloat32 ? 1e-4f
                                                      : 6e-2f;
    // Errors are scaled by the reference's magnitude, or for a dual-matmul by that of
    // its products: the reference rounds each product to the storage dtype before
    // the Add (the kernel adds in fp32), and P + Q may cancel to far less than |P|.
    std::vector<float> scale(w.size(), 1.f);
    for (size_t i = 0; i < w.size(); ++i) scale[i] = std::max(1.f, std::fabs(w[i]));
    if (gen.cases[ci].dual) {
      const GemmCase& c = gen.cases[ci];
      const auto& feeds = gen.built[ci].feeds;
      for (auto [a, b, ta, tb] : {std::make_tuple("a", "b", c.ta, c.tb), std::make_tuple("a2", "b2", c.ta2, c.tb2)}) {
        absl::StatusOr<std::vector<float>> p = Float32Product(feeds.at(a), feeds.at(b), ta, tb);
        ASSERT_TRUE(p.ok()) << p.status();
        ASSERT_EQ(p->size(), w.size());
        for (size_t i = 0; i < w.size(); ++i) scale[i] = std::max(scale[i], std::fabs((*p)[i]));
      }
    }
    // One launch on the buffers `dev`, checked against the reference.
    auto run = [&](const std::vector<void*>& dev, const std::string& label) {
      KILN_CUDA_OK(cudaMemset(dev[0], 0xA5, buf.out_bytes));
      DeviceWorkspace workspace;  // a launch the heuristic splits (K over blockIdx.y) takes one
      ASSERT_TRUE(workspace.ReserveFor(l).ok());
      absl::StatusOr<LaunchArgs> args = LaunchArgs::Build(l, [&](int v) { return dev[v]; }, workspace.view());
      ASSERT_TRUE(args.ok()) << args.status();
      KILN_CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(l.grid[0], l.grid[1], l.grid[2]),
                                    dim3(l.block[0], l.block[1], l.block[2]), args->params(), l.shared_bytes,
                                    nullptr));
      KILN_CUDA_OK(cudaGetLastError());
      KILN_CUDA_OK(cudaDeviceSynchronize());
      const std::vector<float> g = buf.Output(node).ToFloat();
      float worst = 0.f;
      size_t worst_i = 0;
      for (size_t i = 0; i < w.size(); ++i) {
        const float err = std::isnan(g[i]) ? INFINITY : std::fabs(g[i] - w[i]) / scale[i];
        if (err > worst) {
          worst = err;
          worst_i = i;
        }
      }
      const bool ok = worst <= tol;
      EXPECT_TRUE(ok) << name << label << ": max scaled |err| " << worst << " at " << worst_i << " (got "
                      << g[worst_i] << ", want " << w[worst_i] << ")";
      failures += !ok;
      const GemmCase& c = gen.cases[ci];
      auto& [count, kind_worst] = per_kind[absl::StrCat(c.Kind(), " ", DTypeName(c.dtype))];
      ++count;
      kind_worst = std::max(kind_worst, worst);
      if (!ok || std::getenv("KILN_GEMM_TEST_VERBOSE") != nullptr) {
        std::printf("%-56s grid %u x %u block %u smem %u: max scaled err %.3g %s\n", (name + label).c_str(),
                    l.grid[0], l.grid[2], l.block[0], l.shared_bytes, worst, ok ? "ok" : "FAIL");
      }
    };
    ASSERT_NO_FATAL_FAILURE(run(buf.dev, ""));
    // The sm90 epilogue loads a 16-bit bias or residual two elements at a time where
    // the pointer allows: again with each of them 2 bytes past an aligned address.
    const Epi epi = gen.cases[ci].epi;
    if (family == Family::kSm90 && (epi == Epi::kBiasRelu || epi == Epi::kBiasGelu || epi == Epi::kBiasGeluTanh ||
                                    epi == Epi::kResidual || epi == Epi::kBiasResidual)) {
      std::vector<void*> dev = buf.dev;
      std::vector<void*> shifted;
      for (int i = 0; i < node.num_inputs(); ++i) {
        const Tensor& t = buf.host[i];
        const std::string& in = node.input(i)->name();
        if ((in != "bias" && in != "residual") || DTypeSize(t.dtype()) != 2) continue;
        void* p = nullptr;
        KILN_CUDA_OK(cudaMalloc(&p, t.nbytes() + 2));
        shifted.push_back(p);
        KILN_CUDA_OK(cudaMemcpy(static_cast<char*>(p) + 2, t.raw_data(), t.nbytes(), cudaMemcpyHostToDevice));
        dev[1 + i] = static_cast<char*>(p) + 2;
      }
      ASSERT_FALSE(shifted.empty()) << name << ": no bias or residual input";
      ASSERT_NO_FATAL_FAILURE(run(dev, " (epilogue inputs misaligned)"));
      for (void* p : shifted) cudaFree(p);
    }
  }
  for (cudaLibrary_t lib : libs) cudaLibraryUnload(lib);
  for (const auto& [kind, r] : per_kind) {
    std::printf("  %-32s %4d cases, worst scaled err %.3g\n", kind.c_str(), r.first, r.second);
  }
  std::printf("ran %zu GEMM cases (%s family) on %s (%s): %d failing\n", gen.cases.size(),
              family == Family::kSm90       ? "sm90"
              : family == Family::kTf32     ? "sm90 tf32"
              : family == Family::kSm80Tf32 ? "sm80 tf32"
              : family == Family::kSimt     ? "simt"
                                            : "sm80",
              test::DeviceName().c_str(), arch.c_str(), failures);
}

// The sm90 epilogue's GELU (tanh form) for an fp16 result, on packed fp16 pairs
// (kiln_gelu_tanh_f16x2, templates/pointwise.cuh), on every finite fp16 input against
// GELU in double precision: within 2 ulps of the result plus 2^-10 |0.5 x|. The fp32
// form's bound (op_kernels_gpu_test.cc) is one ulp plus 2^-11 |0.5 x|: the fp16x2 form
// rounds its polynomial in fp16 and tanh.approx.f16x2 is coarser. NaN stays NaN and
// +inf gives +inf.
TEST(GemmGpuTest, PackedGeluTanhWithinBound) {
  KILN_ARCH_OR_SKIP(arch);
  if (arch != "sm_90a") GTEST_SKIP() << "skipped: the sm90 GEMM family's epilogue needs sm_90a, not " << arch;
  const std::string src = absl::StrCat(TemplateSource("pointwise.cuh"), R"(
extern "C" __global__ void KILN_KERNEL(unsigned* y, const unsigned* x) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 32768) y[i] = kiln_gelu_tanh_f16x2(x[i]);
})");
  absl::StatusOr<std::vector<std::string>> cubins = CompileModules({{"kiln_gelu_f16x2_check", src}}, arch, 1);
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  cudaLibrary_t lib;
  KILN_CUDA_OK(cudaLibraryLoadData(&lib, (*cubins)[0].data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  cudaKernel_t kernel;
  ASSERT_NO_FATAL_FAILURE(test::GetKernel(lib, "kiln_gelu_f16x2_check", 0, &kernel));
  std::vector<uint16_t> in(65536), out(65536);
  for (int i = 0; i < 65536; ++i) in[i] = static_cast<uint16_t>(i);
  void *dx = nullptr, *dy = nullptr;
  KILN_CUDA_OK(cudaMalloc(&dx, 65536 * 2));
  KILN_CUDA_OK(cudaMalloc(&dy, 65536 * 2));
  KILN_CUDA_OK(cudaMemcpy(dx, in.data(), 65536 * 2, cudaMemcpyHostToDevice));
  void* params[] = {&dy, &dx};
  KILN_CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(128), dim3(256), params, 0, nullptr));
  KILN_CUDA_OK(cudaDeviceSynchronize());
  KILN_CUDA_OK(cudaMemcpy(out.data(), dy, 65536 * 2, cudaMemcpyDeviceToHost));
  cudaFree(dx);
  cudaFree(dy);
  cudaLibraryUnload(lib);
  double worst = 0;  // |error| / (ulp + 2^-11 |0.5 x|)
  int worst_at = 0, bad = 0;
  for (int i = 0; i < 65536; ++i) {
    const double x = HalfToFloat(in[i]), got = HalfToFloat(out[i]);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(got)) << "GELU(NaN) = " << got;
      continue;
    }
    if (std::isinf(x)) {
      if (x > 0) {
        EXPECT_EQ(got, x) << "GELU(+inf)";
      }
      continue;
    }
    const double exact = 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    double ulp = std::ldexp(1.0, -24);  // fp16's smallest subnormal
    if (std::fabs(exact) >= std::ldexp(1.0, -14)) ulp = std::ldexp(1.0, static_cast<int>(std::floor(std::log2(std::fabs(exact)))) - 10);
    const double err = std::fabs(got - exact), unit = ulp + std::ldexp(std::fabs(0.5 * x), -11);
    if (!(err <= 2 * ulp + std::ldexp(std::fabs(0.5 * x), -10))) {
      if (++bad <= 5) ADD_FAILURE() << "x = " << x << ": got " << got << ", GELU(x) = " << exact;
    }
    if (!(err / unit <= worst)) {
      worst = err / unit;
      worst_at = i;
    }
  }
  std::printf("kiln_gelu_tanh_f16x2 on %d fp16 inputs: %d out of bound; worst |err| %.3g x (ulp + 2^-11 |0.5 x|) at x = %g\n",
              65536, bad, worst, HalfToFloat(in[worst_at]));
}

TEST(GemmGpuTest, MatchesCpuReference) { RunOnGpu(Family::kSm80); }

// The Hopper family on every case it takes (skips off sm_90a).
TEST(GemmGpuTest, Sm90MatchesCpuReference) { RunOnGpu(Family::kSm90); }

// The SIMT template on the fp32 cases (SimtCases) and its pool's other configs.
TEST(GemmGpuTest, SimtMatchesCpuReference) { RunOnGpu(Family::kSimt); }

// The Hopper family's tf32 form on the fp32 cases marked tf32 (Tf32Cases) it takes.
TEST(GemmGpuTest, Tf32MatchesCpuReference) { RunOnGpu(Family::kTf32); }

// The sm_80 template's tf32 form on the Tf32Cases it takes (the sm_80 target's route).
TEST(GemmGpuTest, Sm80Tf32MatchesCpuReference) { RunOnGpu(Family::kSm80Tf32); }

// On the GPU: every split case against the CPU reference, each launched twice on one
// workspace shared by all cases (as a session's): the same bits both times, and the
// semaphores back at zero after every launch.
void RunSplitOnGpu(bool sm90) {
  KILN_ARCH_OR_SKIP(arch);
  if (sm90 && arch != "sm_90a") GTEST_SKIP() << "skipped: the sm90 GEMM family needs sm_90a, not " << arch;
  SplitGenerated gen;
  ASSERT_NO_FATAL_FAILURE(GenerateSplit(gen, sm90));
  absl::StatusOr<std::vector<std::string>> cubins = CompileModules(gen.kernels, arch, kPerModule);
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  std::vector<cudaLibrary_t> libs(cubins->size());
  for (size_t i = 0; i < cubins->size(); ++i) {
    KILN_CUDA_OK(cudaLibraryLoadData(&libs[i], (*cubins)[i].data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  }
  DeviceWorkspace workspace;
  for (const KernelLaunch& l : gen.launches) ASSERT_TRUE(workspace.ReserveFor(l).ok());
  int failures = 0;
  float worst_f16 = 0, worst_bf16 = 0;
  for (size_t ci = 0; ci < gen.cases.size(); ++ci) {
    const std::string name = gen.cases[ci].c.Name();
    SCOPED_TRACE(name);
    const Node& node = *gen.built[ci].node;
    const KernelLaunch& l = gen.launches[ci];
    const Value* y = node.output(0);
    test::NodeBuffers buf;
    ASSERT_NO_FATAL_FAILURE(buf.SetUp(node, gen.built[ci].feeds));
    const std::vector<void*>& dev = buf.dev;
    const size_t ybytes = buf.out_bytes;
    cudaKernel_t kernel;
    ASSERT_NO_FATAL_FAILURE(test::GetKernel(libs[ci / kPerModule], gen.kernels[ci].function, l.shared_bytes, &kernel));
    absl::StatusOr<LaunchArgs> args = LaunchArgs::Build(l, [&](int v) { return dev[v]; }, workspace.view());
    ASSERT_TRUE(args.ok()) << args.status();
    Tensor runs[2] = {Tensor(y->dtype(), y->shape()), Tensor(y->dtype(), y->shape())};
    for (Tensor& got : runs) {
      KILN_CUDA_OK(cudaMemset(dev[0], 0xA5, ybytes));
      KILN_CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(l.grid[0], l.grid[1], l.grid[2]),
                                    dim3(l.block[0], l.block[1], l.block[2]), args->params(), l.shared_bytes,
                                    nullptr));
      KILN_CUDA_OK(cudaGetLastError());
      KILN_CUDA_OK(cudaDeviceSynchronize());
      KILN_CUDA_OK(cudaMemcpy(got.mutable_raw_data(), dev[0], ybytes, cudaMemcpyDeviceToHost));
      std::vector<uint32_t> sems(l.semaphores);
      KILN_CUDA_OK(cudaMemcpy(sems.data(), workspace.view().semaphores, sems.size() * sizeof(uint32_t),
                              cudaMemcpyDeviceToHost));
      EXPECT_EQ(std::count(sems.begin(), sems.end(), 0u), static_cast<long>(sems.size())) << "semaphores left set";
    }
    EXPECT_EQ(std::memcmp(runs[0].raw_data(), runs[1].raw_data(), ybytes), 0) << "two launches differ";
    absl::StatusOr<std::vector<Tensor>> ref = EvaluateNode(node, buf.inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    const std::vector<float> g = runs[0].ToFloat(), w = (*ref)[0].ToFloat();
    const test::ScaledError scaled = test::MaxScaledError(g, w);
    const float worst = scaled.worst;
    const size_t worst_i = scaled.at;
    const float tol = y->dtype() == DType::kFloat16 ? 2e-2f : 6e-2f;
    const bool ok = worst <= tol;
    EXPECT_TRUE(ok) << name << ": max scaled |err| " << worst << " at " << worst_i << " (got " << g[worst_i]
                    << ", want " << w[worst_i] << ")";
    failures += !ok;
    float& dtype_worst = y->dtype() == DType::kFloat16 ? worst_f16 : worst_bf16;
    dtype_worst = std::max(dtype_worst, worst);
    std::printf("%-56s grid %u x %u x %u: max scaled err %.3g %s\n", name.c_str(), l.grid[0], l.grid[1], l.grid[2],
                worst, ok ? "ok" : "FAIL");
  }
  for (cudaLibrary_t lib : libs) cudaLibraryUnload(lib);
  std::printf("ran %zu %s split-K GEMM cases twice on %s (%s): %d failing; worst scaled err %.3g (f16), %.3g (bf16)\n",
              gen.cases.size(), sm90 ? "sm90" : "sm80", test::DeviceName().c_str(), arch.c_str(), failures, worst_f16,
              worst_bf16);
}

TEST(GemmGpuTest, SplitKMatchesCpuReferenceAndRepeats) { RunSplitOnGpu(false); }

// The sm90 family's split forms (Sm90SplitCases), the same way.
TEST(GemmGpuTest, Sm90SplitKMatchesCpuReferenceAndRepeats) { RunSplitOnGpu(true); }

}  // namespace
}  // namespace kiln::codegen
