// Achieved memory bandwidth of kiln's generated pointwise and row-reduction kernels
// (codegen/ops/pointwise.cc, codegen/ops/reduce.cc) on the GPU: a bias+GELU
// pointwise group, Softmax with scale and mask, LayerNorm with the residual Add, a
// flat Add, and a few plain row kernels, all fp16. Each workload is generated as the
// fused group the compiler forms (fusion/fuse_pointwise.h); where codegen has no
// kernel for the group it runs the members one kernel each, as the compiler does
// when it expands such a group. Bandwidth counts the bytes the fused kernel must
// move (group inputs read once, group outputs written once), whatever ran.
// CUDA-event timing, L2 flushed before each run, 3 warm-up runs, median of 20; a
// device-to-device cudaMemcpyAsync moving as many bytes gives the ceiling per size.
//   kiln_pointwise_bench [out.csv]
//   kiln_pointwise_bench --compile-only     generate and compile for sm_90a (no GPU needed)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmarks/bench_check.h"
#include "codegen/nvrtc_module.h"
#include "codegen/op_kernels.h"
#include "graph/fused_group.h"
#include "graph/infer_shapes.h"

namespace kiln {
namespace {

constexpr double kH100PeakGBs = 3350.0;  // H100 SXM HBM3

// One workload: an unfused graph of its members and the names of those that form
// the group (empty: a single node, no group).
struct Workload {
  std::string name;
  std::string shape;
  std::unique_ptr<Graph> graph;
  std::vector<std::string> members;
  std::string pattern;
};

Value* Input(Graph& g, const std::string& name, Shape shape, DType dtype = DType::kFloat16) {
  Value* v = g.AddValue(name);
  v->SetType(dtype, std::move(shape));
  g.AddInput(v);
  return v;
}

Value* Out(Graph& g, const std::string& name) { return g.AddValue(name); }

void Finish(Graph& g) {
  InferShapesOptions options;
  options.fold_constants = false;
  if (absl::Status s = InferShapes(g, options); !s.ok()) {
    std::fprintf(stderr, "shape inference: %s\n", std::string(s.message()).c_str());
    std::exit(1);
  }
}

std::vector<Workload> Workloads() {
  std::vector<Workload> w;
  {  // bias + GELU (erf), the FFN's first epilogue when it is not fused into the GEMM.
    auto g = std::make_unique<Graph>();
    Value* x = Input(*g, "x", {16384, 3072});
    Value* b = Input(*g, "bias", {3072});
    Value* t = Out(*g, "t");
    g->AddNode("Add", {x, b}, {t}, "add");
    Value* y = Out(*g, "y");
    g->AddNode("Gelu", {t}, {y}, "gelu");
    g->AddOutput(y);
    Finish(*g);
    w.push_back({"bias+gelu group", "16384x3072", std::move(g), {"add", "gelu"}, "pointwise"});
  }
  {  // Attention scores: Softmax(scores * 0.125 + mask[B,1,1,S]).
    auto g = std::make_unique<Graph>();
    Value* s = Input(*g, "scores", {32, 12, 128, 128});
    Value* m = Input(*g, "mask", {32, 1, 1, 128});
    Value* k = g->AddConstant("scale", Tensor::FromFloat(DType::kFloat16, {}, {0.125f}));
    Value* a = Out(*g, "scaled");
    g->AddNode("Mul", {s, k}, {a}, "scale");
    Value* b = Out(*g, "masked");
    g->AddNode("Add", {a, m}, {b}, "mask");
    Value* y = Out(*g, "probs");
    g->AddNode("Softmax", {b}, {y}, "softmax")->SetAttr("axis", int64_t{-1});
    g->AddOutput(y);
    Finish(*g);
    w.push_back({"softmax+scale+mask", "32x12x128x128", std::move(g), {"scale", "mask", "softmax"}, "softmax"});
  }
  {  // Post-attention residual + LayerNorm; the sum is the next residual (an output).
    auto g = std::make_unique<Graph>();
    Value* x = Input(*g, "x", {16384, 768});
    Value* r = Input(*g, "residual", {16384, 768});
    Value* gamma = Input(*g, "gamma", {768});
    Value* beta = Input(*g, "beta", {768});
    Value* sum = Out(*g, "sum");
    g->AddNode("Add", {x, r}, {sum}, "residual_add");
    Value* y = Out(*g, "y");
    g->AddNode("LayerNormalization", {sum, gamma, beta}, {y}, "ln")->SetAttr("epsilon", 1e-5f);
    g->AddOutput(y);
    g->AddOutput(sum);
    Finish(*g);
    w.push_back({"layernorm+residual", "16384x768", std::move(g), {"residual_add", "ln"}, "layernorm"});
  }
  {
    auto g = std::make_unique<Graph>();
    Value* y = Out(*g, "y");
    g->AddNode("Add", {Input(*g, "a", {64 << 20}), Input(*g, "b", {64 << 20})}, {y}, "add");
    g->AddOutput(y);
    Finish(*g);
    w.push_back({"add", "64M", std::move(g), {}, ""});
  }
  {
    auto g = std::make_unique<Graph>();
    Value* y = Out(*g, "y");
    g->AddNode("LayerNormalization",
               {Input(*g, "x", {16384, 768}), Input(*g, "gamma", {768}), Input(*g, "beta", {768})}, {y}, "ln");
    g->AddOutput(y);
    Finish(*g);
    w.push_back({"layernorm", "16384x768", std::move(g), {}, ""});
  }
  {
    auto g = std::make_unique<Graph>();
    Value* y = Out(*g, "y");
    g->AddNode("Softmax", {Input(*g, "x", {49152, 128})}, {y}, "softmax");
    g->AddOutput(y);
    Finish(*g);
    w.push_back({"softmax", "49152x128", std::move(g), {}, ""});
  }
  {
    auto g = std::make_unique<Graph>();
    Value* y = Out(*g, "y");
    g->AddNode("Softmax", {Input(*g, "x", {4096, 5000})}, {y}, "softmax");
    g->AddOutput(y);
    Finish(*g);
    w.push_back({"softmax long rows", "4096x5000", std::move(g), {}, ""});
  }
  {
    auto g = std::make_unique<Graph>();
    Value* y = Out(*g, "y");
    g->AddNode("ReduceMean",
               {Input(*g, "x", {16384, 768}), g->AddConstant("axes", Tensor::FromInt64(DType::kInt64, {1}, {-1}))}, {y},
               "mean");
    g->AddOutput(y);
    Finish(*g);
    w.push_back({"reducemean last axis", "16384x768", std::move(g), {}, ""});
  }
  return w;
}

template <typename F>
double MedianMs(F&& launch, void* flush, size_t flush_bytes) {
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) launch();
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    CHECK_CUDA(cudaMemsetAsync(flush, i, flush_bytes));  // evict the inputs from L2
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

size_t Bytes(const Value* v) { return static_cast<size_t>(v->numel()) * DTypeSize(v->dtype()); }

struct Step {
  const Node* node;
  std::vector<codegen::KernelLaunch> launches;
  size_t first_kernel = 0;
};

// What runs for one workload: the steps (the group, or its members when codegen has no
// group kernel), and the bytes the fused kernel moves.
struct Plan {
  std::vector<Step> steps;
  size_t bytes = 0;
  bool expanded = false;
};

// Plans `wl` and appends its kernels to `kernels`; a group's graph goes into
// `fused_graphs` (its steps point into it). False after the message when codegen fails.
bool PlanWorkload(const Workload& wl, std::vector<std::unique_ptr<Graph>>& fused_graphs,
                  std::vector<codegen::ModuleKernel>& kernels, Plan& plan) {
  const Node* unit = nullptr;
  if (!wl.members.empty()) {
    fused_graphs.push_back(wl.graph->Clone());
    Graph& fg = *fused_graphs.back();
    std::vector<Node*> members;
    for (const std::string& name : wl.members) {
      for (Node* n : fg.nodes()) {
        if (n->name() == name) members.push_back(n);
      }
    }
    absl::StatusOr<Node*> group = FormFusedGroup(fg, members, wl.pattern, nullptr);
    if (!group.ok()) {
      std::fprintf(stderr, "%s: %s\n", wl.name.c_str(), std::string(group.status().message()).c_str());
      return false;
    }
    unit = *group;
  } else {
    unit = wl.graph->nodes()[0];
  }
  for (const Value* v : unit->inputs()) {
    if (v != nullptr && !v->is_constant()) plan.bytes += Bytes(v);
  }
  for (const Value* v : unit->outputs()) plan.bytes += Bytes(v);
  absl::StatusOr<std::vector<codegen::KernelLaunch>> l = codegen::GenerateNodeKernels(*unit);
  if (l.ok()) {
    plan.steps.push_back({unit, *std::move(l)});
  } else if (l.status().code() == absl::StatusCode::kUnimplemented && !wl.members.empty()) {
    plan.expanded = true;
    for (const Node* n : wl.graph->nodes()) {
      absl::StatusOr<std::vector<codegen::KernelLaunch>> m = codegen::GenerateNodeKernels(*n);
      if (!m.ok()) {
        std::fprintf(stderr, "%s: %s\n", wl.name.c_str(), std::string(m.status().message()).c_str());
        return false;
      }
      plan.steps.push_back({n, *std::move(m)});
    }
  } else {
    std::fprintf(stderr, "%s: %s\n", wl.name.c_str(), std::string(l.status().message()).c_str());
    return false;
  }
  for (Step& s : plan.steps) {
    s.first_kernel = kernels.size();
    for (const codegen::KernelLaunch& k : s.launches) {
      kernels.push_back({absl::StrCat("kiln_bench_", kernels.size()), k.source});
    }
  }
  return true;
}

// Random fp16 data in [-2, 2): one pool, every input reads a window of it.
std::vector<uint16_t> RandomPool() {
  const size_t pool_elems = (64u << 20) + 4096;
  std::vector<uint16_t> host(pool_elems);
  std::mt19937 gen(11);
  std::vector<float> chunk(1 << 20);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  for (size_t at = 0; at < pool_elems; at += chunk.size()) {
    const size_t n = std::min(chunk.size(), pool_elems - at);
    for (size_t i = 0; i < n; ++i) chunk[i] = dist(gen);
    const Tensor t =
        Tensor::FromFloat(DType::kFloat16, {static_cast<int64_t>(n)}, absl::MakeConstSpan(chunk.data(), n));
    std::memcpy(host.data() + at, t.raw_data(), n * 2);
  }
  return host;
}

// Times workload `wl` (the kernels of `plan`, loaded from `cubins`) and a copy moving as
// many bytes, prints its line and writes its CSV row. Inputs are windows of `host`.
void MeasureWorkload(const Workload& wl, const Plan& plan, const std::vector<codegen::ModuleKernel>& kernels,
                     const std::vector<std::string>& cubins, const std::vector<uint16_t>& host, void* flush,
                     size_t flush_bytes, std::ofstream& csv) {
  // One device buffer per value any step touches (by name).
  std::map<std::string, void*> buf;
  size_t pool_at = 0;
  auto buffer = [&](const Value* v) -> void* {
    auto it = buf.find(v->name());
    if (it != buf.end()) return it->second;
    void* p = nullptr;
    CHECK_CUDA(cudaMalloc(&p, std::max<size_t>(16, Bytes(v))));
    if (v->is_constant()) {
      CHECK_CUDA(cudaMemcpy(p, v->constant().raw_data(), Bytes(v), cudaMemcpyHostToDevice));
    } else if (v->producer() == nullptr && v->dtype() == DType::kFloat16) {
      const size_t n = static_cast<size_t>(v->numel());
      pool_at = (pool_at + 977) % 4096;
      CHECK_CUDA(cudaMemcpy(p, host.data() + pool_at, n * 2, cudaMemcpyHostToDevice));
    }
    buf[v->name()] = p;
    return p;
  };
  struct Ready {
    cudaKernel_t kernel;
    const codegen::KernelLaunch* launch;
    std::vector<void*> ptrs;
    std::vector<void*> params;
  };
  std::vector<Ready> ready;
  std::vector<cudaLibrary_t> libs;
  for (const Step& s : plan.steps) {
    for (size_t k = 0; k < s.launches.size(); ++k) {
      const size_t index = s.first_kernel + k;
      cudaLibrary_t lib;
      CHECK_CUDA(cudaLibraryLoadData(&lib, cubins[index].data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
      libs.push_back(lib);
      Ready r;
      CHECK_CUDA(cudaLibraryGetKernel(&r.kernel, lib, kernels[index].function.c_str()));
      r.launch = &s.launches[k];
      for (int a : r.launch->args) {
        const int nout = s.node->num_outputs();
        r.ptrs.push_back(buffer(a < nout ? s.node->output(a) : s.node->input(a - nout)));
      }
      ready.push_back(std::move(r));
    }
  }
  for (Ready& r : ready) {
    for (void*& p : r.ptrs) r.params.push_back(&p);
  }
  const double ms = MedianMs(
      [&] {
        for (Ready& r : ready) {
          const codegen::KernelLaunch& l = *r.launch;
          CHECK_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(r.kernel), dim3(l.grid[0], l.grid[1], l.grid[2]),
                                      dim3(l.block[0], l.block[1], l.block[2]), r.params.data(), l.shared_bytes,
                                      nullptr));
        }
      },
      flush, flush_bytes);
  const double gbs = static_cast<double>(plan.bytes) / (ms * 1e-3) / 1e9;
  // The practical ceiling at this size: a device-to-device copy moving as many
  // bytes (half read, half written), timed the same way.
  void* copy_src = nullptr;
  void* copy_dst = nullptr;
  const size_t half = plan.bytes / 2;
  CHECK_CUDA(cudaMalloc(&copy_src, half));
  CHECK_CUDA(cudaMalloc(&copy_dst, half));
  const double copy_ms = MedianMs(
      [&] { CHECK_CUDA(cudaMemcpyAsync(copy_dst, copy_src, half, cudaMemcpyDeviceToDevice)); }, flush, flush_bytes);
  const double copy_gbs = static_cast<double>(2 * half) / (copy_ms * 1e-3) / 1e9;
  cudaFree(copy_src);
  cudaFree(copy_dst);
  const std::string nk = absl::StrCat(ready.size(), plan.expanded ? " (unfused)" : "");
  std::printf("%-22s %-15s %7s %10.1f %10.1f %9.0f %7.1f%% %12.0f\n", wl.name.c_str(), wl.shape.c_str(),
              absl::StrCat(ready.size(), plan.expanded ? "*" : "").c_str(), plan.bytes / 1e6, ms * 1e3, gbs,
              100.0 * gbs / kH100PeakGBs, copy_gbs);
  csv << wl.name << "," << wl.shape << ",f16," << nk << "," << plan.bytes << "," << ms << "," << gbs << ","
      << 100.0 * gbs / kH100PeakGBs << "," << copy_gbs << "\n";
  for (cudaLibrary_t lib : libs) cudaLibraryUnload(lib);
  for (auto& [name, p] : buf) cudaFree(p);
}

int Main(int argc, char** argv) {
  const bool compile_only = argc > 1 && std::string(argv[1]) == "--compile-only";
  const std::string csv_path = argc > 1 && !compile_only ? argv[1] : "pointwise.csv";
  int count = 0;
  cudaDeviceProp prop{};
  std::string arch = "sm_90a";
  if (!compile_only) {
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      std::fprintf(stderr, "no CUDA device\n");
      return 1;
    }
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    arch = prop.major == 9 ? "sm_90a" : absl::StrCat("sm_8", prop.minor);
  }

  std::vector<Workload> workloads = Workloads();
  std::vector<std::unique_ptr<Graph>> fused_graphs;
  std::vector<Plan> plans(workloads.size());
  std::vector<codegen::ModuleKernel> kernels;
  for (size_t w = 0; w < workloads.size(); ++w) {
    if (!PlanWorkload(workloads[w], fused_graphs, kernels, plans[w])) return 1;
  }
  absl::StatusOr<std::vector<std::string>> cubins = codegen::CompileModules(kernels, arch, 1);
  if (!cubins.ok()) {
    std::fprintf(stderr, "compile: %s\n", std::string(cubins.status().message()).c_str());
    return 1;
  }
  if (compile_only) {
    for (size_t w = 0; w < workloads.size(); ++w) {
      size_t launches = 0;
      for (const Step& s : plans[w].steps) launches += s.launches.size();
      std::printf("%-22s %-15s %zu kernel(s)%s, %.1f MB moved\n", workloads[w].name.c_str(), workloads[w].shape.c_str(),
                  launches, plans[w].expanded ? " (group expanded)" : "", plans[w].bytes / 1e6);
    }
    std::printf("compiled %zu kernels for %s\n", kernels.size(), arch.c_str());
    return 0;
  }

  const std::vector<uint16_t> host = RandomPool();
  const size_t flush_bytes = 256u << 20;
  void* flush = nullptr;
  CHECK_CUDA(cudaMalloc(&flush, flush_bytes));

  std::ofstream csv(csv_path);
  csv << "workload,shape,dtype,kernels,bytes,ms,gb_per_s,pct_of_h100_peak,memcpy_gb_per_s\n";
  std::printf("%s (%s), fp16 storage, fp32 math; L2 flushed before each run; median of 20\n", prop.name, arch.c_str());
  std::printf("%-22s %-15s %7s %10s %10s %9s %8s %12s\n", "workload", "shape", "kernels", "MB moved", "us", "GB/s",
              "% peak", "memcpy GB/s");
  for (size_t w = 0; w < workloads.size(); ++w) {
    MeasureWorkload(workloads[w], plans[w], kernels, *cubins, host, flush, flush_bytes, csv);
  }
  std::printf(
      "(* = codegen has no kernel for the group: its members ran one kernel each, as a bundle runs an\n"
      " expanded group; bandwidth counts the fused group's bytes; %% of the H100 SXM's %.0f GB/s; memcpy:\n"
      " cudaMemcpyAsync device to device moving as many bytes, the practical ceiling at that size)\nwrote %s\n",
      kH100PeakGBs, csv_path.c_str());
  cudaFree(flush);
  return 0;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) { return kiln::Main(argc, argv); }
