// Tests of the tensor-core GEMM generator (codegen/ops/gemm.cc): every generated
// source compiles with NVRTC for sm_80 and sm_90a (no GPU needed), and on a GPU the
// kernels (plain MatMul and matmul+epilogue fused groups, fp16 and bf16, odd and
// batched shapes) match the CPU reference (EvaluateNode). The GPU test skips without
// a device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "codegen/gpu_test_util.h"
#include "codegen/nvrtc_module.h"
#include "codegen/ops/families.h"
#include "graph/evaluate.h"
#include "graph/fused_group.h"
#include "graph/infer_shapes.h"

namespace kiln::codegen {
namespace {

enum class Epi { kNone, kBiasRelu, kBiasGelu, kResidual, kScale };
const char* EpiName(Epi e) {
  switch (e) {
    case Epi::kNone: return "plain";
    case Epi::kBiasRelu: return "bias_relu";
    case Epi::kBiasGelu: return "bias_gelu";
    case Epi::kResidual: return "residual";
    case Epi::kScale: return "scale";
  }
  return "?";
}

struct GemmCase {
  DType dtype;
  Shape batch;  // output batch dims
  int64_t m, n, k;
  bool b_broadcast;  // B is [K, N] for every batch
  Epi epi;
  std::string Name() const {
    std::string b;
    for (int64_t d : batch) absl::StrAppend(&b, d, "x");
    return absl::StrCat(dtype == DType::kFloat16 ? "f16_" : "bf16_", b, m, "_", n, "_", k, b_broadcast ? "_bcastB_" : "_",
                        EpiName(epi));
  }
};

Tensor Rand(DType dtype, const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(NumElements(shape));
  for (float& x : v) x = dist(gen);
  return Tensor::FromFloat(dtype, shape, v);
}

// The graph of one case; `node` is the MatMul or the fused group.
struct Built {
  std::unique_ptr<Graph> graph;
  Node* node = nullptr;
  std::map<std::string, Tensor> feeds;  // by value name
};

absl::StatusOr<Built> Build(const GemmCase& c, uint32_t seed) {
  Built b;
  b.graph = std::make_unique<Graph>();
  Graph& g = *b.graph;
  auto input = [&](const std::string& name, Shape shape) {
    Value* v = g.AddValue(name);
    v->SetType(c.dtype, shape);
    g.AddInput(v);
    b.feeds[name] = Rand(c.dtype, shape, seed++);
    return v;
  };
  Shape as = c.batch, bs = c.b_broadcast ? Shape{} : c.batch, ys = c.batch;
  as.insert(as.end(), {c.m, c.k});
  bs.insert(bs.end(), {c.k, c.n});
  ys.insert(ys.end(), {c.m, c.n});
  Value* a = input("a", as);
  Value* w = input("b", bs);
  Value* mm_out = g.AddValue("mm");
  Node* mm = g.AddNode("MatMul", {a, w}, {mm_out}, "mm");
  std::vector<Node*> members = {mm};
  Value* last = mm_out;
  auto add = [&](const std::string& op, std::vector<Value*> ins) {
    Value* out = g.AddValue(absl::StrCat(op, "_out"));
    members.push_back(g.AddNode(op, ins, {out}, absl::StrCat(op, members.size())));
    last = out;
  };
  switch (c.epi) {
    case Epi::kNone: break;
    case Epi::kBiasRelu:
      add("Add", {last, input("bias", {c.n})});
      add("Relu", {last});
      break;
    case Epi::kBiasGelu:
      add("Add", {last, input("bias", {c.n})});
      add("Gelu", {last});
      break;
    case Epi::kResidual: add("Add", {input("residual", ys), last}); break;
    case Epi::kScale: add("Mul", {last, g.AddConstant("scale", Tensor::FromFloat(c.dtype, {}, {0.125f}))}); break;
  }
  g.AddOutput(last);
  InferShapesOptions options;
  options.fold_constants = false;
  absl::Status s = InferShapes(g, options);
  if (!s.ok()) return s;
  b.node = mm;
  if (c.epi != Epi::kNone) {
    absl::StatusOr<Node*> group = FormFusedGroup(g, members, "matmul+epilogue", mm);
    if (!group.ok()) return group.status();
    b.node = *group;
  }
  return b;
}

std::vector<GemmCase> Cases() {
  std::vector<GemmCase> cases;
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    const std::vector<std::array<int64_t, 3>> shapes = {{1, 64, 64},     {7, 33, 8},     {37, 129, 65},
                                                        {128, 128, 128}, {257, 511, 300}, {1024, 768, 768}};
    for (const auto& s : shapes) cases.push_back({dt, {}, s[0], s[1], s[2], false, Epi::kNone});
    cases.push_back({dt, {3}, 65, 130, 70, true, Epi::kNone});
    cases.push_back({dt, {3}, 65, 130, 70, false, Epi::kNone});
    for (Epi e : {Epi::kBiasRelu, Epi::kBiasGelu, Epi::kResidual, Epi::kScale}) {
      cases.push_back({dt, {}, 37, 129, 65, false, e});
      cases.push_back({dt, {}, 256, 512, 128, false, e});
      cases.push_back({dt, {3}, 65, 130, 70, true, e});
    }
    cases.push_back({dt, {}, 7, 33, 8, false, Epi::kBiasRelu});
    cases.push_back({dt, {2, 3}, 33, 64, 48, true, Epi::kResidual});
  }
  return cases;
}

struct Generated {
  std::vector<GemmCase> cases;
  std::vector<Built> built;
  std::vector<KernelLaunch> launches;  // one per case
  std::vector<ModuleKernel> kernels;
};

void Generate(Generated& out) {
  out.cases = Cases();
  uint32_t seed = 1;
  for (const GemmCase& c : out.cases) {
    absl::StatusOr<Built> b = Build(c, seed);
    seed += 10;
    ASSERT_TRUE(b.ok()) << c.Name() << ": " << b.status();
    absl::StatusOr<std::vector<KernelLaunch>> l = ops::GenerateMatMulGroup(*b->node);
    ASSERT_TRUE(l.ok()) << c.Name() << ": " << l.status();
    ASSERT_EQ(l->size(), 1u);
    out.kernels.push_back({absl::StrCat("kiln_gemm_", c.Name()), (*l)[0].source});
    out.launches.push_back((*l)[0]);
    out.built.push_back(*std::move(b));
  }
}

constexpr int kPerModule = 6;

TEST(GemmCodegenTest, CompilesForSm80AndSm90a) {
  Generated gen;
  ASSERT_NO_FATAL_FAILURE(Generate(gen));
  for (const char* arch : {"sm_80", "sm_90a"}) {
    absl::StatusOr<std::vector<std::string>> cubins = CompileModules(gen.kernels, arch, kPerModule);
    EXPECT_TRUE(cubins.ok()) << arch << ": " << cubins.status();
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
}

TEST(GemmCodegenTest, UnsupportedForms) {
  Graph g;
  Value* a = g.AddValue("a");
  a->SetType(DType::kFloat32, {4, 8});
  Value* b = g.AddValue("b");
  b->SetType(DType::kFloat32, {8, 4});
  g.AddInput(a);
  g.AddInput(b);
  Value* y = g.AddValue("y");
  Node* mm = g.AddNode("MatMul", {a, b}, {y}, "mm");
  g.AddOutput(y);
  InferShapesOptions options;
  options.fold_constants = false;
  ASSERT_TRUE(InferShapes(g, options).ok());
  EXPECT_EQ(ops::GenerateMatMulGroup(*mm).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(GemmGpuTest, MatchesCpuReference) {
  KILN_ARCH_OR_SKIP(arch);

  Generated gen;
  ASSERT_NO_FATAL_FAILURE(Generate(gen));
  absl::StatusOr<std::vector<std::string>> cubins = CompileModules(gen.kernels, arch, kPerModule);
  ASSERT_TRUE(cubins.ok()) << cubins.status();
  std::vector<cudaLibrary_t> libs(cubins->size());
  for (size_t i = 0; i < cubins->size(); ++i) {
    KILN_CUDA_OK(cudaLibraryLoadData(&libs[i], (*cubins)[i].data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  }
  int failures = 0;
  for (size_t ci = 0; ci < gen.cases.size(); ++ci) {
    const std::string name = gen.cases[ci].Name();
    SCOPED_TRACE(name);
    const Node& node = *gen.built[ci].node;
    const KernelLaunch& l = gen.launches[ci];
    std::vector<void*> dev(1 + node.num_inputs(), nullptr);
    const Value* y = node.output(0);
    const size_t ybytes = y->numel() * DTypeSize(y->dtype());
    KILN_CUDA_OK(cudaMalloc(&dev[0], ybytes));
    KILN_CUDA_OK(cudaMemset(dev[0], 0xA5, ybytes));
    std::vector<Tensor> in_tensors;
    for (int i = 0; i < node.num_inputs(); ++i) {
      const Value* v = node.input(i);
      in_tensors.push_back(v->is_constant() ? v->constant() : gen.built[ci].feeds.at(v->name()));
    }
    std::vector<const Tensor*> ref_in;
    for (int i = 0; i < node.num_inputs(); ++i) {
      const Tensor& t = in_tensors[i];
      ref_in.push_back(&t);
      KILN_CUDA_OK(cudaMalloc(&dev[1 + i], std::max<size_t>(1, t.nbytes())));
      KILN_CUDA_OK(cudaMemcpy(dev[1 + i], t.raw_data(), t.nbytes(), cudaMemcpyHostToDevice));
    }
    cudaKernel_t kernel;
    KILN_CUDA_OK(cudaLibraryGetKernel(&kernel, libs[ci / kPerModule], gen.kernels[ci].function.c_str()));
    if (l.shared_bytes > 48 * 1024) {
      KILN_CUDA_OK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(l.shared_bytes)));
    }
    std::vector<void*> params(l.args.size());
    for (size_t j = 0; j < l.args.size(); ++j) params[j] = &dev[l.args[j]];
    KILN_CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(l.grid[0], l.grid[1], l.grid[2]),
                             dim3(l.block[0], l.block[1], l.block[2]), params.data(), l.shared_bytes, nullptr));
    KILN_CUDA_OK(cudaDeviceSynchronize());
    absl::StatusOr<std::vector<Tensor>> ref = EvaluateNode(node, ref_in);
    ASSERT_TRUE(ref.ok()) << ref.status();
    Tensor got(y->dtype(), y->shape());
    KILN_CUDA_OK(cudaMemcpy(got.mutable_raw_data(), dev[0], ybytes, cudaMemcpyDeviceToHost));
    const std::vector<float> g = got.ToFloat(), w = (*ref)[0].ToFloat();
    const float tol = y->dtype() == DType::kFloat16 ? 2e-2f : 6e-2f;
    float worst = 0.f;
    size_t worst_i = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      const float err = std::isnan(g[i]) ? INFINITY : std::fabs(g[i] - w[i]) / std::max(1.f, std::fabs(w[i]));
      if (err > worst) {
        worst = err;
        worst_i = i;
      }
    }
    const bool ok = worst <= tol;
    EXPECT_TRUE(ok) << name << ": max scaled |err| " << worst << " at " << worst_i << " (got " << g[worst_i]
                    << ", want " << w[worst_i] << ")";
    failures += !ok;
    std::printf("%-40s grid %u x %u block %u smem %u: max scaled err %.3g %s\n", name.c_str(), l.grid[0], l.grid[2],
                l.block[0], l.shared_bytes, worst, ok ? "ok" : "FAIL");
    for (void* p : dev) cudaFree(p);
  }
  for (cudaLibrary_t lib : libs) cudaLibraryUnload(lib);
  std::printf("ran %zu GEMM cases on %s (%s): %d failing\n", gen.cases.size(), test::DeviceName().c_str(), arch.c_str(), failures);
}

}  // namespace
}  // namespace kiln::codegen
