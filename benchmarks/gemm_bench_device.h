// kiln_gemm_bench's GPU side: the table of generated kernels (compiled together before
// anything is timed) and their launches bound to buffers, the harness's own device
// code, the cuBLAS and cuBLASLt peers, the timer, and fills and error reductions.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "benchmarks/bench_check.h"
#include "benchmarks/gemm_bench_options.h"
#include "codegen/nvrtc_module.h"
#include "codegen/op_kernels.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_sm90.h"
#include "runtime/nvml_meter.h"
#include "runtime/tensor_map.h"

// A failed cuBLAS call ends the bench, as a failed CUDA call does (CHECK_CUDA).
#define CHECK_BLAS(expr)                                                                               \
  do {                                                                                                 \
    const cublasStatus_t s_ = (expr);                                                                  \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                 \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cublasLtGetStatusString(s_)); \
      std::exit(1);                                                                                    \
    }                                                                                                  \
  } while (0)

namespace kiln::gemm_bench {

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
                       const std::string& dump_dir = "");
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

// Kernels for `node` through codegen's public entry point (the GEMM template on;
// `hopper`: the sm90 family for the groups it takes, KernelOptions::hopper).
// `sm90_config` / `config`: a forced tile config for the groups the sm90 family / the
// sm_80 or SIMT template generates.
absl::StatusOr<Generated> Generate(const Node& node, KernelTable& table, bool hopper = false, int sm_count = 0,
                                   const codegen::ops::Sm90GemmConfig* sm90_config = nullptr,
                                   const codegen::ops::GemmConfig* config = nullptr);

// Generated launches with their pointer arguments bound to device buffers (and a
// split-K launch's semaphores and scratch to a workspace of their own).
class Bound {
 public:
  Bound(const Generated& g, const KernelTable& table, const std::map<std::string, void*>& buffers);
  void Run(cudaStream_t stream) const;

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
// deterministic uniform fill and the error reduction used for validation, over fp16
// elements or (`fp32`) fp32 ones.
std::string FillSource(bool fp32);
// Spins for `ns` nanoseconds: enqueued before the start event when L2 is not flushed,
// so that the runs being timed are queued behind it and the events measure GPU time,
// not the host's launch latency (the flush memset does this otherwise).
extern const char kDelaySource[];
// result = max_i |got_i - want_i| / max(1, |want_i|) as float bits (non-negative
// floats order like their bits); NaN or infinity in either gives +inf.
std::string ErrorSource(bool fp32);

// ---------------------------------------------------------------------------------
// cuBLAS peers. Row-major C[M,N] = A[M,K]·B[K,N] is column-major C^T = B^T·A^T.

struct Blas {
  cudaStream_t stream;
  cublasHandle_t handle;
  cublasLtHandle_t lt;
  void* workspace;
  size_t workspace_bytes;
  bool b_nk = false;  // B stored [N, K] (--b-layout nk)
  bool fp32 = false;  // fp32 operands (--precision fp32): cublasSgemm, cuBLASLt in fp32
  bool tf32 = false;  // with fp32: TF32 math (--precision tf32), cublasGemmEx and cuBLASLt FAST_TF32
};

void GemmEx(const Blas& blas, int64_t m, int64_t n, int64_t k, const void* a, const void* b, void* c, float beta);

// One cuBLASLt matmul (its first heuristic algorithm), with an optional epilogue.
class LtPlan {
 public:
  LtPlan(const Blas& blas, int64_t m, int64_t n, int64_t k, cublasLtEpilogue_t epilogue, const void* bias);
  ~LtPlan();
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;

  void Run(const void* a, const void* b, void* c, float beta) const { Run(a, b, c, c, beta); }
  // D = A·B (+ the epilogue) + beta C.
  void Run(const void* a, const void* b, const void* c, void* d, float beta) const;

 private:
  const Blas& blas_;
  cublasLtMatmulDesc_t desc_;
  cublasLtMatrixLayout_t la_, lb_, lc_;
  cublasLtMatmulHeuristicResult_t heuristic_;
};

// ---------------------------------------------------------------------------------
// Timing and validation.

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
  Timer(const Options& o, cudaStream_t stream, size_t l2_bytes, cudaKernel_t delay);
  ~Timer();

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
  std::vector<double> MedianMs(const std::vector<std::function<void()>>& runs, bool sustain = true);

  // --sustain: what the last MedianMs measured, in the order of its runs.
  const std::vector<Sustained>& sustained() const { return sustained_; }
  void set_meter(const NvmlMeter* meter) { meter_ = meter; }

 private:
  // --sustain: `run` back to back (no flush, no spin) for half of --sustain ms to reach
  // the power state a long series reaches, then for --sustain ms measured: GPU time
  // between two events, launches, and the SM clock and power sampled every 10 ms by a
  // host thread (PowerSampler; energy per launch = mean power x time). Launches go in chunks of
  // about 2 ms, at most two in flight, so that the host's clock follows the GPU's.
  Sustained Sustain(const std::function<void()>& run);
  // One timed run of `run` after the flush (or the spin kernel): milliseconds.
  float TimeOnce(const std::function<void()>& run, int i);
  // Milliseconds of `run` between two events, waited for.
  float Elapsed(const std::function<void()>& run);

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
  Device(cudaStream_t stream, cudaKernel_t fill, cudaKernel_t error, int element_bytes);
  ~Device();

  void Fill(void* p, int64_t n, uint64_t seed, float scale);
  // Fills with NaN (all bits set), so that a kernel that writes nothing fails validation.
  void Poison(void* p, int64_t n) { CHECK_CUDA(cudaMemsetAsync(p, 0xff, n * element_bytes_, stream_)); }
  float MaxRelError(const void* got, const void* want, int64_t n);

 private:
  cudaStream_t stream_;
  cudaKernel_t fill_, error_;
  int element_bytes_;
  void* result_ = nullptr;  // one unsigned int
};

}  // namespace kiln::gemm_bench
