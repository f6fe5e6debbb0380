// The GPU side of kiln_gemm_bench (gemm_bench_device.h).
#include "benchmarks/gemm_bench_device.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>

#include "codegen/kernel_choice.h"
#include "common/write_file.h"

namespace kiln::gemm_bench {

absl::Status KernelTable::Compile(const std::string& arch, int per_module, bool load, int* modules,
                                  const std::string& dump_dir) {
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

namespace {

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

}  // namespace

absl::StatusOr<Generated> Generate(const Node& node, KernelTable& table, bool hopper, int sm_count,
                                   const codegen::ops::Sm90GemmConfig* sm90_config,
                                   const codegen::ops::GemmConfig* config) {
  codegen::KernelOptions options;
  options.matmul_groups = codegen::MatMulGroups::kGenerated;
  options.hopper = hopper;
  options.sm_count = sm_count;
  const bool gemm = codegen::IsMatMulGroup(node) || node.op_type() == "MatMul";
  const bool sm90 = hopper && codegen::ops::Sm90Eligible(node).ok();
  absl::StatusOr<std::vector<codegen::KernelLaunch>> launches =
      sm90 && sm90_config != nullptr       ? codegen::ops::GenerateMatMulGroupSm90(node, sm90_config, sm_count)
      : !sm90 && gemm && config != nullptr ? codegen::ops::GenerateMatMulGroup(node, config, sm_count)
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

Bound::Bound(const Generated& g, const KernelTable& table, const std::map<std::string, void*>& buffers) {
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

void Bound::Run(cudaStream_t stream) const {
  for (const auto& launch : launches_) {
    const codegen::KernelLaunch& l = *launch->l;
    CHECK_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(launch->kernel), dim3(l.grid[0], l.grid[1], l.grid[2]),
                                dim3(l.block[0], l.block[1], l.block[2]),
                                launch->args.params(), l.shared_bytes, stream));
  }
}

// The harness's element type (fp16, or fp32 with --precision fp32) and its conversions.
std::string ElementDefines(bool fp32) {
  return fp32 ? "#define BENCH_T float\n#define BENCH_TO(x) (x)\n#define BENCH_FROM(x) (x)\n"
              : "#define BENCH_T kiln_f16\n#define BENCH_TO(x) kiln_f32_to_f16(x)\n#define BENCH_FROM(x) "
                "kiln_f16_to_f32(x)\n";
}

std::string FillSource(bool fp32) {
  return ElementDefines(fp32) + R"(
extern "C" __global__ void KILN_KERNEL(BENCH_T* p, long long n, unsigned long long seed, float scale) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned long long z = (unsigned long long)i * 0x9E3779B97F4A7C15ull + seed * 0xD1B54A32D192ED03ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float u = (float)(z >> 40) * (1.f / 16777216.f);  // [0, 1)
    p[i] = BENCH_TO((2.f * u - 1.f) * scale);
  }
}
#undef BENCH_T
#undef BENCH_TO
#undef BENCH_FROM
)";
}

const char kDelaySource[] = R"(
extern "C" __global__ void KILN_KERNEL(long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < (unsigned long long)ns);
}
)";

std::string ErrorSource(bool fp32) {
  return ElementDefines(fp32) + R"(
extern "C" __global__ void KILN_KERNEL(const BENCH_T* got, const BENCH_T* want, long long n, unsigned int* result) {
  float worst = 0.f;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const float g = BENCH_FROM(got[i]), w = BENCH_FROM(want[i]);
    float d = fabsf(g - w) / fmaxf(1.f, fabsf(w));
    if (!(d <= 3.0e38f)) d = __int_as_float(0x7f800000);
    worst = fmaxf(worst, d);
  }
  for (int o = 16; o > 0; o >>= 1) worst = fmaxf(worst, __shfl_xor_sync(0xffffffffu, worst, o));
  if ((threadIdx.x & 31) == 0) atomicMax(result, __float_as_uint(worst));
}
#undef BENCH_T
#undef BENCH_TO
#undef BENCH_FROM
)";
}

void GemmEx(const Blas& blas, int64_t m, int64_t n, int64_t k, const void* a, const void* b, void* c, float beta) {
  const float alpha = 1.f;
  if (blas.tf32) {  // fp32 data, TF32 tensor-core math
    CHECK_BLAS(cublasGemmEx(blas.handle, blas.b_nk ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b,
                            CUDA_R_32F, blas.b_nk ? k : n, a, CUDA_R_32F, k, &beta, c, CUDA_R_32F, n,
                            CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
    return;
  }
  if (blas.fp32) {  // cublasSgemm: the handle's default math mode, so exact fp32 (no TF32)
    CHECK_BLAS(cublasSgemm(blas.handle, blas.b_nk ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha,
                           static_cast<const float*>(b), blas.b_nk ? k : n, static_cast<const float*>(a), k, &beta,
                           static_cast<float*>(c), n));
    return;
  }
  CHECK_BLAS(cublasGemmEx(blas.handle, blas.b_nk ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b,
                          CUDA_R_16F, blas.b_nk ? k : n, a, CUDA_R_16F, k,
                          &beta, c, CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

LtPlan::LtPlan(const Blas& blas, int64_t m, int64_t n, int64_t k, cublasLtEpilogue_t epilogue, const void* bias)
    : blas_(blas) {
  CHECK_BLAS(
      cublasLtMatmulDescCreate(&desc_, blas.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    CHECK_BLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    CHECK_BLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  const cudaDataType_t t = blas.fp32 ? CUDA_R_32F : CUDA_R_16F;
  if (blas.b_nk) {  // B [N, K] row-major is column-major K x N: transposed
    const cublasOperation_t op = CUBLAS_OP_T;
    CHECK_BLAS(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &op, sizeof(op)));
    CHECK_BLAS(cublasLtMatrixLayoutCreate(&la_, t, k, n, k));
  } else {
    CHECK_BLAS(cublasLtMatrixLayoutCreate(&la_, t, n, k, n));  // B^T
  }
  CHECK_BLAS(cublasLtMatrixLayoutCreate(&lb_, t, k, m, k));  // A^T
  CHECK_BLAS(cublasLtMatrixLayoutCreate(&lc_, t, n, m, n));
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

LtPlan::~LtPlan() {
  cublasLtMatrixLayoutDestroy(la_);
  cublasLtMatrixLayoutDestroy(lb_);
  cublasLtMatrixLayoutDestroy(lc_);
  cublasLtMatmulDescDestroy(desc_);
}

void LtPlan::Run(const void* a, const void* b, const void* c, void* d, float beta) const {
  const float alpha = 1.f;
  CHECK_BLAS(cublasLtMatmul(blas_.lt, desc_, &alpha, b, la_, a, lb_, &beta, c, lc_, d, lc_, &heuristic_.algo,
                            blas_.workspace, blas_.workspace_bytes, blas_.stream));
}

Timer::Timer(const Options& o, cudaStream_t stream, size_t l2_bytes, cudaKernel_t delay)
    : o_(o), stream_(stream), delay_(delay) {
  CHECK_CUDA(cudaEventCreate(&e0_));
  CHECK_CUDA(cudaEventCreate(&e1_));
  flush_bytes_ = std::max<size_t>(2 * l2_bytes, 8 << 20);
  if (o.flush) CHECK_CUDA(cudaMalloc(&flush_, flush_bytes_));
}

Timer::~Timer() {
  cudaEventDestroy(e0_);
  cudaEventDestroy(e1_);
  if (flush_ != nullptr) cudaFree(flush_);
}

std::vector<double> Timer::MedianMs(const std::vector<std::function<void()>>& runs, bool sustain) {
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

Sustained Timer::Sustain(const std::function<void()>& run) {
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

float Timer::TimeOnce(const std::function<void()>& run, int i) {
  if (flush_ != nullptr) {
    CHECK_CUDA(cudaMemsetAsync(flush_, i & 1, flush_bytes_, stream_));
  } else {
    long long ns = 50000;
    void* args[] = {&ns};
    CHECK_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(delay_), dim3(1), dim3(1), args, 0, stream_));
  }
  return Elapsed(run);
}

float Timer::Elapsed(const std::function<void()>& run) {
  CHECK_CUDA(cudaEventRecord(e0_, stream_));
  run();
  CHECK_CUDA(cudaEventRecord(e1_, stream_));
  CHECK_CUDA(cudaEventSynchronize(e1_));
  float t = 0;
  CHECK_CUDA(cudaEventElapsedTime(&t, e0_, e1_));
  return t;
}

Device::Device(cudaStream_t stream, cudaKernel_t fill, cudaKernel_t error, int element_bytes)
    : stream_(stream), fill_(fill), error_(error), element_bytes_(element_bytes) {
  CHECK_CUDA(cudaMalloc(&result_, sizeof(unsigned int)));
}

Device::~Device() { cudaFree(result_); }

void Device::Fill(void* p, int64_t n, uint64_t seed, float scale) {
  long long count = n;
  void* args[] = {&p, &count, &seed, &scale};
  CHECK_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(fill_), dim3(1024), dim3(256), args, 0, stream_));
}

float Device::MaxRelError(const void* got, const void* want, int64_t n) {
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

}  // namespace kiln::gemm_bench
