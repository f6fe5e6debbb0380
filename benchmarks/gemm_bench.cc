// kiln's generated GEMM kernels against cuBLAS/cuBLASLt, side by side in one process,
// per fusion idiom (issue 5 §8; issue 6 reuses the harness, shapes and seed protocol):
//   gemm       GEMM                 vs cublasGemmEx and cuBLASLt
//   bias_relu  GEMM+bias+ReLU       vs cuBLASLt RELU_BIAS, and cuBLAS + a separate bias+ReLU kernel
//   bias_gelu  GEMM+bias+GELU(tanh) vs cuBLASLt GELU_BIAS, and cuBLAS + a separate bias+GELU kernel
//   bias_gelu_erf  GEMM+bias+GELU(erf) vs cuBLAS + a separate bias+GELU(erf) kernel (cuBLASLt's
//              GELU epilogue is the tanh form)
//   bias_residual  GEMM+bias+residual (a transformer's attention and FFN outputs) vs cuBLASLt
//              BIAS with C = the residual (beta = 1), and cuBLAS + a separate bias+residual kernel
//   relu_gemm  ReLU(A)·B (prologue) vs a separate ReLU kernel + cuBLAS
//   dual_gemm  A·B + A2·B2 (dual)   vs cuBLAS + cuBLAS(beta=1), and two cuBLAS + a separate add kernel
// fp16 in and out, fp32 accumulate, row-major A[M,K]·B[K,N]. kiln's side of each idiom
// is the FusedGroup fusion would form, turned into kernels by GenerateNodeKernels; the
// separate kernels of the unfused peers are kiln's own pointwise kernels (the unfused
// kiln path). Every kiln result is checked against the peer's output before it is
// timed. All kernels are generated and compiled (NVRTC, in parallel) before timing.
// Timing: CUDA events around each run, warm-up runs, median of --reps; per problem, the
// timed runs go in rounds of one run of every peer and kiln kernel (--sequential: each
// measurement's runs back to back), so that clock changes reach all of them alike; the L2
// cache is flushed (a memset of twice its size) before every timed run unless --no-flush. Either
// the flush or (--no-flush) a 50 us spin kernel precedes the start event, so the timed
// launches are already queued and the events measure GPU time, not launch latency.
// See benchmarks/RESULTS.md; benchmarks/plot_gemm.sh turns the CSV into a PNG.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "codegen/nvrtc_module.h"
#include "codegen/op_kernels.h"
#include "codegen/ops/gemm_sm90.h"
#include "common/write_file.h"
#include "graph/fused_group.h"
#include "graph/infer_shapes.h"
#include "runtime/nvml_meter.h"
#include "runtime/tensor_map.h"

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
#define CHECK_BLAS(expr)                                                                               \
  do {                                                                                                 \
    const cublasStatus_t s_ = (expr);                                                                  \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                 \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cublasLtGetStatusString(s_)); \
      std::exit(1);                                                                                    \
    }                                                                                                  \
  } while (0)

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kNoDevice = 77;  // the exit status without a GPU (ctest's SKIP_RETURN_CODE)

// ---------------------------------------------------------------------------------
// Idioms and shapes.

enum class Idiom { kGemm, kBiasRelu, kBiasGelu, kReluGemm, kDualGemm, kBiasGeluErf, kBiasResidual };
constexpr Idiom kAllIdioms[] = {Idiom::kGemm,     Idiom::kBiasRelu, Idiom::kBiasGelu,
                                Idiom::kReluGemm, Idiom::kDualGemm, Idiom::kBiasGeluErf,
                                Idiom::kBiasResidual};

const char* IdiomName(Idiom i) {
  switch (i) {
    case Idiom::kGemm: return "gemm";
    case Idiom::kBiasRelu: return "bias_relu";
    case Idiom::kBiasGelu: return "bias_gelu";
    case Idiom::kReluGemm: return "relu_gemm";
    case Idiom::kDualGemm: return "dual_gemm";
    case Idiom::kBiasGeluErf: return "bias_gelu_erf";
    case Idiom::kBiasResidual: return "bias_residual";
  }
  return "?";
}

// The two peers of each idiom ("" where there is only one).
const char* PeerA(Idiom i) {
  switch (i) {
    case Idiom::kGemm: return "cublasGemmEx";
    case Idiom::kBiasRelu: return "cublasLt_RELU_BIAS";
    case Idiom::kBiasGelu: return "cublasLt_GELU_BIAS";
    case Idiom::kReluGemm: return "relu_kernel+cublas";
    case Idiom::kDualGemm: return "cublas+cublas_beta1";
    case Idiom::kBiasGeluErf: return "cublas+bias_gelu_erf_kernel";
    case Idiom::kBiasResidual: return "cublasLt_BIAS_beta1";
  }
  return "?";
}
const char* PeerB(Idiom i) {
  switch (i) {
    case Idiom::kGemm: return "cublasLt";
    case Idiom::kBiasRelu: return "cublas+bias_relu_kernel";
    case Idiom::kBiasGelu: return "cublas+bias_gelu_kernel";
    case Idiom::kReluGemm: return "";
    case Idiom::kDualGemm: return "2xcublas+add_kernel";
    case Idiom::kBiasGeluErf: return "";
    case Idiom::kBiasResidual: return "cublas+bias_residual_kernel";
  }
  return "?";
}

struct Problem {
  std::string set;
  int64_t m, n, k;
};

std::vector<Problem> Squares() {
  std::vector<Problem> p;
  for (int64_t s : {1024, 2048, 4096, 8192}) p.push_back({"squares", s, s, s});
  return p;
}

// Token counts x the (N, K) of BERT-base/-large and GPT-2 projections and MLPs.
std::vector<Problem> Transformer() {
  std::vector<Problem> p;
  for (int64_t tokens : {128, 512, 2048, 8192, 16384}) {
    for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{
             {768, 768}, {3072, 768}, {768, 3072}, {1024, 1024}, {4096, 1024}, {1024, 4096}}) {
      p.push_back({"transformer", tokens, n, k});
    }
  }
  return p;
}

// Few tokens (decode-like, issue 6 "Small M"): M in {1, 8, 16, 32, 64} x N, K in
// {768, 3072, 4096}.
std::vector<Problem> SmallM() {
  std::vector<Problem> p;
  for (int64_t m : {1, 8, 16, 32, 64}) {
    for (int64_t n : {768, 3072, 4096}) {
      for (int64_t k : {768, 3072, 4096}) p.push_back({"small_m", m, n, k});
    }
  }
  return p;
}

// The seed protocol: `count` problems, each of M, N, K a multiple of 128 in
// [128, 4096] drawn from mt19937_64(seed) (whose output the C++ standard fixes, so
// the list is the same on every platform): dim = 128 * (1 + draw % 32).
std::vector<Problem> Random(uint64_t seed, int count) {
  std::mt19937_64 gen(seed);
  std::vector<Problem> p;
  for (int i = 0; i < count; ++i) {
    const int64_t m = 128 * (1 + static_cast<int64_t>(gen() % 32));
    const int64_t n = 128 * (1 + static_cast<int64_t>(gen() % 32));
    const int64_t k = 128 * (1 + static_cast<int64_t>(gen() % 32));
    p.push_back({"random", m, n, k});
  }
  return p;
}

// Three small problems, one of them with partial tiles, to check the harness quickly.
std::vector<Problem> Smoke() { return {{"smoke", 512, 512, 512}, {"smoke", 1024, 768, 768}, {"smoke", 1000, 776, 520}}; }

// ---------------------------------------------------------------------------------
// Graphs: kiln's fused group for each idiom, and the nodes of the unfused peers'
// separate kernels. Inputs are fp16 values named "a", "b", "a2", "b2", "bias", "y",
// "p", "q"; the result is always "out". Buffers are bound to kernels by these names.

struct Built {
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
  Node* node = nullptr;
};

Value* Input(Graph& g, const std::string& name, Shape shape) {
  Value* v = g.AddValue(name);
  v->SetType(DType::kFloat16, std::move(shape));
  g.AddInput(v);
  return v;
}

// Types the graph and, when `pattern` is not empty, replaces `members` by one
// FusedGroup (as the fusion passes would); `node` is the group or the single member.
absl::StatusOr<Built> Finish(Built b, const std::vector<Node*>& members, const std::string& pattern,
                             const Node* anchor, Value* out) {
  b.graph->AddOutput(out);
  InferShapesOptions options;
  options.fold_constants = false;
  if (absl::Status s = InferShapes(*b.graph, options); !s.ok()) return s;
  if (pattern.empty()) {
    b.node = members[0];
    return b;
  }
  absl::StatusOr<Node*> group = FormFusedGroup(*b.graph, members, pattern, anchor);
  if (!group.ok()) return group.status();
  b.node = *group;
  return b;
}

// Appends `op` reading `ins` and returns its output (named `out_name`).
Node* Op(Graph& g, const std::string& op, const std::vector<Value*>& ins, const std::string& out_name) {
  return g.AddNode(op, ins, {g.AddValue(out_name)}, absl::StrCat(op, "_", out_name));
}

// The group fusion forms for `idiom` on [M,K]·[K,N] (patterns of fusion/fuse_epilogue.cc,
// fuse_prologue.cc and fuse_siblings.cc). bias_gelu uses the tanh approximation, which
// is what cuBLASLt's GELU epilogue computes; bias_gelu_erf the exact (erf) form.
// `b_nk`: every B operand is stored [N, K] (MatMul's trans_b), else [K, N].
absl::StatusOr<Built> KilnGroup(Idiom idiom, int64_t m, int64_t n, int64_t k, bool b_nk) {
  Built b;
  Graph& g = *b.graph;
  // MatMul(x, B) with B the input `name` in the chosen layout.
  auto matmul = [&](Value* x, const std::string& name, const std::string& out) {
    Node* mm = Op(g, "MatMul", {x, Input(g, name, b_nk ? Shape{n, k} : Shape{k, n})}, out);
    if (b_nk) mm->SetAttr("trans_b", int64_t{1});
    return mm;
  };
  switch (idiom) {
    case Idiom::kGemm: {
      Node* mm = matmul(Input(g, "a", {m, k}), "b", "out");
      return Finish(std::move(b), {mm}, "matmul", mm, mm->output(0));
    }
    case Idiom::kBiasRelu:
    case Idiom::kBiasGelu:
    case Idiom::kBiasGeluErf: {
      Node* mm = matmul(Input(g, "a", {m, k}), "b", "mm");
      Node* add = Op(g, "Add", {mm->output(0), Input(g, "bias", {n})}, "biased");
      Node* act = Op(g, idiom == Idiom::kBiasRelu ? "Relu" : "Gelu", {add->output(0)}, "out");
      if (idiom == Idiom::kBiasGelu) act->SetAttr("approximate", "tanh");
      return Finish(std::move(b), {mm, add, act}, "matmul+epilogue", mm, act->output(0));
    }
    case Idiom::kBiasResidual: {
      Node* mm = matmul(Input(g, "a", {m, k}), "b", "mm");
      Node* add = Op(g, "Add", {mm->output(0), Input(g, "bias", {n})}, "biased");
      Node* res = Op(g, "Add", {add->output(0), Input(g, "residual", {m, n})}, "out");
      return Finish(std::move(b), {mm, add, res}, "matmul+epilogue", mm, res->output(0));
    }
    case Idiom::kReluGemm: {
      Node* relu = Op(g, "Relu", {Input(g, "a", {m, k})}, "relu_a");
      Node* mm = matmul(relu->output(0), "b", "out");
      return Finish(std::move(b), {relu, mm}, "prologue+matmul", mm, mm->output(0));
    }
    case Idiom::kDualGemm: {
      Node* p = matmul(Input(g, "a", {m, k}), "b", "p");
      Node* q = matmul(Input(g, "a2", {m, k}), "b2", "q");
      Node* add = Op(g, "Add", {p->output(0), q->output(0)}, "out");
      return Finish(std::move(b), {p, q, add}, "dual-matmul", p, add->output(0));
    }
  }
  return absl::InvalidArgumentError("unknown idiom");
}

// The unfused peers' separate kernel: out = act(y + bias) as a "pointwise" group
// (`idiom`: bias_relu, bias_gelu or bias_gelu_erf).
absl::StatusOr<Built> BiasActGroup(Idiom idiom, int64_t m, int64_t n) {
  Built b;
  Graph& g = *b.graph;
  Node* add = Op(g, "Add", {Input(g, "y", {m, n}), Input(g, "bias", {n})}, "biased");
  Node* act = Op(g, idiom == Idiom::kBiasRelu ? "Relu" : "Gelu", {add->output(0)}, "out");
  if (idiom == Idiom::kBiasGelu) act->SetAttr("approximate", "tanh");
  return Finish(std::move(b), {add, act}, "pointwise", nullptr, act->output(0));
}

// The bias_residual peer's separate kernel: out = y + bias + residual.
absl::StatusOr<Built> BiasResidualGroup(int64_t m, int64_t n) {
  Built b;
  Graph& g = *b.graph;
  Node* add = Op(g, "Add", {Input(g, "y", {m, n}), Input(g, "bias", {n})}, "biased");
  Node* res = Op(g, "Add", {add->output(0), Input(g, "residual", {m, n})}, "out");
  return Finish(std::move(b), {add, res}, "pointwise", nullptr, res->output(0));
}

// out = Relu(a) over [rows, cols] (a plain node).
absl::StatusOr<Built> ReluNode(int64_t rows, int64_t cols) {
  Built b;
  Node* relu = Op(*b.graph, "Relu", {Input(*b.graph, "a", {rows, cols})}, "out");
  return Finish(std::move(b), {relu}, "", nullptr, relu->output(0));
}

// out = p + q over [rows, cols] (a plain node).
absl::StatusOr<Built> AddNode(int64_t rows, int64_t cols) {
  Built b;
  Graph& g = *b.graph;
  Node* add = Op(g, "Add", {Input(g, "p", {rows, cols}), Input(g, "q", {rows, cols})}, "out");
  return Finish(std::move(b), {add}, "", nullptr, add->output(0));
}

// ---------------------------------------------------------------------------------
// Generated kernels: every source goes into one table (deduplicated), compiled in
// parallel before anything is timed.

class KernelTable {
 public:
  int Add(const std::string& source) {
    auto [it, fresh] = index_.try_emplace(source, static_cast<int>(kernels_.size()));
    if (fresh) kernels_.push_back({absl::StrCat("kiln_bench_", kernels_.size()), source});
    return it->second;
  }
  int size() const { return static_cast<int>(kernels_.size()); }

  // Compiles everything (modules of `per_module` kernels, in parallel) and, when
  // `load`, loads the cubins and looks the kernels up.
  // With `dump_dir`, also writes each kernel's source (kiln_bench_N.cu) and each
  // module's cubin (module_M.cubin, kernels M * per_module ...) there.
  absl::Status Compile(const std::string& arch, int per_module, bool load, int* modules,
                       const std::string& dump_dir = "") {
    auto cubins = codegen::CompileModules(kernels_, arch, per_module);
    if (!cubins.ok()) return cubins.status();
    *modules = static_cast<int>(cubins->size());
    if (!dump_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(dump_dir, ec);
      if (ec) {
        return absl::PermissionDeniedError(
            absl::StrCat("--dump-kernels: cannot create the directory ", dump_dir, ": ", ec.message()));
      }
      auto write = [&](const std::string& name, const std::string& bytes) {
        return WriteFile(absl::StrCat(dump_dir, "/", name), bytes, "--dump-kernels");
      };
      for (const codegen::ModuleKernel& k : kernels_) {
        if (absl::Status s = write(k.function + ".cu", k.source); !s.ok()) return s;
      }
      for (size_t i = 0; i < cubins->size(); ++i) {
        if (absl::Status s = write(absl::StrCat("module_", i, ".cubin"), (*cubins)[i]); !s.ok()) return s;
      }
      std::printf("wrote %zu kernel sources and %zu cubins (%d kernels a module) to %s\n", kernels_.size(),
                  cubins->size(), per_module, dump_dir.c_str());
    }
    if (!load) return absl::OkStatus();
    std::vector<cudaLibrary_t> libs;
    for (const std::string& cubin : *cubins) {
      cudaLibrary_t lib;
      CHECK_CUDA(cudaLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
      libs.push_back(lib);
    }
    for (size_t i = 0; i < kernels_.size(); ++i) {
      cudaKernel_t kernel;
      CHECK_CUDA(cudaLibraryGetKernel(&kernel, libs[i / per_module], kernels_[i].function.c_str()));
      handles_.push_back(kernel);
    }
    return absl::OkStatus();
  }
  cudaKernel_t handle(int i) const { return handles_[i]; }

 private:
  std::vector<codegen::ModuleKernel> kernels_;
  absl::flat_hash_map<std::string, int> index_;
  std::vector<cudaKernel_t> handles_;
};

// A node's launches, with the names of the values their arguments refer to.
struct Generated {
  std::vector<codegen::KernelLaunch> launches;
  std::vector<int> kernel_ids;          // per launch, into the KernelTable
  std::vector<std::string> value_names;  // the node's outputs, then its inputs
  std::string config;                    // tile config, or the launch geometry
};

// The value of `#define NAME <value>` in a generated source, or "".
std::string Define(const std::string& source, const std::string& name) {
  const std::string key = absl::StrCat("#define ", name, " ");
  const size_t at = source.find(key);
  if (at == std::string::npos) return "";
  const size_t begin = at + key.size();
  return source.substr(begin, source.find('\n', begin) - begin);
}

std::string DescribeLaunch(const codegen::KernelLaunch& l) {
  const std::string bm = Define(l.source, "BM");
  if (l.family == "gemm_sm90") {
    // _dual: two mainloops; _rsA: A through registers (a prologue); _kS: S splits of
    // K; _swap: C^T = B^T A^T (small M); _cl2: clusters of two CTAs sharing B; _skT:
    // stream-K over the last T tiles; _bk128: 128 k per stage.
    const std::string split = Define(l.source, "GEMM_SPLIT_K");
    return absl::StrCat("sm90_", bm, "x", Define(l.source, "BN"), Define(l.source, "GEMM_PINGPONG") == "1" ? "_p" : "_c",
                        Define(l.source, "CONSUMERS"), "x", Define(l.source, "WG_M"), "_s", Define(l.source, "STAGES"),
                        "_g", l.grid[0], Define(l.source, "GEMM_DUAL") == "1" ? "_dual" : "",
                        Define(l.source, "GEMM_PROLOGUE") == "1" ? "_rsA" : "",
                        split != "1" && !split.empty() ? absl::StrCat("_k", split) : "",
                        Define(l.source, "GEMM_SWAP_AB") == "1" ? "_swap" : "",
                        Define(l.source, "GEMM_CLUSTER_M") == "2" ? "_cl2" : "",
                        Define(l.source, "GEMM_STREAM_K") == "1" ? absl::StrCat("_sk", Define(l.source, "GEMM_SK_TILES"))
                                                                 : "",
                        Define(l.source, "GEMM_BK") == "128" ? "_bk128" : "");
  }
  if (!bm.empty()) {
    const std::string split = Define(l.source, "GEMM_SPLIT_K");  // the generator's, or the template's default 1
    return absl::StrCat(bm, "x", Define(l.source, "BN"), "x", Define(l.source, "BK"), "_w", Define(l.source, "WARPS_M"),
                        "x", Define(l.source, "WARPS_N"), "_s", Define(l.source, "STAGES"),
                        split.empty() || split == "1" ? "" : absl::StrCat("_k", split));
  }
  return absl::StrCat("g", l.grid[0], "x", l.grid[1], "x", l.grid[2], "_b", l.block[0] * l.block[1] * l.block[2],
                      "_smem", l.shared_bytes);
}

// Kernels for `node` through codegen's public entry point (the GEMM template on;
// `hopper`: the sm90 family for the groups it takes, KernelOptions::hopper).
absl::StatusOr<Generated> Generate(const Node& node, KernelTable& table, bool hopper = false, int sm_count = 0,
                                   const codegen::ops::Sm90GemmConfig* sm90_config = nullptr) {
  codegen::KernelOptions options;
  options.matmul_groups = codegen::MatMulGroups::kGenerated;
  options.hopper = hopper;
  options.sm_count = sm_count;
  absl::StatusOr<std::vector<codegen::KernelLaunch>> launches =
      hopper && sm90_config != nullptr && codegen::ops::Sm90Eligible(node).ok()
          ? codegen::ops::GenerateMatMulGroupSm90(node, sm90_config, sm_count)
          : codegen::GenerateNodeKernels(node, options);
  if (!launches.ok()) return launches.status();
  if (launches->empty()) return absl::InternalError("GenerateNodeKernels returned no launch");
  Generated g;
  g.launches = *std::move(launches);
  for (const Value* v : node.outputs()) g.value_names.push_back(v->name());
  for (const Value* v : node.inputs()) g.value_names.push_back(v->name());
  for (const codegen::KernelLaunch& l : g.launches) {
    g.kernel_ids.push_back(table.Add(l.source));
    absl::StrAppend(&g.config, g.config.empty() ? "" : "+", DescribeLaunch(l));
  }
  return g;
}

// Generated launches with their pointer arguments bound to device buffers (and a
// split-K launch's semaphores and scratch to a workspace of their own).
class Bound {
 public:
  Bound(const Generated& g, const KernelTable& table, const std::map<std::string, void*>& buffers) {
    for (const codegen::KernelLaunch& l : g.launches) {
      if (absl::Status st = workspace_.ReserveFor(l); !st.ok()) {
        std::fprintf(stderr, "kernel workspace: %s\n", std::string(st.message()).c_str());
        std::exit(1);
      }
    }
    for (size_t i = 0; i < g.launches.size(); ++i) {
      const codegen::KernelLaunch& l = g.launches[i];
      auto launch = std::make_unique<Launch>();
      launch->kernel = table.handle(g.kernel_ids[i]);
      launch->l = &l;
      absl::StatusOr<LaunchArgs> args = LaunchArgs::Build(l, [&](int arg) -> void* {
        auto it = buffers.find(g.value_names[arg]);
        if (it == buffers.end()) {
          std::fprintf(stderr, "no buffer bound to '%s'\n", g.value_names[arg].c_str());
          std::exit(1);
        }
        return it->second;
      }, workspace_.view());
      if (!args.ok()) {
        std::fprintf(stderr, "launch arguments: %s\n", std::string(args.status().message()).c_str());
        std::exit(1);
      }
      launch->args = *std::move(args);
      if (l.shared_bytes > 48 * 1024) {
        CHECK_CUDA(cudaFuncSetAttribute(reinterpret_cast<const void*>(launch->kernel),
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, l.shared_bytes));
      }
      launches_.push_back(std::move(launch));
    }
  }
  void Run(cudaStream_t stream) const {
    for (const auto& launch : launches_) {
      const codegen::KernelLaunch& l = *launch->l;
      CHECK_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(launch->kernel), dim3(l.grid[0], l.grid[1], l.grid[2]),
                                  dim3(l.block[0], l.block[1], l.block[2]),
                                  launch->args.params(), l.shared_bytes, stream));
    }
  }

 private:
  struct Launch {
    cudaKernel_t kernel;
    const codegen::KernelLaunch* l;
    LaunchArgs args;  // pointers, then encoded tensor maps, then the workspace's
  };
  DeviceWorkspace workspace_;
  std::vector<std::unique_ptr<Launch>> launches_;
};

// The harness's own device code (same module path as kiln's kernels): a
// deterministic uniform fill and the error reduction used for validation.
constexpr char kFillSource[] = R"(
extern "C" __global__ void KILN_KERNEL(kiln_f16* p, long long n, unsigned long long seed, float scale) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned long long z = (unsigned long long)i * 0x9E3779B97F4A7C15ull + seed * 0xD1B54A32D192ED03ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float u = (float)(z >> 40) * (1.f / 16777216.f);  // [0, 1)
    p[i] = kiln_f32_to_f16((2.f * u - 1.f) * scale);
  }
}
)";
// Spins for `ns` nanoseconds: enqueued before the start event when L2 is not flushed,
// so that the runs being timed are queued behind it and the events measure GPU time,
// not the host's launch latency (the flush memset does this otherwise).
constexpr char kDelaySource[] = R"(
extern "C" __global__ void KILN_KERNEL(long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < (unsigned long long)ns);
}
)";
// result = max_i |got_i - want_i| / max(1, |want_i|) as float bits (non-negative
// floats order like their bits); NaN or infinity in either gives +inf.
constexpr char kErrorSource[] = R"(
extern "C" __global__ void KILN_KERNEL(const kiln_f16* got, const kiln_f16* want, long long n, unsigned int* result) {
  float worst = 0.f;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const float g = kiln_f16_to_f32(got[i]), w = kiln_f16_to_f32(want[i]);
    float d = fabsf(g - w) / fmaxf(1.f, fabsf(w));
    if (!(d <= 3.0e38f)) d = __int_as_float(0x7f800000);
    worst = fmaxf(worst, d);
  }
  for (int o = 16; o > 0; o >>= 1) worst = fmaxf(worst, __shfl_xor_sync(0xffffffffu, worst, o));
  if ((threadIdx.x & 31) == 0) atomicMax(result, __float_as_uint(worst));
}
)";

// ---------------------------------------------------------------------------------
// cuBLAS peers. Row-major C[M,N] = A[M,K]·B[K,N] is column-major C^T = B^T·A^T.

struct Blas {
  cudaStream_t stream;
  cublasHandle_t handle;
  cublasLtHandle_t lt;
  void* workspace;
  size_t workspace_bytes;
  bool b_nk = false;  // B stored [N, K] (--b-layout nk)
};

void GemmEx(const Blas& blas, int64_t m, int64_t n, int64_t k, const void* a, const void* b, void* c, float beta) {
  const float alpha = 1.f;
  CHECK_BLAS(cublasGemmEx(blas.handle, blas.b_nk ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b,
                          CUDA_R_16F, blas.b_nk ? k : n, a, CUDA_R_16F, k,
                          &beta, c, CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// One cuBLASLt matmul (its first heuristic algorithm), with an optional epilogue.
class LtPlan {
 public:
  LtPlan(const Blas& blas, int64_t m, int64_t n, int64_t k, cublasLtEpilogue_t epilogue, const void* bias)
      : blas_(blas) {
    CHECK_BLAS(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
      CHECK_BLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
      CHECK_BLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    if (blas.b_nk) {  // B [N, K] row-major is column-major K x N: transposed
      const cublasOperation_t t = CUBLAS_OP_T;
      CHECK_BLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
      CHECK_BLAS(cublasLtMatrixLayoutCreate(&la_, CUDA_R_16F, k, n, k));
    } else {
      CHECK_BLAS(cublasLtMatrixLayoutCreate(&la_, CUDA_R_16F, n, k, n));  // B^T
    }
    CHECK_BLAS(cublasLtMatrixLayoutCreate(&lb_, CUDA_R_16F, k, m, k));  // A^T
    CHECK_BLAS(cublasLtMatrixLayoutCreate(&lc_, CUDA_R_16F, n, m, n));
    cublasLtMatmulPreference_t pref;
    CHECK_BLAS(cublasLtMatmulPreferenceCreate(&pref));
    CHECK_BLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &blas.workspace_bytes, sizeof(blas.workspace_bytes)));
    int found = 0;
    CHECK_BLAS(cublasLtMatmulAlgoGetHeuristic(blas.lt, desc_, la_, lb_, lc_, lc_, pref, 1, &heuristic_, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    if (found == 0) {
      std::fprintf(stderr, "cuBLASLt: no algorithm for %lldx%lldx%lld\n", (long long)m, (long long)n, (long long)k);
      std::exit(1);
    }
  }
  ~LtPlan() {
    cublasLtMatrixLayoutDestroy(la_);
    cublasLtMatrixLayoutDestroy(lb_);
    cublasLtMatrixLayoutDestroy(lc_);
    cublasLtMatmulDescDestroy(desc_);
  }
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;

  void Run(const void* a, const void* b, void* c, float beta) const { Run(a, b, c, c, beta); }
  // D = A·B (+ the epilogue) + beta C.
  void Run(const void* a, const void* b, const void* c, void* d, float beta) const {
    const float alpha = 1.f;
    CHECK_BLAS(cublasLtMatmul(blas_.lt, desc_, &alpha, b, la_, a, lb_, &beta, c, lc_, d, lc_, &heuristic_.algo,
                              blas_.workspace, blas_.workspace_bytes, blas_.stream));
  }

 private:
  const Blas& blas_;
  cublasLtMatmulDesc_t desc_;
  cublasLtMatrixLayout_t la_, lb_, lc_;
  cublasLtMatmulHeuristicResult_t heuristic_;
};

// ---------------------------------------------------------------------------------
// Timing and validation.

struct Options {
  std::vector<std::string> sets = {"squares", "transformer", "random"};
  // The five idioms of issue 5 (bias_gelu_erf is asked for by name).
  std::vector<Idiom> idioms = {Idiom::kGemm, Idiom::kBiasRelu, Idiom::kBiasGelu, Idiom::kReluGemm, Idiom::kDualGemm};
  int reps = 20;
  int warmup = 3;
  bool flush = true;
  bool sequential = false;  // --sequential: time each measurement's runs back to back (Timer::MedianMs)
  bool fixed_order = false;  // --fixed-order: every round in the same order (Timer::MedianMs)
  uint64_t seed = 20240805;
  int count = 100;
  double tolerance = 1e-2;
  std::string csv = "gemm.csv";
  std::string arch;  // default: the device's
  bool compile_only = false;
  std::string family = "sm80";  // GEMM family of kiln's kernels: sm80, or sm90 (sm_90a only)
  std::string sm90_config;      // forced sm90 tile config ("" : the heuristic)
  int sm_count = 0;             // the device's (the sm90 family's persistent grid)
  bool b_nk = false;            // --b-layout nk: B operands stored [N, K]
  std::vector<Problem> shapes;  // --shapes: these problems instead of the sets
  std::string dump_dir;         // --dump-kernels: write the kernels' sources and cubins here
  int sustain_ms = 0;           // --sustain: back-to-back launches for this long per measurement
};

// One measurement under --sustain: launches back to back, and the SM clock and board
// power sampled meanwhile (NVML).
struct Sustained {
  double ms = 0;        // per launch (GPU time of the window / launches)
  double mhz = std::numeric_limits<double>::quiet_NaN();  // mean SM clock in the window
  double watts = std::numeric_limits<double>::quiet_NaN();  // mean board power in the window
  long long launches = 0;
  // Board energy per launch (millijoules): mean power x time; NaN without NVML.
  double Mj() const { return watts * ms; }
};

class Timer {
 public:
  Timer(const Options& o, cudaStream_t stream, size_t l2_bytes, cudaKernel_t delay)
      : o_(o), stream_(stream), delay_(delay) {
    CHECK_CUDA(cudaEventCreate(&e0_));
    CHECK_CUDA(cudaEventCreate(&e1_));
    flush_bytes_ = std::max<size_t>(2 * l2_bytes, 8 << 20);
    if (o.flush) CHECK_CUDA(cudaMalloc(&flush_, flush_bytes_));
  }
  ~Timer() {
    cudaEventDestroy(e0_);
    cudaEventDestroy(e1_);
    if (flush_ != nullptr) cudaFree(flush_);
  }

  // Median milliseconds of `run` (everything it enqueues on the stream): its warm-up
  // runs, then --reps timed runs back to back.
  // (Never sustained: the peer probe.)
  double MedianMs(const std::function<void()>& run) {
    return MedianMs(std::vector<std::function<void()>>{run}, /*sustain=*/false)[0];
  }

  // Median milliseconds of each of `runs`. Interleaved (the default): every run's
  // warm-up runs, then --reps rounds of one timed run of each, so that a change of the
  // GPU's clock during the measurement reaches every run alike (the H100's SM clock
  // drops well below its boost clock early in a series of large GEMMs;
  // benchmarks/results/gemm_sm90_idiom_order_clocks_h100_2026-11-26g.csv). The rounds
  // rotate: round i starts at run i (mod n), because a run's place in a fixed order
  // moved some of them measurably
  // (benchmarks/results/gemm_sm90_round_order_h100_2026-11-27.csv.gz); --fixed-order
  // keeps one order. --sequential: each run's warm-up and timed runs back to back, one
  // run after the other (the bench's protocol before interleaved rounds).
  // --sustain (unless `sustain` is false): each run's Sustain, one after the other;
  // the time is its per-launch time, and sustained() holds the rest.
  std::vector<double> MedianMs(const std::vector<std::function<void()>>& runs, bool sustain = true) {
    if (sustain && o_.sustain_ms > 0) {
      sustained_.clear();
      std::vector<double> ms;
      for (const auto& run : runs) {
        sustained_.push_back(Sustain(run));
        ms.push_back(sustained_.back().ms);
      }
      return ms;
    }
    std::vector<std::vector<float>> ms(runs.size());
    if (o_.sequential) {
      for (size_t j = 0; j < runs.size(); ++j) {
        for (int i = 0; i < o_.warmup; ++i) runs[j]();
        for (int i = 0; i < o_.reps; ++i) ms[j].push_back(TimeOnce(runs[j], i));
      }
    } else {
      for (const auto& run : runs) {
        for (int i = 0; i < o_.warmup; ++i) run();
      }
      for (int i = 0; i < o_.reps; ++i) {
        // Round i starts at run i (mod n) unless --fixed-order: no run always follows
        // the same one or holds the same place in the round.
        const size_t first = o_.fixed_order ? 0 : static_cast<size_t>(i) % runs.size();
        for (size_t t = 0; t < runs.size(); ++t) {
          const size_t j = (first + t) % runs.size();
          ms[j].push_back(TimeOnce(runs[j], i));
        }
      }
    }
    std::vector<double> medians;
    for (std::vector<float>& m : ms) {
      std::sort(m.begin(), m.end());
      medians.push_back(m.size() % 2 ? m[m.size() / 2] : 0.5 * (m[m.size() / 2 - 1] + m[m.size() / 2]));
    }
    return medians;
  }

  // --sustain: what the last MedianMs measured, in the order of its runs.
  const std::vector<Sustained>& sustained() const { return sustained_; }
  void set_meter(const NvmlMeter* meter) { meter_ = meter; }

 private:
  // --sustain: `run` back to back (no flush, no spin) for half of --sustain ms to reach
  // the power state a long series reaches, then for --sustain ms measured: GPU time
  // between two events, launches, and the SM clock and power sampled every 10 ms by a
  // host thread (PowerSampler; energy per launch = mean power x time). Launches go in chunks of
  // about 2 ms, at most two in flight, so that the host's clock follows the GPU's.
  Sustained Sustain(const std::function<void()>& run) {
    using Clock = std::chrono::steady_clock;
    float once = Elapsed(run);  // the least of three (the first may load modules)
    for (int i = 0; i < 2; ++i) once = std::min(once, Elapsed(run));
    const int chunk = std::clamp(static_cast<int>(2.0 / std::max(once, 1e-3f)), 1, 4096);
    // Two chunks in flight: the host waits for the one before the chunk it just queued,
    // so the GPU never runs dry between chunks.
    cudaEvent_t queued[2];
    for (cudaEvent_t& e : queued) CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    auto launch_for = [&](double ms, long long* launches) {
      const auto end = Clock::now() + std::chrono::microseconds(static_cast<long long>(ms * 1000));
      for (long long c = 0; Clock::now() < end; ++c) {
        for (int i = 0; i < chunk; ++i) run();
        *launches += chunk;
        CHECK_CUDA(cudaEventRecord(queued[c % 2], stream_));
        if (c > 0) CHECK_CUDA(cudaEventSynchronize(queued[(c - 1) % 2]));
      }
      CHECK_CUDA(cudaStreamSynchronize(stream_));
    };
    long long ramp = 0;
    launch_for(0.5 * o_.sustain_ms, &ramp);
    Sustained s;
    std::optional<PowerSampler> sampler;
    if (meter_ != nullptr) sampler.emplace(*meter_);
    CHECK_CUDA(cudaEventRecord(e0_, stream_));
    launch_for(o_.sustain_ms, &s.launches);
    CHECK_CUDA(cudaEventRecord(e1_, stream_));
    CHECK_CUDA(cudaEventSynchronize(e1_));
    const PowerReading power = sampler ? sampler->Stop() : PowerReading{};
    for (cudaEvent_t e : queued) CHECK_CUDA(cudaEventDestroy(e));
    float window = 0;
    CHECK_CUDA(cudaEventElapsedTime(&window, e0_, e1_));
    s.ms = s.launches > 0 ? window / static_cast<double>(s.launches) : 0;
    if (power.samples > 0) {
      s.mhz = power.mean_sm_mhz;
      s.watts = power.mean_watts;
    }
    return s;
  }

  // One timed run of `run` after the flush (or the spin kernel): milliseconds.
  float TimeOnce(const std::function<void()>& run, int i) {
    if (flush_ != nullptr) {
      CHECK_CUDA(cudaMemsetAsync(flush_, i & 1, flush_bytes_, stream_));
    } else {
      long long ns = 50000;
      void* args[] = {&ns};
      CHECK_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(delay_), dim3(1), dim3(1), args, 0, stream_));
    }
    return Elapsed(run);
  }

  // Milliseconds of `run` between two events, waited for.
  float Elapsed(const std::function<void()>& run) {
    CHECK_CUDA(cudaEventRecord(e0_, stream_));
    run();
    CHECK_CUDA(cudaEventRecord(e1_, stream_));
    CHECK_CUDA(cudaEventSynchronize(e1_));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, e0_, e1_));
    return t;
  }

  const Options& o_;
  cudaStream_t stream_;
  cudaKernel_t delay_;
  cudaEvent_t e0_, e1_;
  void* flush_ = nullptr;
  size_t flush_bytes_;
  const NvmlMeter* meter_ = nullptr;  // --sustain's energy and clocks (nullptr: none)
  std::vector<Sustained> sustained_;
};

class Device {
 public:
  Device(cudaStream_t stream, cudaKernel_t fill, cudaKernel_t error) : stream_(stream), fill_(fill), error_(error) {
    CHECK_CUDA(cudaMalloc(&result_, sizeof(unsigned int)));
  }
  ~Device() { cudaFree(result_); }

  void Fill(void* p, int64_t n, uint64_t seed, float scale) {
    long long count = n;
    void* args[] = {&p, &count, &seed, &scale};
    CHECK_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(fill_), dim3(1024), dim3(256), args, 0, stream_));
  }
  // Fills with fp16 NaN, so that a kernel that writes nothing fails validation.
  void Poison(void* p, int64_t n) { CHECK_CUDA(cudaMemsetAsync(p, 0xff, n * 2, stream_)); }

  float MaxRelError(const void* got, const void* want, int64_t n) {
    long long count = n;
    void* args[] = {&got, &want, &count, &result_};
    CHECK_CUDA(cudaMemsetAsync(result_, 0, sizeof(unsigned int), stream_));
    CHECK_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(error_), dim3(1024), dim3(256), args, 0, stream_));
    unsigned int bits = 0;
    CHECK_CUDA(cudaMemcpyAsync(&bits, result_, sizeof(bits), cudaMemcpyDeviceToHost, stream_));
    CHECK_CUDA(cudaStreamSynchronize(stream_));
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }

 private:
  cudaStream_t stream_;
  cudaKernel_t fill_, error_;
  void* result_ = nullptr;  // one unsigned int
};

// ---------------------------------------------------------------------------------
// Results.

struct Row {
  Problem p;
  Idiom idiom;
  std::string status;  // OK, FAIL, n/a
  std::string note;    // why n/a or FAIL
  std::string config;
  double kiln_ms = kNaN, a_ms = kNaN, b_ms = kNaN;
  double err = kNaN, peer_err = kNaN;
  Sustained kiln_s, a_s, b_s;  // --sustain (the *_ms above are then their per-launch times)

  double Flops() const { return (idiom == Idiom::kDualGemm ? 4.0 : 2.0) * p.m * p.n * p.k; }
  double BestPeerMs() const { return std::isnan(b_ms) ? a_ms : std::isnan(a_ms) ? b_ms : std::min(a_ms, b_ms); }
  double Speedup(double peer_ms) const { return status == "OK" ? peer_ms / kiln_ms : kNaN; }
};

std::string Num(double v, int precision = 4) {
  if (std::isnan(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
  return buf;
}
std::string Fixed(double v, int decimals) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}
std::string ShapeName(const Problem& p) { return absl::StrCat(p.m, "x", p.n, "x", p.k); }

void PrintRow(const Row& r) {
  std::printf("%-11s %-16s %-9s %9s %7s %9s %9s %6s %6s %6s %8s %s%s%s\n", r.p.set.c_str(), ShapeName(r.p).c_str(),
              IdiomName(r.idiom), Fixed(r.kiln_ms, 4).c_str(), Fixed(r.Flops() / r.kiln_ms / 1e9, 1).c_str(),
              Fixed(r.a_ms, 4).c_str(), Fixed(r.b_ms, 4).c_str(), Fixed(r.Speedup(r.a_ms), 2).c_str(),
              Fixed(r.Speedup(r.b_ms), 2).c_str(), Fixed(r.Speedup(r.BestPeerMs()), 2).c_str(),
              std::isnan(r.err) ? "-" : Num(r.err, 2).c_str(), r.status.c_str(), r.note.empty() ? "" : ": ",
              r.note.c_str());
  std::fflush(stdout);
}

// --sustain's columns of one measurement: energy per launch (mJ), mean SM clock, mean power.
std::string SustainedCsv(const Sustained& s) {
  return absl::StrCat(Num(s.Mj(), 4), ",", Num(s.mhz, 4), ",", Num(s.watts, 4));
}

// --sustain: per measurement, energy per launch, mean SM clock and power, and kiln's
// energy per launch over each peer's.
void PrintSustained(const Row& r) {
  auto one = [](const char* who, const Sustained& s) {
    if (!(s.ms > 0)) return std::string();
    return absl::StrCat("  ", who, " ", Fixed(s.ms * 1000, 2), " us/launch ", Fixed(s.Mj(), 3), " mJ ", Fixed(s.mhz, 0),
                        " MHz ", Fixed(s.watts, 0), " W");
  };
  std::printf("  sustained:%s%s%s", one("kiln", r.kiln_s).c_str(), one("peer_a", r.a_s).c_str(),
              one("peer_b", r.b_s).c_str());
  if (r.kiln_s.Mj() > 0 && r.a_s.Mj() > 0) std::printf("  energy kiln/peer_a %.3f", r.kiln_s.Mj() / r.a_s.Mj());
  if (r.kiln_s.Mj() > 0 && r.b_s.Mj() > 0) std::printf(" kiln/peer_b %.3f", r.kiln_s.Mj() / r.b_s.Mj());
  std::printf("\n");
  std::fflush(stdout);
}

void WriteCsv(const std::string& path, const std::vector<Row>& rows, bool sustained) {
  std::ofstream csv(path);
  csv << "set,m,n,k,idiom,status,kiln_ms,kiln_tflops,kiln_config,peer_a,peer_a_ms,peer_b,peer_b_ms,best_peer_ms,"
         "speedup_vs_a,speedup_vs_b,speedup_vs_best,max_rel_err,peer_rel_err,note"
      << (sustained ? ",kiln_mj,kiln_mhz,kiln_w,peer_a_mj,peer_a_mhz,peer_a_w,peer_b_mj,peer_b_mhz,peer_b_w" : "")
      << "\n";
  for (const Row& r : rows) {
    std::string note = r.note;
    std::replace(note.begin(), note.end(), ',', ';');
    std::replace(note.begin(), note.end(), '\n', ' ');
    csv << r.p.set << "," << r.p.m << "," << r.p.n << "," << r.p.k << "," << IdiomName(r.idiom) << "," << r.status
        << "," << Num(r.kiln_ms, 6) << "," << Num(r.Flops() / r.kiln_ms / 1e9) << "," << r.config << ","
        << PeerA(r.idiom) << "," << Num(r.a_ms, 6) << "," << PeerB(r.idiom) << "," << Num(r.b_ms, 6) << ","
        << Num(r.BestPeerMs(), 6) << "," << Num(r.Speedup(r.a_ms)) << "," << Num(r.Speedup(r.b_ms)) << ","
        << Num(r.Speedup(r.BestPeerMs())) << "," << Num(r.err, 3) << "," << Num(r.peer_err, 3) << "," << note;
    if (sustained) csv << "," << SustainedCsv(r.kiln_s) << "," << SustainedCsv(r.a_s) << "," << SustainedCsv(r.b_s);
    csv << "\n";
  }
}

struct Stats {
  int n = 0;
  double geomean = kNaN, best = kNaN, worst = kNaN;
};
Stats Summarize(const std::vector<double>& xs) {
  Stats s;
  double log_sum = 0;
  for (double x : xs) {
    if (std::isnan(x)) continue;
    ++s.n;
    log_sum += std::log(x);
    s.best = std::isnan(s.best) ? x : std::max(s.best, x);
    s.worst = std::isnan(s.worst) ? x : std::min(s.worst, x);
  }
  if (s.n > 0) s.geomean = std::exp(log_sum / s.n);
  return s;
}

void PrintSummary(const std::vector<Row>& rows, const Options& o) {
  std::printf(
      "\nSummary: speedup = peer time / kiln time (> 1: kiln faster), over the rows that passed validation\n"
      "%-10s %-12s %5s %5s %5s | %-30s | %-22s | %-22s\n",
      "idiom", "set", "ok", "fail", "n/a", "vs fastest peer: geomean best worst", "vs peer A: geo best worst",
      "vs peer B: geo best worst");
  std::vector<std::string> sets = o.sets;
  if (sets.size() > 1) sets.push_back("all");
  for (Idiom idiom : o.idioms) {
    for (const std::string& set : sets) {
      std::vector<double> best, a, b;
      int fail = 0, na = 0;
      for (const Row& r : rows) {
        if (r.idiom != idiom || (set != "all" && r.p.set != set)) continue;
        fail += r.status == "FAIL";
        na += r.status == "n/a";
        best.push_back(r.Speedup(r.BestPeerMs()));
        a.push_back(r.Speedup(r.a_ms));
        b.push_back(r.Speedup(r.b_ms));
      }
      const Stats s = Summarize(best), sa = Summarize(a), sb = Summarize(b);
      auto three = [](const Stats& st) {
        return absl::StrCat(Fixed(st.geomean, 3), " ", Fixed(st.best, 3), " ", Fixed(st.worst, 3));
      };
      std::printf("%-10s %-12s %5d %5d %5d | %-30s | %-22s | %-22s\n", IdiomName(idiom), set.c_str(), s.n, fail, na,
                  three(s).c_str(), three(sa).c_str(), three(sb).c_str());
    }
  }
}

// ---------------------------------------------------------------------------------
// The benchmark.

// Everything generated for one problem, before any GPU work.
struct ProblemKernels {
  std::map<Idiom, absl::StatusOr<Generated>> kiln;
  absl::StatusOr<Generated> bias_relu = absl::UnknownError(""), bias_gelu = absl::UnknownError("");
  absl::StatusOr<Generated> bias_gelu_erf = absl::UnknownError(""), bias_residual = absl::UnknownError("");
  absl::StatusOr<Generated> relu_a = absl::UnknownError(""), add = absl::UnknownError("");
};

bool Has(const Options& o, Idiom i) { return std::find(o.idioms.begin(), o.idioms.end(), i) != o.idioms.end(); }

ProblemKernels GenerateProblem(const Options& o, const Problem& p, KernelTable& table) {
  ProblemKernels pk;
  // Generated keeps no pointer into the graph, which is dropped here.
  auto gen = [&](const absl::StatusOr<Built>& b) -> absl::StatusOr<Generated> {
    if (!b.ok()) return b.status();
    std::optional<codegen::ops::Sm90GemmConfig> forced;
    if (!o.sm90_config.empty()) {
      absl::StatusOr<codegen::ops::Sm90GemmConfig> c = codegen::ops::ParseSm90GemmConfig(o.sm90_config);
      if (!c.ok()) return c.status();
      forced = *c;
    }
    return Generate(*b->node, table, o.family == "sm90", o.sm_count, forced ? &*forced : nullptr);
  };
  for (Idiom i : o.idioms) pk.kiln.emplace(i, gen(KilnGroup(i, p.m, p.n, p.k, o.b_nk)));
  if (Has(o, Idiom::kBiasRelu)) pk.bias_relu = gen(BiasActGroup(Idiom::kBiasRelu, p.m, p.n));
  if (Has(o, Idiom::kBiasGelu)) pk.bias_gelu = gen(BiasActGroup(Idiom::kBiasGelu, p.m, p.n));
  if (Has(o, Idiom::kBiasGeluErf)) pk.bias_gelu_erf = gen(BiasActGroup(Idiom::kBiasGeluErf, p.m, p.n));
  if (Has(o, Idiom::kBiasResidual)) pk.bias_residual = gen(BiasResidualGroup(p.m, p.n));
  if (Has(o, Idiom::kReluGemm)) pk.relu_a = gen(ReluNode(p.m, p.k));
  if (Has(o, Idiom::kDualGemm)) pk.add = gen(AddNode(p.m, p.n));
  return pk;
}

void RequireOk(const absl::StatusOr<Generated>& g, const char* what) {
  if (!g.ok()) {
    std::fprintf(stderr, "cannot generate the peers' %s kernel: %s\n", what, std::string(g.status().message()).c_str());
    std::exit(1);
  }
}

int Main(Options o) {
  std::vector<Problem> problems = o.shapes;
  for (const std::string& set : o.shapes.empty() ? o.sets : std::vector<std::string>()) {
    std::vector<Problem> p = set == "squares"       ? Squares()
                             : set == "transformer" ? Transformer()
                             : set == "random"      ? Random(o.seed, o.count)
                             : set == "small_m"     ? SmallM()
                                                    : Smoke();
    problems.insert(problems.end(), p.begin(), p.end());
  }

  int device_count = 0;
  const bool have_gpu = cudaGetDeviceCount(&device_count) == cudaSuccess && device_count > 0;
  if (!have_gpu) cudaGetLastError();
  if (!have_gpu && !o.compile_only) {
    std::fprintf(stderr, "no CUDA device (use --compile-only [--arch sm_90a] to generate and compile only)\n");
    return kNoDevice;
  }
  cudaDeviceProp prop{};
  std::string arch = o.arch;
  if (have_gpu) {
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    if (arch.empty()) arch = prop.major == 9 ? "sm_90a" : prop.major == 8 ? absl::StrCat("sm_8", prop.minor) : "sm_80";
  }
  if (arch.empty()) arch = "sm_90a";
  if (have_gpu) o.sm_count = prop.multiProcessorCount;
  if (o.family == "sm90" && arch != "sm_90a") {
    std::fprintf(stderr, "--family sm90 needs an sm_90a target (this is %s)\n", arch.c_str());
    return 1;
  }

  // 1. Generate every kernel and compile them all, in parallel, before timing.
  const auto t0 = std::chrono::steady_clock::now();
  KernelTable table;
  const int fill_id = table.Add(kFillSource), error_id = table.Add(kErrorSource), delay_id = table.Add(kDelaySource);
  std::vector<ProblemKernels> generated;
  int launches = 0;
  for (const Problem& p : problems) {
    generated.push_back(GenerateProblem(o, p, table));
    for (auto& [idiom, g] : generated.back().kiln) launches += g.ok() ? g->launches.size() : 0;
  }
  const auto t1 = std::chrono::steady_clock::now();
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  // Modules of a few kernels amortise the prelude while keeping every core busy.
  const int per_module = std::clamp(table.size() / (4 * threads), 1, 8);
  int modules = 0;
  if (absl::Status s = table.Compile(arch, per_module, have_gpu && !o.compile_only, &modules, o.dump_dir); !s.ok()) {
    std::fprintf(stderr, "compile: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  const auto t2 = std::chrono::steady_clock::now();
  const double gen_s = std::chrono::duration<double>(t1 - t0).count();
  const double compile_s = std::chrono::duration<double>(t2 - t1).count();
  std::printf("%zu problems, %zu idioms: generated %d distinct kernels in %.2f s (kiln: %d launches); NVRTC %s for %s: "
              "%d modules of <= %d kernels on %d threads in %.1f s\n",
              problems.size(), o.idioms.size(), table.size(), gen_s, launches, codegen::NvrtcVersion().c_str(),
              arch.c_str(), modules, per_module, threads, compile_s);
  std::printf("B operands stored %s\n", o.b_nk ? "[N, K] (--b-layout nk)" : "[K, N] (--b-layout kn)");
  for (Idiom i : o.idioms) {
    const auto& g = generated.empty() ? absl::StatusOr<Generated>(absl::UnknownError("")) : generated[0].kiln.at(i);
    if (!g.ok()) std::printf("kiln %s: %s\n", IdiomName(i), std::string(g.status().message()).c_str());
  }
  if (o.compile_only) return 0;

  // 2. Buffers, sized for the largest problem.
  int64_t mk = 0, kn = 0, mn = 0, nmax = 0;
  for (const Problem& p : problems) {
    mk = std::max(mk, p.m * p.k);
    kn = std::max(kn, p.k * p.n);
    mn = std::max(mn, p.m * p.n);
    nmax = std::max(nmax, p.n);
  }
  const bool dual = Has(o, Idiom::kDualGemm), residual = Has(o, Idiom::kBiasResidual);
  std::map<std::string, int64_t> sizes = {{"a", mk},     {"b", kn},     {"bias", nmax}, {"kiln", mn}, {"ref", mn},
                                          {"other", mn}, {"tmp", mn},   {"relu_a", Has(o, Idiom::kReluGemm) ? mk : 0},
                                          {"a2", dual ? mk : 0}, {"b2", dual ? kn : 0}, {"tmp2", dual ? mn : 0},
                                          {"residual", residual ? mn : 0}};
  std::map<std::string, void*> buf;
  size_t total = 0;
  for (const auto& [name, n] : sizes) {
    buf[name] = nullptr;
    if (n > 0) CHECK_CUDA(cudaMalloc(&buf[name], n * 2));
    total += n * 2;
  }

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Blas blas{stream, nullptr, nullptr, nullptr, 32 << 20, o.b_nk};
  CHECK_BLAS(cublasCreate(&blas.handle));
  CHECK_BLAS(cublasSetStream(blas.handle, stream));
  CHECK_BLAS(cublasLtCreate(&blas.lt));
  CHECK_CUDA(cudaMalloc(&blas.workspace, blas.workspace_bytes));
  Timer timer(o, stream, prop.l2CacheSize, table.handle(delay_id));
  std::unique_ptr<NvmlMeter> meter;
  if (o.sustain_ms > 0) {
    absl::StatusOr<std::unique_ptr<NvmlMeter>> m = OpenCurrentDeviceMeter();  // the device timed
    if (m.ok()) {
      meter = *std::move(m);
      timer.set_meter(meter.get());
    } else {
      std::printf("note: --sustain without energy and clocks: %s\n", std::string(m.status().message()).c_str());
    }
  }
  Device dev(stream, table.handle(fill_id), table.handle(error_id));

  std::printf(
      "%s (%s, %d SMs, L2 %d MiB), CUDA runtime %d, cuBLAS %d; fp16 in/out, fp32 accumulate; %d warm-up + median of "
      "%d timed runs, L2 %s; %.1f GiB of buffers; tolerance %g (max |kiln - ref| / max(1, |ref|))\n",
      prop.name, arch.c_str(), prop.multiProcessorCount, prop.l2CacheSize >> 20, CUDART_VERSION, CUBLAS_VERSION,
      o.warmup, o.reps, o.flush ? "flushed before every timed run" : "not flushed (warm; a 50 us spin kernel queues each run)", total / 1073741824.0,
      o.tolerance);
  if (std::find(o.sets.begin(), o.sets.end(), "random") != o.sets.end()) {
    std::printf("seed protocol: %d random (M, N, K), multiples of 128 in [128, 4096], mt19937_64 seed %llu\n", o.count,
                (unsigned long long)o.seed);
  }
  std::printf("peers (A / B):\n");
  for (Idiom i : o.idioms) std::printf("  %-10s A = %-22s B = %s\n", IdiomName(i), PeerA(i), *PeerB(i) ? PeerB(i) : "-");
  std::printf(
      "  (\"cublas\" inside a composite peer = whichever of cublasGemmEx and cuBLASLt was faster for the plain GEMM of "
      "that shape; the separate kernels are kiln's generated pointwise kernels)\n\n");
  std::printf("%-11s %-16s %-9s %9s %7s %9s %9s %6s %6s %6s %8s %s\n", "set", "M x N x K", "idiom", "kiln ms", "TF/s",
              "A ms", "B ms", "x A", "x B", "x best", "max err", "status");

  // 3. Per problem: fill the inputs, run and check every peer and kiln once, then time
  // them all together.
  std::vector<Row> rows;
  for (size_t pi = 0; pi < problems.size(); ++pi) {
    const Problem& p = problems[pi];
    const ProblemKernels& pk = generated[pi];
    const int64_t m = p.m, n = p.n, k = p.k;
    const float b_scale = 3.f / std::sqrt(static_cast<float>(k));  // |out| ~ 1
    const uint64_t seed = o.seed * 1000003 + pi * 16;
    dev.Fill(buf["a"], m * k, seed + 1, 1.f);
    dev.Fill(buf["b"], k * n, seed + 2, b_scale);
    dev.Fill(buf["bias"], n, seed + 3, 1.f);
    if (dual) {
      dev.Fill(buf["a2"], m * k, seed + 4, 1.f);
      dev.Fill(buf["b2"], k * n, seed + 5, b_scale);
    }
    if (residual) dev.Fill(buf["residual"], m * n, seed + 6, 1.f);

    // The plain GEMM of both APIs first (a probe, back to back): composite peers use
    // the faster one. The rows report both from the rounds below.
    LtPlan lt_plain(blas, m, n, k, CUBLASLT_EPILOGUE_DEFAULT, nullptr);
    auto gemm_ex = [&] { GemmEx(blas, m, n, k, buf["a"], buf["b"], buf["ref"], 0.f); };
    auto gemm_lt = [&] { lt_plain.Run(buf["a"], buf["b"], buf["other"], 0.f); };
    const bool use_lt = timer.MedianMs(gemm_lt) < timer.MedianMs(gemm_ex);
    auto cublas = [&](const void* a, const void* b, void* c, float beta) {
      if (use_lt) {
        lt_plain.Run(a, b, c, beta);
      } else {
        GemmEx(blas, m, n, k, a, b, c, beta);
      }
    };

    // Per idiom: its peers and kiln's kernels, checked once each; what passed is timed
    // afterwards, all of this problem's runs together (Timer::MedianMs).
    struct IdiomRun {
      Row r;
      std::function<void()> peer_a, peer_b;
      std::unique_ptr<LtPlan> lt_epi;
      std::unique_ptr<Bound> separate, kiln;
    };
    std::vector<std::unique_ptr<IdiomRun>> runs;
    std::vector<std::function<void()>> timed;  // the runs to time, and where each median goes
    std::vector<double*> medians;
    std::vector<Sustained*> sustained;  // --sustain: where each timed run's measurement goes
    for (Idiom idiom : o.idioms) {
      runs.push_back(std::make_unique<IdiomRun>(IdiomRun{Row{p, idiom}}));
      IdiomRun* const x = runs.back().get();
      Row& r = x->r;
      // Peers: A's output is the reference (written to "ref"); B's goes to "other".
      switch (idiom) {
        case Idiom::kGemm:
          x->peer_a = gemm_ex;
          x->peer_b = gemm_lt;
          break;
        case Idiom::kBiasRelu:
        case Idiom::kBiasGelu: {
          const bool gelu = idiom == Idiom::kBiasGelu;
          x->lt_epi = std::make_unique<LtPlan>(blas, m, n, k,
                                               gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_RELU_BIAS,
                                               buf["bias"]);
          const auto& g = gelu ? pk.bias_gelu : pk.bias_relu;
          RequireOk(g, gelu ? "bias+GELU" : "bias+ReLU");
          x->separate = std::make_unique<Bound>(*g, table,
                                                std::map<std::string, void*>{{"y", buf["tmp"]}, {"bias", buf["bias"]},
                                                                             {"out", buf["other"]}});
          x->peer_a = [&, x] { x->lt_epi->Run(buf["a"], buf["b"], buf["ref"], 0.f); };
          x->peer_b = [&, x] {
            cublas(buf["a"], buf["b"], buf["tmp"], 0.f);
            x->separate->Run(stream);
          };
          break;
        }
        case Idiom::kBiasGeluErf:
          RequireOk(pk.bias_gelu_erf, "bias+GELU(erf)");
          x->separate = std::make_unique<Bound>(*pk.bias_gelu_erf, table,
                                                std::map<std::string, void*>{{"y", buf["tmp"]}, {"bias", buf["bias"]},
                                                                             {"out", buf["ref"]}});
          x->peer_a = [&, x] {
            cublas(buf["a"], buf["b"], buf["tmp"], 0.f);
            x->separate->Run(stream);
          };
          break;
        case Idiom::kBiasResidual:
          RequireOk(pk.bias_residual, "bias+residual");
          x->lt_epi = std::make_unique<LtPlan>(blas, m, n, k, CUBLASLT_EPILOGUE_BIAS, buf["bias"]);
          x->separate = std::make_unique<Bound>(*pk.bias_residual, table,
                                                std::map<std::string, void*>{{"y", buf["tmp"]},
                                                                             {"bias", buf["bias"]},
                                                                             {"residual", buf["residual"]},
                                                                             {"out", buf["other"]}});
          x->peer_a = [&, x] { x->lt_epi->Run(buf["a"], buf["b"], buf["residual"], buf["ref"], 1.f); };
          x->peer_b = [&, x] {
            cublas(buf["a"], buf["b"], buf["tmp"], 0.f);
            x->separate->Run(stream);
          };
          break;
        case Idiom::kReluGemm:
          RequireOk(pk.relu_a, "ReLU");
          x->separate = std::make_unique<Bound>(
              *pk.relu_a, table, std::map<std::string, void*>{{"a", buf["a"]}, {"out", buf["relu_a"]}});
          x->peer_a = [&, x] {
            x->separate->Run(stream);
            cublas(buf["relu_a"], buf["b"], buf["ref"], 0.f);
          };
          break;
        case Idiom::kDualGemm:
          RequireOk(pk.add, "add");
          x->separate = std::make_unique<Bound>(
              *pk.add, table, std::map<std::string, void*>{{"p", buf["tmp"]}, {"q", buf["tmp2"]}, {"out", buf["other"]}});
          x->peer_a = [&] {
            cublas(buf["a"], buf["b"], buf["ref"], 0.f);
            cublas(buf["a2"], buf["b2"], buf["ref"], 1.f);
          };
          x->peer_b = [&, x] {
            cublas(buf["a"], buf["b"], buf["tmp"], 0.f);
            cublas(buf["a2"], buf["b2"], buf["tmp2"], 0.f);
            x->separate->Run(stream);
          };
          break;
      }
      // Check the peers against each other.
      dev.Poison(buf["ref"], m * n);
      x->peer_a();
      if (x->peer_b) {
        dev.Poison(buf["other"], m * n);
        x->peer_b();
        r.peer_err = dev.MaxRelError(buf["other"], buf["ref"], m * n);
      }

      // Once: the validator must see a buffer nothing wrote (NaN) and a wrong result.
      if (rows.empty() && runs.size() == 1) {
        dev.Poison(buf["kiln"], m * n);
        const float unwritten = dev.MaxRelError(buf["kiln"], buf["ref"], m * n);
        const float wrong = dev.MaxRelError(buf["bias"], buf["ref"], std::min(m * n, n));
        if (!std::isinf(unwritten) || !(wrong > o.tolerance)) {
          std::fprintf(stderr, "validator self-test failed (unwritten: %g, wrong: %g)\n", unwritten, wrong);
          return 1;
        }
      }
      // kiln: check against peer A's output (in "ref" now).
      const absl::StatusOr<Generated>& g = pk.kiln.at(idiom);
      if (!g.ok()) {
        r.status = g.status().code() == absl::StatusCode::kUnimplemented ? "n/a" : "FAIL";
        r.note = std::string(g.status().message());
        if (r.status == "n/a") r.note = "no kiln kernel yet";
      } else {
        r.config = g->config;
        x->kiln = std::make_unique<Bound>(*g, table,
                                          std::map<std::string, void*>{{"a", buf["a"]},
                                                                       {"b", buf["b"]},
                                                                       {"a2", buf["a2"]},
                                                                       {"b2", buf["b2"]},
                                                                       {"bias", buf["bias"]},
                                                                       {"residual", buf["residual"]},
                                                                       {"out", buf["kiln"]}});
        dev.Poison(buf["kiln"], m * n);
        x->kiln->Run(stream);
        r.err = dev.MaxRelError(buf["kiln"], buf["ref"], m * n);
        if (!(r.err <= o.tolerance)) {
          r.status = "FAIL";
          r.note = "kiln's result differs from the peer's";
        } else if (!(std::isnan(r.peer_err) || r.peer_err <= o.tolerance)) {
          r.status = "FAIL";
          r.note = absl::StrCat("the peers disagree (", Num(r.peer_err, 3), ")");
        } else {
          r.status = "OK";
        }
      }
      timed.push_back(x->peer_a);
      medians.push_back(&r.a_ms);
      sustained.push_back(&r.a_s);
      if (x->peer_b) {
        timed.push_back(x->peer_b);
        medians.push_back(&r.b_ms);
        sustained.push_back(&r.b_s);
      }
      if (r.status == "OK") {
        timed.push_back([&, x] { x->kiln->Run(stream); });
        medians.push_back(&r.kiln_ms);
        sustained.push_back(&r.kiln_s);
      }
    }
    const std::vector<double> ms = timer.MedianMs(timed);
    for (size_t i = 0; i < ms.size(); ++i) {
      if (!(ms[i] > 0)) {  // a harness bug, not a result
        std::fprintf(stderr, "timing %lldx%lldx%lld: run %zu of %zu has no time (%g ms)\n", (long long)m,
                     (long long)n, (long long)k, i, ms.size(), ms[i]);
        return 1;
      }
      *medians[i] = ms[i];
      if (o.sustain_ms > 0) *sustained[i] = timer.sustained()[i];
    }
    for (auto& x : runs) {
      PrintRow(x->r);
      if (o.sustain_ms > 0) PrintSustained(x->r);
      rows.push_back(std::move(x->r));
    }
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));

  PrintSummary(rows, o);
  WriteCsv(o.csv, rows, o.sustain_ms > 0);
  std::printf("wrote %s (plot: benchmarks/plot_gemm.sh %s)\n", o.csv.c_str(), o.csv.c_str());
  cublasLtDestroy(blas.lt);
  cublasDestroy(blas.handle);
  for (auto& [name, p] : buf) cudaFree(p);
  cudaFree(blas.workspace);
  int failed = 0;
  for (const Row& r : rows) failed += r.status == "FAIL";
  return failed > 0 ? 2 : 0;
}

constexpr char kUsage[] =
    "usage: kiln_gemm_bench [--set squares|transformer|random|small_m|all[,...]] [--smoke]\n"
    "                       [--shapes MxNxK[,MxNxK...]]\n"
    "                       [--idioms gemm,bias_relu,bias_gelu,relu_gemm,dual_gemm,bias_gelu_erf,bias_residual]\n"
    "                       [--reps N]\n"
    "                       [--warmup N]\n"
    "                       [--no-flush] [--sequential | --fixed-order] [--seed S] [--count N] [--tol X] [--csv out.csv]\n"
    "                       [--compile-only [--arch sm_90a|sm_89|sm_86|sm_80]] [--family sm80|sm90]\n"
    "                       [--dump-kernels DIR]\n"
    "                       [--b-layout kn|nk] [--sustain MS]\n"
    "  --set      shape sets (default all): squares 1024..8192; transformer tokens {128..16384} x (N, K)\n"
    "             of BERT/GPT-2 layers; random: the seed protocol (--count problems, multiples of 128 up to\n"
    "             4096, drawn from --seed); small_m: M in {1, 8, 16, 32, 64} x N, K in {768, 3072, 4096}\n"
    "             (not in all)\n"
    "  --smoke    three small problems instead (a quick check of the harness)\n"
    "  --shapes   these problems instead of the sets (set column \"shapes\"), e.g. 4096x4096x4096,128x768x3072\n"
    "  --idioms   default: the first five; bias_gelu_erf (GELU's erf form) and bias_residual only when named\n"
    "  --reps     timed runs per measurement, the median is reported (default 20); --warmup (default 3)\n"
    "  --no-flush keep L2 warm between timed runs (default: flushed before every run)\n"
    "  --sustain MS  instead of --reps: each measurement's kernel back to back (no flush, no gaps) for\n"
    "             MS/2 ms, then MS ms timed: time per launch, and from NVML (the driver's libnvidia-ml)\n"
    "             mean SM clock and power, and energy per launch = power x time (extra CSV columns\n"
    "             kiln_mj, kiln_mhz, kiln_w, peer_a_*, peer_b_*): what a long series at the power cap\n"
    "             costs each kernel\n"
    "  --sequential  time each measurement's runs back to back, one measurement after the other\n"
    "             (default: per problem, rounds of one timed run of every peer and kiln kernel, so that\n"
    "             clock changes during the measurement reach all of them alike; round i starts at the\n"
    "             problem's i-th run, so no run always holds the same place)\n"
    "  --fixed-order  every round in the same order (the order that earlier runs used)\n"
    "  --compile-only  generate and NVRTC-compile everything, print the compile time, no GPU needed\n"
    "  --dump-kernels DIR  also write every kiln kernel's source (kiln_bench_N.cu, the CSV's order of\n"
    "             first use) and each compiled module (module_M.cubin) into DIR (created if missing)\n"
    "  --family   kiln's GEMM template family (default sm80): sm90 is the Hopper TMA + wgmma family\n"
    "             (sm_90a only) for the groups it takes, the others stay on sm80; the config column says\n"
    "             which ran (sm90_... or the sm80 tile); --sm90-config \"64x256 p2x1 s5\" forces a tile config\n"
    "  --b-layout the layout of every B operand (kiln and the peers alike): kn = row-major [K, N] (default,\n"
    "             the layout kiln stores constant weights in), nk = [N, K] (MatMul trans_b; nn.Linear's)\n"
    "             (\"64x128 c1x1 s8 k4\": split-K in 4; \"128x256 c2x1 s4 cl2\": clusters of 2 sharing B;\n"
    "             \"128x256 c2x1 s4 sk\": stream-K)\n"
    "exit status: 0, 2 when some kiln result failed validation, 77 without a CUDA device (unless\n"
    "             --compile-only)\n";

int ParseAndRun(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n%s", arg.c_str(), kUsage);
        std::exit(1);
      }
      return argv[++i];
    };
    auto integer = [&](int min) -> int64_t {
      const std::string v = value();
      int64_t x = 0;
      if (!absl::SimpleAtoi(v, &x) || x < min) {
        std::fprintf(stderr, "%s: expected an integer >= %d, got '%s'\n", arg.c_str(), min, v.c_str());
        std::exit(1);
      }
      return x;
    };
    if (arg == "--set") {
      o.sets.clear();
      for (const std::string& s : std::vector<std::string>(absl::StrSplit(value(), ',', absl::SkipEmpty()))) {
        if (s == "all") {
          o.sets.insert(o.sets.end(), {"squares", "transformer", "random"});
        } else if (s == "squares" || s == "transformer" || s == "random" || s == "small_m") {
          o.sets.push_back(s);
        } else {
          std::fprintf(stderr, "--set: unknown set '%s' (squares, transformer, random, small_m, all)\n", s.c_str());
          return 1;
        }
      }
    } else if (arg == "--smoke") {
      o.sets = {"smoke"};
    } else if (arg == "--shapes") {
      o.shapes.clear();
      for (const std::string& t : std::vector<std::string>(absl::StrSplit(value(), ',', absl::SkipEmpty()))) {
        const std::vector<std::string> d = absl::StrSplit(t, 'x');
        int64_t m = 0, n = 0, k = 0;
        if (d.size() != 3 || !absl::SimpleAtoi(d[0], &m) || !absl::SimpleAtoi(d[1], &n) ||
            !absl::SimpleAtoi(d[2], &k) || m < 1 || n < 1 || k < 1) {
          std::fprintf(stderr, "--shapes: expected MxNxK with positive integers (e.g. 4096x4096x4096), got '%s'\n",
                       t.c_str());
          return 1;
        }
        o.shapes.push_back({"shapes", m, n, k});
      }
      if (o.shapes.empty()) {
        std::fprintf(stderr, "--shapes: no shape given\n%s", kUsage);
        return 1;
      }
    } else if (arg == "--idioms") {
      o.idioms.clear();
      for (const std::string& s : std::vector<std::string>(absl::StrSplit(value(), ',', absl::SkipEmpty()))) {
        auto it = std::find_if(std::begin(kAllIdioms), std::end(kAllIdioms),
                               [&](Idiom i) { return s == IdiomName(i); });
        if (it == std::end(kAllIdioms)) {
          std::fprintf(stderr, "--idioms: unknown idiom '%s'\n%s", s.c_str(), kUsage);
          return 1;
        }
        o.idioms.push_back(*it);
      }
    } else if (arg == "--reps") {
      o.reps = static_cast<int>(integer(1));
    } else if (arg == "--warmup") {
      o.warmup = static_cast<int>(integer(0));
    } else if (arg == "--sequential") {
      o.sequential = true;
    } else if (arg == "--fixed-order") {
      o.fixed_order = true;
    } else if (arg == "--no-flush") {
      o.flush = false;
    } else if (arg == "--sustain") {
      o.sustain_ms = static_cast<int>(integer(1));
    } else if (arg == "--seed") {
      o.seed = static_cast<uint64_t>(integer(0));
    } else if (arg == "--count") {
      o.count = static_cast<int>(integer(1));
    } else if (arg == "--tol") {
      const std::string v = value();
      if (!absl::SimpleAtod(v, &o.tolerance) || !(o.tolerance > 0)) {
        std::fprintf(stderr, "--tol: expected a positive number, got '%s'\n", v.c_str());
        return 1;
      }
    } else if (arg == "--csv") {
      o.csv = value();
    } else if (arg == "--arch") {
      o.arch = value();
    } else if (arg == "--family") {
      o.family = value();
      if (o.family != "sm80" && o.family != "sm90") {
        std::fprintf(stderr, "--family: sm80 or sm90, got '%s'\n", o.family.c_str());
        return 1;
      }
    } else if (arg == "--b-layout") {
      const std::string v = value();
      if (v != "kn" && v != "nk") {
        std::fprintf(stderr, "--b-layout: kn or nk, got '%s'\n", v.c_str());
        return 1;
      }
      o.b_nk = v == "nk";
    } else if (arg == "--sm90-config") {
      o.sm90_config = value();
    } else if (arg == "--dump-kernels") {
      o.dump_dir = value();
    } else if (arg == "--compile-only") {
      o.compile_only = true;
    } else if (arg == "--help" || arg == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else {
      std::fprintf(stderr, "unknown argument '%s'\n%s", arg.c_str(), kUsage);
      return 1;
    }
  }
  if (o.sequential && o.fixed_order) {
    std::fprintf(stderr, "--sequential and --fixed-order exclude each other (--sequential has no rounds)\n%s", kUsage);
    return 1;
  }
  if (o.sustain_ms > 0 && (o.sequential || o.fixed_order)) {
    std::fprintf(stderr, "--sustain measures one kernel at a time: drop --sequential / --fixed-order\n%s", kUsage);
    return 1;
  }
  if (o.sustain_ms == 0 && o.reps < 20) {
    std::printf("note: --reps %d is below the 20 the benchmark protocol asks for\n", o.reps);
  }
  return Main(o);
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) { return kiln::ParseAndRun(argc, argv); }
