// The generated tensor-core GEMM (codegen/ops/gemm.cc, mma.sync template) against
// cuBLASLt on the same GPU in the same process: fp16, row-major A[M,K] . B[K,N],
// plain and with a fused bias+ReLU epilogue (cuBLASLt: CUBLASLT_EPILOGUE_RELU_BIAS).
// CUDA-event timing, 3 warm-up runs, median of 20. Prints a table and writes a CSV.
//   kiln_gemm_bench [out.csv]
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/nvrtc_module.h"
#include "codegen/ops/families.h"
#include "graph/fused_group.h"
#include "graph/infer_shapes.h"

namespace kiln {
namespace {

#define CHECK_CUDA(expr)                                                                          \
  do {                                                                                            \
    const cudaError_t e_ = (expr);                                                                \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)
#define CHECK_LT(expr)                                                                                 \
  do {                                                                                                 \
    const cublasStatus_t s_ = (expr);                                                                  \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                 \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cublasLtGetStatusString(s_)); \
      std::exit(1);                                                                                    \
    }                                                                                                  \
  } while (0)

struct Shape3 {
  int64_t m, n, k;
};

// MatMul (bias_relu: + Add(bias[N]) + Relu as a fused group) in a graph of its own.
struct GemmGraph {
  std::unique_ptr<Graph> g = std::make_unique<Graph>();
  Node* node = nullptr;
};

GemmGraph Build(Shape3 s, bool bias_relu) {
  GemmGraph r;
  Graph& g = *r.g;
  auto in = [&](const char* name, kiln::Shape shape) {
    Value* v = g.AddValue(name);
    v->SetType(DType::kFloat16, shape);
    g.AddInput(v);
    return v;
  };
  Value* a = in("a", {s.m, s.k});
  Value* b = in("b", {s.k, s.n});
  Value* y = g.AddValue("y");
  Node* mm = g.AddNode("MatMul", {a, b}, {y}, "mm");
  std::vector<Node*> members = {mm};
  if (bias_relu) {
    Value* t = g.AddValue("t");
    members.push_back(g.AddNode("Add", {y, in("bias", {s.n})}, {t}, "add"));
    y = g.AddValue("r");
    members.push_back(g.AddNode("Relu", {t}, {y}, "relu"));
  }
  g.AddOutput(y);
  InferShapesOptions options;
  options.fold_constants = false;
  if (!InferShapes(g, options).ok()) std::exit(1);
  r.node = mm;
  if (bias_relu) r.node = *FormFusedGroup(g, members, "matmul+epilogue", mm);
  return r;
}

template <typename F>
double MedianMs(F&& launch) {
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) launch();
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    CHECK_CUDA(cudaEventRecord(e0));
    launch();
    CHECK_CUDA(cudaEventRecord(e1));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  CHECK_CUDA(cudaEventDestroy(e0));
  CHECK_CUDA(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Row-major C[M,N] = A[M,K] B[K,N] as column-major C^T = B^T A^T (no transposes).
double CublasLtMs(cublasLtHandle_t lt, Shape3 s, const void* a, const void* b, void* c, const void* bias,
                  void* workspace, size_t ws_bytes) {
  cublasLtMatmulDesc_t desc;
  CHECK_LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  if (bias != nullptr) {
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_RELU_BIAS;
    CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  cublasLtMatrixLayout_t la, lb, lc;
  CHECK_LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, s.n, s.k, s.n));  // B^T
  CHECK_LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, s.k, s.m, s.k));  // A^T
  CHECK_LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, s.n, s.m, s.n));
  cublasLtMatmulPreference_t pref;
  CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
  CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                sizeof(ws_bytes)));
  cublasLtMatmulHeuristicResult_t heur;
  int found = 0;
  CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &heur, &found));
  if (found == 0) {
    std::fprintf(stderr, "cuBLASLt: no algorithm\n");
    std::exit(1);
  }
  const float alpha = 1.f, beta = 0.f;
  const double ms = MedianMs([&] {
    CHECK_LT(cublasLtMatmul(lt, desc, &alpha, b, la, a, lb, &beta, c, lc, c, lc, &heur.algo, workspace, ws_bytes,
                            nullptr));
  });
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(desc);
  return ms;
}

std::string ConfigName(const codegen::ops::GemmConfig& c) {
  return absl::StrCat(c.bm, "x", c.bn, "x", c.bk, "_w", c.warps_m, "x", c.warps_n, "_s", c.stages);
}

float F16ToF32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {
      float f = std::ldexp(static_cast<float>(man), -24);
      return sign ? -f : f;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

int Main(int argc, char** argv) {
  const std::string csv_path = argc > 1 ? argv[1] : "gemm.csv";
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const std::string arch = prop.major == 9 ? "sm_90a" : "sm_80";
  const std::vector<Shape3> shapes = {{1024, 1024, 1024}, {4096, 4096, 4096}, {8192, 8192, 8192},
                                      {4096, 768, 768},   {4096, 3072, 768},  {4096, 768, 3072}};
  using codegen::ops::GemmConfig;
  const std::vector<GemmConfig> configs = {
      {128, 128, 32, 2, 2, 3}, {128, 128, 32, 2, 2, 4}, {128, 256, 32, 2, 4, 3}, {128, 128, 32, 2, 4, 4},
      {64, 64, 32, 2, 2, 4}};

  // Generate and compile everything up front (one NVRTC module per kernel, in parallel).
  struct Variant {
    Shape3 s;
    bool bias_relu;
    GemmConfig cfg;
    bool heuristic;
    codegen::KernelLaunch launch;
    std::string function;
    const Node* node;
  };
  std::vector<Variant> variants;
  std::vector<codegen::ModuleKernel> kernels;
  std::vector<GemmGraph> graphs;
  for (const Shape3& s : shapes) {
    for (bool br : {false, true}) {
      graphs.push_back(Build(s, br));
      const GemmConfig pick = codegen::ops::PickGemmConfig(s.m, s.n, s.k, 1);
      std::vector<GemmConfig> cs = {pick};
      for (const GemmConfig& c : configs) {
        if (ConfigName(c) != ConfigName(pick)) cs.push_back(c);
      }
      for (size_t i = 0; i < cs.size(); ++i) {
        auto l = codegen::ops::GenerateMatMulGroup(*graphs.back().node, &cs[i]);
        if (!l.ok()) {
          std::fprintf(stderr, "generate: %s\n", std::string(l.status().message()).c_str());
          return 1;
        }
        Variant v{s, br, cs[i], i == 0, (*l)[0], absl::StrCat("gemm_", variants.size()), graphs.back().node};
        kernels.push_back({v.function, v.launch.source});
        variants.push_back(std::move(v));
      }
    }
  }
  auto cubins = codegen::CompileModules(kernels, arch, 1);
  if (!cubins.ok()) {
    std::fprintf(stderr, "compile: %s\n", std::string(cubins.status().message()).c_str());
    return 1;
  }

  cublasLtHandle_t lt;
  CHECK_LT(cublasLtCreate(&lt));
  const size_t ws_bytes = 64 << 20;
  void* workspace;
  CHECK_CUDA(cudaMalloc(&workspace, ws_bytes));
  const int64_t max_elems = 8192LL * 8192;
  std::vector<uint16_t> host(max_elems);
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (auto& h : host) {
    // Random fp16 in [-1, 1): sign, exponent 13..14, random mantissa.
    h = static_cast<uint16_t>((dist(gen) < 0 ? 0x8000 : 0) | ((13 + (gen() & 1)) << 10) | (gen() & 0x3ff));
  }
  void *a, *b, *c, *c_ref, *bias;
  for (void** p : {&a, &b, &c, &c_ref}) CHECK_CUDA(cudaMalloc(p, max_elems * 2));
  CHECK_CUDA(cudaMalloc(&bias, 8192 * 2));
  CHECK_CUDA(cudaMemcpy(a, host.data(), max_elems * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(b, host.data() + 17, (max_elems - 17) * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(bias, host.data() + 5, 8192 * 2, cudaMemcpyHostToDevice));

  std::ofstream csv(csv_path);
  csv << "m,n,k,variant,kiln_config,heuristic_config,kiln_ms,kiln_tflops,cublaslt_ms,cublaslt_tflops,ratio,"
         "max_rel_diff\n";
  std::printf("%s (%s), fp16 in/out, fp32 accumulate\n", prop.name, arch.c_str());
  std::printf("%-17s %-9s %-22s %9s %9s %9s %9s %7s %9s\n", "M x N x K", "variant", "kiln config", "kiln ms",
              "kiln TF/s", "cuBLASLt", "Lt TF/s", "ratio", "max diff");
  size_t vi = 0;
  for (const Shape3& s : shapes) {
    for (bool br : {false, true}) {
      const double flops = 2.0 * s.m * s.n * s.k;
      const double lt_ms = CublasLtMs(lt, s, a, b, c_ref, br ? bias : nullptr, workspace, ws_bytes);
      double best_ms = 1e30;
      std::string best_cfg;
      double heur_ms = 0;
      float best_diff = 0;
      for (; vi < variants.size() && variants[vi].s.m == s.m && variants[vi].s.n == s.n && variants[vi].s.k == s.k &&
             variants[vi].bias_relu == br;
           ++vi) {
        const Variant& v = variants[vi];
        cudaLibrary_t lib;
        CHECK_CUDA(cudaLibraryLoadData(&lib, (*cubins)[vi].data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
        cudaKernel_t kernel;
        CHECK_CUDA(cudaLibraryGetKernel(&kernel, lib, v.function.c_str()));
        if (v.launch.shared_bytes > 48 * 1024) {
          CHECK_CUDA(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, v.launch.shared_bytes));
        }
        // Argument buffers: output 0, then the node's inputs by name.
        const Node& node = *v.node;
        std::vector<void*> bufs = {c};
        for (int i = 0; i < node.num_inputs(); ++i) {
          const std::string& name = node.input(i)->name();
          bufs.push_back(name == "a" ? a : name == "b" ? b : bias);
        }
        std::vector<void*> params;
        for (int arg : v.launch.args) params.push_back(&bufs[arg]);
        const auto& l = v.launch;
        const double ms = MedianMs([&] {
          CHECK_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(l.grid[0], l.grid[1], l.grid[2]),
                                      dim3(l.block[0], l.block[1], l.block[2]), params.data(), l.shared_bytes,
                                      nullptr));
        });
        // Agreement with cuBLASLt (same inputs, same epilogue).
        std::vector<uint16_t> got(s.m * s.n), want(s.m * s.n);
        CHECK_CUDA(cudaMemcpy(got.data(), c, got.size() * 2, cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(want.data(), c_ref, want.size() * 2, cudaMemcpyDeviceToHost));
        float diff = 0;
        size_t differing = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          const float g = F16ToF32(got[i]), w = F16ToF32(want[i]);
          const float d = std::isfinite(g) && std::isfinite(w) ? std::fabs(g - w) / std::max(1.f, std::fabs(w))
                                                               : INFINITY;
          differing += got[i] != want[i];
          diff = std::max(diff, d);
        }
        if (vi == 0 || diff > 0.05f) {
          std::printf("  check: c[0] = %g (cuBLASLt %g), c[last] = %g (cuBLASLt %g), %zu of %zu elements differ\n",
                      F16ToF32(got[0]), F16ToF32(want[0]), F16ToF32(got.back()), F16ToF32(want.back()), differing,
                      got.size());
        }
        if (v.heuristic) heur_ms = ms;
        if (ms < best_ms) {
          best_ms = ms;
          best_cfg = ConfigName(v.cfg);
          best_diff = diff;
        }
        std::printf("  %5lldx%5lldx%5lld %-9s %-22s %9.3f %9.1f%s max diff %.3g\n", (long long)s.m, (long long)s.n,
                    (long long)s.k, br ? "bias_relu" : "plain", ConfigName(v.cfg).c_str(), ms, flops / ms / 1e9,
                    v.heuristic ? " (heuristic)" : "", diff);
        cudaLibraryUnload(lib);
      }
      const std::string shape = absl::StrCat(s.m, "x", s.n, "x", s.k);
      for (int which = 0; which < 2; ++which) {
        const double ms = which == 0 ? heur_ms : best_ms;
        const std::string cfg =
            which == 0 ? ConfigName(codegen::ops::PickGemmConfig(s.m, s.n, s.k, 1)) : absl::StrCat(best_cfg, "*");
        std::printf("%-17s %-9s %-22s %9.3f %9.1f %9.3f %9.1f %7.2f %9.3g\n", shape.c_str(), br ? "bias_relu" : "plain",
                    cfg.c_str(), ms, flops / ms / 1e9, lt_ms, flops / lt_ms / 1e9, lt_ms / ms, best_diff);
        csv << s.m << "," << s.n << "," << s.k << "," << (br ? "bias_relu" : "plain") << "," << cfg << ","
            << (which == 0 ? 1 : 0) << "," << ms << "," << flops / ms / 1e9 << "," << lt_ms << ","
            << flops / lt_ms / 1e9 << "," << lt_ms / ms << "," << best_diff << "\n";
      }
    }
  }
  std::printf("(ratio = kiln TFLOP/s / cuBLASLt TFLOP/s; * = best of the configs tried)\nwrote %s\n",
              csv_path.c_str());
  cublasLtDestroy(lt);
  return 0;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) { return kiln::Main(argc, argv); }
