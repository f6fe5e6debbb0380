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
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "benchmarks/gemm_bench_device.h"
#include "benchmarks/gemm_bench_measure.h"
#include "benchmarks/gemm_bench_options.h"
#include "benchmarks/gemm_bench_problems.h"
#include "benchmarks/gemm_bench_report.h"
#include "codegen/nvrtc_module.h"
#include "codegen/ops/gemm_sm90.h"
#include "runtime/nvml_meter.h"

namespace kiln::gemm_bench {
namespace {

constexpr int kNoDevice = 77;  // the exit status without a GPU (ctest's SKIP_RETURN_CODE)

constexpr Idiom kAllIdioms[] = {Idiom::kGemm,     Idiom::kBiasRelu, Idiom::kBiasGelu,
                                Idiom::kReluGemm, Idiom::kDualGemm, Idiom::kBiasGeluErf,
                                Idiom::kBiasResidual};

// Generates the kernels of problem `p`: kiln's group for each idiom and the peers' separate
// kernels, all added to `table`.
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
    std::optional<codegen::ops::GemmConfig> config;
    if (!o.config.empty()) {
      absl::StatusOr<codegen::ops::GemmConfig> c = codegen::ops::ParseGemmConfig(o.config);
      if (!c.ok()) return c.status();
      config = *c;
    }
    return Generate(*b->node, table, o.family == "sm90", o.sm_count, forced ? &*forced : nullptr,
                    config ? &*config : nullptr);
  };
  const DType dt = o.fp32 ? DType::kFloat32 : DType::kFloat16;
  for (Idiom i : o.idioms) pk.kiln.emplace(i, gen(KilnGroup(i, p.m, p.n, p.k, o.b_nk, dt, o.tf32)));
  if (Has(o, Idiom::kBiasRelu)) pk.bias_relu = gen(BiasActGroup(Idiom::kBiasRelu, p.m, p.n, dt));
  if (Has(o, Idiom::kBiasGelu)) pk.bias_gelu = gen(BiasActGroup(Idiom::kBiasGelu, p.m, p.n, dt));
  if (Has(o, Idiom::kBiasGeluErf)) pk.bias_gelu_erf = gen(BiasActGroup(Idiom::kBiasGeluErf, p.m, p.n, dt));
  if (Has(o, Idiom::kBiasResidual)) pk.bias_residual = gen(BiasResidualGroup(p.m, p.n, dt));
  if (Has(o, Idiom::kReluGemm)) pk.relu_a = gen(ReluNode(p.m, p.k, dt));
  if (Has(o, Idiom::kDualGemm)) pk.add = gen(AddNode(p.m, p.n, dt));
  return pk;
}

// The problems of --shapes, or else those of the sets, in order.
std::vector<Problem> Problems(const Options& o) {
  std::vector<Problem> problems = o.shapes;
  for (const std::string& set : o.shapes.empty() ? o.sets : std::vector<std::string>()) {
    std::vector<Problem> p = set == "squares"       ? Squares()
                             : set == "transformer" ? Transformer()
                             : set == "random"      ? Random(o.seed, o.count)
                             : set == "small_m"     ? SmallM()
                                                    : Smoke();
    problems.insert(problems.end(), p.begin(), p.end());
  }
  return problems;
}

// The harness's own kernels in the KernelTable.
struct HarnessKernels {
  int fill = 0, error = 0, delay = 0;
};

// 1. Generate every kernel and compile them all, in parallel, before timing (and, when
// `load`, load them); prints what it did. False (after the message) when the compile
// failed.
bool GenerateAndCompile(const Options& o, const std::vector<Problem>& problems, const std::string& arch, bool load,
                        KernelTable& table, HarnessKernels& harness, std::vector<ProblemKernels>& generated) {
  const auto t0 = std::chrono::steady_clock::now();
  harness = {table.Add(FillSource(o.fp32)), table.Add(ErrorSource(o.fp32)), table.Add(kDelaySource)};
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
  if (absl::Status s = table.Compile(arch, per_module, load, &modules, o.dump_dir); !s.ok()) {
    std::fprintf(stderr, "compile: %s\n", std::string(s.message()).c_str());
    return false;
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
  return true;
}

// 2. Buffers, sized for the largest problem; `total`: their bytes.
std::map<std::string, void*> AllocateBuffers(const Options& o, const std::vector<Problem>& problems, size_t& total) {
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
  for (const auto& [name, n] : sizes) {
    buf[name] = nullptr;
    if (n > 0) CHECK_CUDA(cudaMalloc(&buf[name], n * o.ElementBytes()));
    total += n * o.ElementBytes();
  }
  return buf;
}

// What the device, the options and the peers are, and the table's header.
void PrintHeader(const Options& o, const cudaDeviceProp& prop, const std::string& arch, size_t total) {
  std::printf(
      "%s (%s, %d SMs, L2 %d MiB), CUDA runtime %d, cuBLAS %d; %s in/out, fp32 accumulate; %d warm-up + median of "
      "%d timed runs, L2 %s; %.1f GiB of buffers; tolerance %g (max |kiln - ref| / max(1, |ref|))\n",
      prop.name, arch.c_str(), prop.multiProcessorCount, prop.l2CacheSize >> 20, CUDART_VERSION, CUBLAS_VERSION,
      o.tf32
          ? (o.family == "sm90" ? "fp32, TF32 math (kiln's sm90 tf32 wgmma; cuBLAS CUBLAS_COMPUTE_32F_FAST_TF32)"
                                : "fp32, TF32 math (kiln's sm80 tf32 mma.sync m16n8k8 where it takes the group, else "
                                  "its SIMT fp32; cuBLAS CUBLAS_COMPUTE_32F_FAST_TF32)")
      : o.fp32 ? "fp32 (no TF32: kiln's SIMT template, cublasSgemm)"
               : "fp16",
      o.warmup, o.reps,
      o.flush ? "flushed before every timed run" : "not flushed (warm; a 50 us spin kernel queues each run)",
      total / 1073741824.0, o.tolerance);
  if (std::find(o.sets.begin(), o.sets.end(), "random") != o.sets.end()) {
    std::printf("seed protocol: %d random (M, N, K), multiples of 128 in [128, 4096], mt19937_64 seed %llu\n", o.count,
                (unsigned long long)o.seed);
  }
  std::printf("peers (A / B):\n");
  for (Idiom i : o.idioms) std::printf("  %-10s A = %-22s B = %s\n", IdiomName(i), PeerA(i), *PeerB(i) ? PeerB(i) : "-");
  if (o.tf32) {
    std::printf(
        "  (--precision tf32: \"cublasGemmEx\" and cuBLASLt run fp32 in and out with "
        "CUBLAS_COMPUTE_32F_FAST_TF32)\n");
  } else if (o.fp32) {
    std::printf("  (--precision fp32: \"cublasGemmEx\" is cublasSgemm, cuBLASLt runs fp32 in and out)\n");
  }
  std::printf(
      "  (\"cublas\" inside a composite peer = whichever of cublasGemmEx and cuBLASLt was faster for the plain GEMM of "
      "that shape; the separate kernels are kiln's generated pointwise kernels)\n\n");
  std::printf("%-11s %-16s %-9s %9s %7s %9s %9s %6s %6s %6s %8s %s\n", "set", "M x N x K", "idiom", "kiln ms", "TF/s",
              "A ms", "B ms", "x A", "x B", "x best", "max err", "status");
}

// 2. and 3.: the buffers, cuBLAS and the timer, then every problem measured in turn,
// the summary and the CSV. Returns the exit status.
int Measure(const Options& o, const std::vector<Problem>& problems, const std::vector<ProblemKernels>& generated,
            const KernelTable& table, const HarnessKernels& harness, const cudaDeviceProp& prop,
            const std::string& arch) {
  size_t total = 0;
  std::map<std::string, void*> buf = AllocateBuffers(o, problems, total);

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Blas blas{stream, nullptr, nullptr, nullptr, 32 << 20, o.b_nk, o.fp32, o.tf32};
  CHECK_BLAS(cublasCreate(&blas.handle));
  CHECK_BLAS(cublasSetStream(blas.handle, stream));
  CHECK_BLAS(cublasLtCreate(&blas.lt));
  CHECK_CUDA(cudaMalloc(&blas.workspace, blas.workspace_bytes));
  Timer timer(o, stream, prop.l2CacheSize, table.handle(harness.delay));
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
  Device dev(stream, table.handle(harness.fill), table.handle(harness.error), o.ElementBytes());
  PrintHeader(o, prop, arch, total);

  // 3. Per problem: fill the inputs, run and check every peer and kiln once, then time
  // them all together.
  std::vector<Row> rows;
  const Bench bench{o, table, buf, stream, blas, timer, dev};
  for (size_t pi = 0; pi < problems.size(); ++pi) {
    if (!MeasureProblem(bench, pi, problems[pi], generated[pi], rows)) return 1;
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

int Main(Options o) {
  const std::vector<Problem> problems = Problems(o);

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

  KernelTable table;
  HarnessKernels harness;
  std::vector<ProblemKernels> generated;
  if (!GenerateAndCompile(o, problems, arch, have_gpu && !o.compile_only, table, harness, generated)) return 1;
  if (o.compile_only) return 0;
  return Measure(o, problems, generated, table, harness, prop, arch);
}

constexpr char kUsage[] =
    "usage: kiln_gemm_bench [--set squares|transformer|random|small_m|all[,...]] [--smoke]\n"
    "                       [--shapes MxNxK[,MxNxK...]]\n"
    "                       [--idioms gemm,bias_relu,bias_gelu,relu_gemm,dual_gemm,bias_gelu_erf,bias_residual]\n"
    "                       [--reps N]\n"
    "                       [--warmup N]\n"
    "                       [--no-flush] [--sequential | --fixed-order] [--seed S] [--count N] [--tol X] [--csv "
    "out.csv]\n"
    "                       [--compile-only [--arch sm_90a|sm_89|sm_86|sm_80]] [--family sm80|sm90]\n"
    "                       [--dump-kernels DIR]\n"
    "                       [--b-layout kn|nk] [--sustain MS] [--precision fp16|fp32|tf32] [--config CFG]\n"
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
    "  --config   a forced tile config for the sm80 (or, with --precision fp32, SIMT) template, e.g.\n"
    "             \"128x128x32 w2x2 s3\" or \"128x128x16 w2x2 s2\"\n"
    "  --precision fp16 (default) or fp32: fp32 operands, results and accumulation, kiln on its SIMT\n"
    "             template (FFMA, no TF32) against cublasSgemm and cuBLASLt in fp32 (--family sm80);\n"
    "             or tf32: fp32 operands and results, TF32 math, kiln on the sm90 family's tf32 wgmma\n"
    "             (--family sm90) or the sm80 template's tf32 mma.sync (--family sm80), both with\n"
    "             --b-layout nk (they read B K-major), against cublasGemmEx and cuBLASLt with\n"
    "             CUBLAS_COMPUTE_32F_FAST_TF32\n"
    "exit status: 0, 2 when some kiln result failed validation, 77 without a CUDA device (unless\n"
    "             --compile-only)\n";

// --set's list (into o.sets); false after the message when a set is unknown.
bool ParseSets(const std::string& list, Options& o) {
  o.sets.clear();
  for (const std::string& s : std::vector<std::string>(absl::StrSplit(list, ',', absl::SkipEmpty()))) {
    if (s == "all") {
      o.sets.insert(o.sets.end(), {"squares", "transformer", "random"});
    } else if (s == "squares" || s == "transformer" || s == "random" || s == "small_m") {
      o.sets.push_back(s);
    } else {
      std::fprintf(stderr, "--set: unknown set '%s' (squares, transformer, random, small_m, all)\n", s.c_str());
      return false;
    }
  }
  return true;
}

// --shapes' list (into o.shapes); false after the message when a shape is malformed or none is given.
bool ParseShapes(const std::string& list, Options& o) {
  o.shapes.clear();
  for (const std::string& t : std::vector<std::string>(absl::StrSplit(list, ',', absl::SkipEmpty()))) {
    const std::vector<std::string> d = absl::StrSplit(t, 'x');
    int64_t m = 0, n = 0, k = 0;
    if (d.size() != 3 || !absl::SimpleAtoi(d[0], &m) || !absl::SimpleAtoi(d[1], &n) ||
        !absl::SimpleAtoi(d[2], &k) || m < 1 || n < 1 || k < 1) {
      std::fprintf(stderr, "--shapes: expected MxNxK with positive integers (e.g. 4096x4096x4096), got '%s'\n",
                   t.c_str());
      return false;
    }
    o.shapes.push_back({"shapes", m, n, k});
  }
  if (o.shapes.empty()) {
    std::fprintf(stderr, "--shapes: no shape given\n%s", kUsage);
    return false;
  }
  return true;
}

// --idioms' list (into o.idioms); false after the message when an idiom is unknown.
bool ParseIdioms(const std::string& list, Options& o) {
  o.idioms.clear();
  for (const std::string& s : std::vector<std::string>(absl::StrSplit(list, ',', absl::SkipEmpty()))) {
    auto it = std::find_if(std::begin(kAllIdioms), std::end(kAllIdioms),
                           [&](Idiom i) { return s == IdiomName(i); });
    if (it == std::end(kAllIdioms)) {
      std::fprintf(stderr, "--idioms: unknown idiom '%s'\n%s", s.c_str(), kUsage);
      return false;
    }
    o.idioms.push_back(*it);
  }
  return true;
}

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
      if (!ParseSets(value(), o)) return 1;
    } else if (arg == "--smoke") {
      o.sets = {"smoke"};
    } else if (arg == "--shapes") {
      if (!ParseShapes(value(), o)) return 1;
    } else if (arg == "--idioms") {
      if (!ParseIdioms(value(), o)) return 1;
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
    } else if (arg == "--precision") {
      const std::string v = value();
      if (v != "fp16" && v != "fp32" && v != "tf32") {
        std::fprintf(stderr, "--precision: fp16, fp32 or tf32, got '%s'\n", v.c_str());
        return 1;
      }
      o.fp32 = v != "fp16";
      o.tf32 = v == "tf32";
    } else if (arg == "--config") {
      o.config = value();
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
}  // namespace kiln::gemm_bench

int main(int argc, char** argv) { return kiln::gemm_bench::ParseAndRun(argc, argv); }
