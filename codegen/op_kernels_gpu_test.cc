// GPU numeric test of the generated per-node kernels: each case of
// codegen/ops/op_kernel_cases.h runs on the device (cubin loaded with
// cudaLibraryLoadData, launched with cudaLaunchKernel) and is compared with the
// CPU reference (EvaluateNode) on the same inputs, once with 256-byte aligned
// tensors (the vectorised paths) and once with every tensor one element further
// (the unaligned fallbacks). Skips without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "codegen/gpu_test_util.h"
#include "codegen/nvrtc_module.h"
#include "codegen/op_kernels.h"
#include "codegen/ops/op_kernel_cases.h"
#include "graph/evaluate.h"

namespace kiln::codegen {
namespace {

constexpr int kPerModule = 24;

float Tolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 1e-5f;
    case DType::kFloat16: return 1e-2f;
    case DType::kBFloat16: return 4e-2f;
    default: return 0.f;
  }
}

// Compares a device result with the reference; returns "" when they agree.
std::string Compare(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    return absl::StrCat("type ", got.TypeString(), " vs reference ", want.TypeString());
  }
  if (!IsFloating(want.dtype())) {
    if (std::memcmp(got.raw_data(), want.raw_data(), want.nbytes()) != 0) {
      const std::vector<int64_t> g = got.ToInt64(), w = want.ToInt64();
      for (size_t i = 0; i < w.size(); ++i) {
        if (g[i] != w[i]) return absl::StrCat("element ", i, ": got ", g[i], ", want ", w[i]);
      }
      return "bytes differ";
    }
    return "";
  }
  const std::vector<float> g = got.ToFloat(), w = want.ToFloat();
  float max_ref = 1.f, max_err = 0.f;
  size_t worst = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (std::isnan(w[i]) || std::isnan(g[i])) {
      if (std::isnan(w[i]) != std::isnan(g[i])) return absl::StrCat("element ", i, ": got ", g[i], ", want ", w[i]);
      continue;
    }
    if (std::isinf(w[i]) || std::isinf(g[i])) {
      if (g[i] != w[i]) return absl::StrCat("element ", i, ": got ", g[i], ", want ", w[i]);
      continue;
    }
    max_ref = std::max(max_ref, std::fabs(w[i]));
    const float err = std::fabs(g[i] - w[i]);
    if (err > max_err) {
      max_err = err;
      worst = i;
    }
  }
  if (max_err > Tolerance(want.dtype()) * max_ref) {
    return absl::StrCat("max |err| ", max_err, " at element ", worst, " (got ", g[worst], ", want ", w[worst],
                        "), max |ref| ", max_ref);
  }
  return "";
}

// One unit in the last place of `v` as a `dtype` (fp16/bf16) value, subnormals included.
double Ulp(DType dtype, float v) {
  const int mantissa = dtype == DType::kFloat16 ? 10 : 7, min_exp = dtype == DType::kFloat16 ? -14 : -126;
  const float a = std::fabs(v);
  const int e = a > 0 ? std::max(static_cast<int>(std::floor(std::log2(a))), min_exp) : min_exp;
  return std::ldexp(1.0, e - mantissa);
}

// A 16-bit Gelu element by element (kiln_gelu_erf_fast / kiln_gelu_tanh_fast,
// templates/pointwise.cuh) against GELU in double precision: within one ulp of it, plus
// the documented slack: 1e-9 for the erf form (its tail past |x| = 6.36), 2^-11 |0.5 x|
// for the tanh form (tanh.approx's error). Not against the reference evaluator: in
// fp32, 1 + erf(x / sqrt(2)) cancels for x < -4 (at x = -5.66 it gives -0 for GELU's
// -4.4e-8). A 16-bit Sigmoid (kiln_sigmoid_fast) the same way, without slack.
// Returns "" when every element is within.
std::string CompareFastFormUlps(const Node& node, const Tensor& x, const Tensor& got) {
  const bool sigmoid = node.op_type() == "Sigmoid";
  const bool tanh_form = node.GetString("approximate", "none").value_or("none") == "tanh";
  const std::vector<float> xs = x.ToFloat(), g = got.ToFloat();
  for (size_t i = 0; i < g.size(); ++i) {
    const double v = xs[i];
    const double exact = sigmoid     ? 1.0 / (1.0 + std::exp(-v))
                         : tanh_form ? 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))
                                     : 0.5 * v * std::erfc(-v * 0.7071067811865476);
    const double slack = sigmoid ? 0.0 : tanh_form ? std::ldexp(std::fabs(0.5 * v), -11) : 1e-9;
    const double ulp = Ulp(got.dtype(), static_cast<float>(exact));
    if (std::fabs(g[i] - exact) > ulp + slack) {
      return absl::StrCat("element ", i, " (x = ", xs[i], "): got ", g[i], ", ", node.op_type(), "(x) = ", exact,
                          ", more than one ulp (", ulp, ") + ", slack, " apart");
    }
  }
  return "";
}

// Every case generated and compiled once for the device's arch.
struct Compiled {
  std::vector<test::Case> cases;
  std::vector<test::BuiltCase> built;
  std::vector<std::vector<KernelLaunch>> launches;
  std::vector<ModuleKernel> kernels;
  std::vector<cudaLibrary_t> libs;
};

void CompileAll(const std::string& arch, Compiled& c) {
  c.cases = test::AllCases();
  for (const test::Case& tc : c.cases) {
    absl::StatusOr<test::BuiltCase> b = test::Build(tc);
    ASSERT_TRUE(b.ok()) << tc.name << ": " << b.status();
    absl::StatusOr<std::vector<KernelLaunch>> l = GenerateNodeKernels(*b->node);
    ASSERT_TRUE(l.ok()) << tc.name << ": " << l.status();
    for (size_t k = 0; k < l->size(); ++k) c.kernels.push_back({absl::StrCat("kiln_", tc.name, "_", k), (*l)[k].source});
    c.built.push_back(*std::move(b));
    c.launches.push_back(*std::move(l));
  }
  absl::StatusOr<std::vector<std::string>> cubins = CompileModules(c.kernels, arch, kPerModule);
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  c.libs.resize(cubins->size());
  for (size_t m = 0; m < cubins->size(); ++m) {
    KILN_CUDA_OK(cudaLibraryLoadData(&c.libs[m], (*cubins)[m].data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  }
}

// Runs every case with each tensor `offset` elements past a cudaMalloc'd (256-byte
// aligned) address, as a view into a larger buffer would be: offset 1 takes the
// kernels' unaligned fallbacks. Returns the number of mismatching outputs.
void RunAll(const Compiled& c, int offset, int* failures) {
  *failures = 0;
  size_t kernel_index = 0;
  for (size_t ci = 0; ci < c.cases.size(); ++ci) {
    SCOPED_TRACE(absl::StrCat(c.cases[ci].name, " offset ", offset));
    const Node& node = *c.built[ci].node;
    const int nout = node.num_outputs();
    // Device buffers, outputs then inputs (the arg numbering).
    std::vector<void*> base(nout + node.num_inputs(), nullptr), dev(base.size(), nullptr);
    for (int o = 0; o < nout; ++o) {
      const Value* v = node.output(o);
      const size_t shift = offset * DTypeSize(v->dtype());
      const size_t bytes = std::max<size_t>(1, v->numel() * DTypeSize(v->dtype())) + shift;
      KILN_CUDA_OK(cudaMalloc(&base[o], bytes));
      KILN_CUDA_OK(cudaMemset(base[o], 0xA5, bytes));  // garbage: unwritten elements show
      dev[o] = static_cast<char*>(base[o]) + shift;
    }
    std::vector<const Tensor*> ref_in;
    for (int i = 0; i < node.num_inputs(); ++i) {
      if (!node.has_input(i)) {
        ref_in.push_back(nullptr);
        continue;
      }
      const Tensor& t = c.built[ci].inputs[i];
      ref_in.push_back(&t);
      const size_t shift = offset * DTypeSize(t.dtype());
      KILN_CUDA_OK(cudaMalloc(&base[nout + i], std::max<size_t>(1, t.nbytes()) + shift));
      dev[nout + i] = static_cast<char*>(base[nout + i]) + shift;
      if (t.nbytes() > 0) KILN_CUDA_OK(cudaMemcpy(dev[nout + i], t.raw_data(), t.nbytes(), cudaMemcpyHostToDevice));
    }
    for (const KernelLaunch& l : c.launches[ci]) {
      const size_t k = kernel_index++;
      cudaKernel_t kernel;
      KILN_CUDA_OK(cudaLibraryGetKernel(&kernel, c.libs[k / kPerModule], c.kernels[k].function.c_str()));
      std::vector<void*> params(l.args.size());
      for (size_t j = 0; j < l.args.size(); ++j) params[j] = &dev[l.args[j]];
      // The workspace (codegen/kernel_launch.h): zeroed semaphores, and a scratch
      // filled with garbage, since its content is not guaranteed.
      void* semaphores = nullptr;
      void* scratch = nullptr;
      const bool workspace = l.semaphores > 0 || l.scratch_bytes > 0;
      if (workspace) {
        KILN_CUDA_OK(cudaMalloc(&semaphores, std::max<size_t>(1, l.semaphores) * sizeof(uint32_t)));
        KILN_CUDA_OK(cudaMemset(semaphores, 0, std::max<size_t>(1, l.semaphores) * sizeof(uint32_t)));
        KILN_CUDA_OK(cudaMalloc(&scratch, std::max<uint64_t>(1, l.scratch_bytes)));
        KILN_CUDA_OK(cudaMemset(scratch, 0xA5, std::max<uint64_t>(1, l.scratch_bytes)));
        params.push_back(&semaphores);
        params.push_back(&scratch);
      }
      KILN_CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(l.grid[0], l.grid[1], l.grid[2]),
                               dim3(l.block[0], l.block[1], l.block[2]), params.data(), l.shared_bytes, nullptr));
      if (workspace) {
        // The kernel must leave its semaphores zero (a CUDA graph replays it as captured).
        std::vector<uint32_t> left(l.semaphores);
        if (!left.empty()) {
          KILN_CUDA_OK(cudaMemcpy(left.data(), semaphores, left.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost));
        }
        EXPECT_EQ(std::count(left.begin(), left.end(), 0u), static_cast<long>(left.size()))
            << c.cases[ci].name << ": semaphores not zero after the kernel";
        cudaFree(semaphores);
        cudaFree(scratch);
      }
    }
    KILN_CUDA_OK(cudaDeviceSynchronize());
    absl::StatusOr<std::vector<Tensor>> ref = EvaluateNode(node, ref_in);
    ASSERT_TRUE(ref.ok()) << ref.status();
    for (int o = 0; o < nout; ++o) {
      const Value* v = node.output(o);
      Tensor got(v->dtype(), v->shape());
      if (got.nbytes() > 0) {
        KILN_CUDA_OK(cudaMemcpy(got.mutable_raw_data(), dev[o], got.nbytes(), cudaMemcpyDeviceToHost));
      }
      std::string diff = Compare(got, (*ref)[o]);
      if (diff.empty() && (node.op_type() == "Gelu" || node.op_type() == "Sigmoid") &&
          got.dtype() != DType::kFloat32) {
        diff = CompareFastFormUlps(node, c.built[ci].inputs[0], got);
      }
      EXPECT_EQ(diff, "") << c.cases[ci].name << " (" << node.op_type() << ") output " << o << ", offset " << offset;
      *failures += !diff.empty();
    }
    for (void* p : base) {
      if (p != nullptr) cudaFree(p);
    }
  }
}

TEST(OpKernelsGpuTest, MatchesCpuReference) {
  KILN_ARCH_OR_SKIP(arch);
  Compiled c;
  ASSERT_NO_FATAL_FAILURE(CompileAll(arch, c));
  for (int offset : {0, 1}) {
    int failures = 0;
    ASSERT_NO_FATAL_FAILURE(RunAll(c, offset, &failures));
    std::printf("ran %zu cases (%zu kernels) on %s (%s), tensors at +%d element(s): %d mismatching outputs\n",
                c.cases.size(), c.kernels.size(), test::DeviceName().c_str(), arch.c_str(), offset, failures);
  }
  for (cudaLibrary_t lib : c.libs) cudaLibraryUnload(lib);
}

}  // namespace
}  // namespace kiln::codegen
