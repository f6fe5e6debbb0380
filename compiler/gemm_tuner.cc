// GEMM autotuning on the local GPU: candidates compiled by NVRTC, loaded with
// cudaLibraryLoadData, timed with CUDA events, checked against the heuristic's output.
#include "compiler/gemm_tuner.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "codegen/kernel_choice.h"
#include "codegen/library_kernels.h"
#include "codegen/nvrtc_module.h"
#include "codegen/op_kernels.h"
#include "common/status_macros.h"
#include "graph/tensor.h"
#include "runtime/cuda_util.h"
#include "runtime/tensor_map.h"

namespace kiln {
namespace ops = codegen::ops;
namespace {

using Clock = std::chrono::steady_clock;

absl::Status Cuda(cudaError_t e, const std::string& what) { return CudaStatus(static_cast<int>(e), what); }

// Device buffers for one problem's group inputs and outputs, freed on destruction.
class Buffers {
 public:
  ~Buffers() {
    for (void* p : ptrs_) cudaFree(p);
  }
  absl::StatusOr<void*> Alloc(size_t bytes) {
    void* p = nullptr;
    KILN_RETURN_IF_ERROR(Cuda(cudaMalloc(&p, std::max<size_t>(bytes, 256)), "tuning: cudaMalloc"));
    ptrs_.push_back(p);
    return p;
  }

 private:
  std::vector<void*> ptrs_;
};

// cudaLibrary handles, unloaded on destruction.
class Libraries {
 public:
  ~Libraries() {
    for (cudaLibrary_t l : libs_) cudaLibraryUnload(l);
  }
  absl::StatusOr<cudaKernel_t> Load(const std::string& cubin, const std::string& function, uint32_t shared_bytes) {
    cudaLibrary_t lib = nullptr;
    KILN_RETURN_IF_ERROR(Cuda(cudaLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
                              "loading the candidate's cubin"));
    libs_.push_back(lib);
    cudaKernel_t kernel = nullptr;
    KILN_RETURN_IF_ERROR(Cuda(cudaLibraryGetKernel(&kernel, lib, function.c_str()), "cudaLibraryGetKernel"));
    if (shared_bytes > 48 * 1024) {
      KILN_RETURN_IF_ERROR(Cuda(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                     static_cast<int>(shared_bytes)),
                                "setting the dynamic shared memory size"));
    }
    return kernel;
  }

 private:
  std::vector<cudaLibrary_t> libs_;
};

class Events {
 public:
  ~Events() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  }
  absl::Status Create() {
    KILN_RETURN_IF_ERROR(Cuda(cudaEventCreate(&start), "cudaEventCreate"));
    return Cuda(cudaEventCreate(&stop), "cudaEventCreate");
  }
  cudaEvent_t start = nullptr, stop = nullptr;
};

// A sticky CUDA error leaves the context unusable: tuning stops there.
bool IsSticky(cudaError_t e) {
  return e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure || e == cudaErrorMisalignedAddress ||
         e == cudaErrorIllegalInstruction || e == cudaErrorHardwareStackError || e == cudaErrorInvalidPc ||
         e == cudaErrorAssert || e == cudaErrorInvalidAddressSpace || e == cudaErrorUnknown;
}

// One problem on the device: its representative node, buffers and launch arguments.
struct Problem {
  codegen::TuningKey key;
  ops::GemmProblem gemm;
  const Node* node = nullptr;
  std::vector<std::string> groups;
};

struct Candidate {
  codegen::GemmTileConfig config;
  codegen::KernelLaunch launch;
  cudaKernel_t kernel = nullptr;
  double ms = 0;
  double error = 0;
  std::string failure;  // why it was left out ("" when measured and correct)
};

class ProblemRunner {
 public:
  ProblemRunner(const Node& node, cudaStream_t stream) : node_(node), stream_(stream) {}

  absl::Status Setup() {
    std::mt19937 rng(20240805);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    for (const Value* v : node_.outputs()) {
      KILN_ASSIGN_OR_RETURN(void* p, buffers_.Alloc(v->numel() * DTypeSize(v->dtype())));
      outputs_.push_back(p);
    }
    for (const Value* v : node_.inputs()) {
      if (v == nullptr) {
        inputs_.push_back(nullptr);
        continue;
      }
      Tensor t(v->dtype(), v->shape());
      if (IsFloating(v->dtype())) {
        std::vector<float> values(v->numel());
        for (float& x : values) x = dist(rng);
        t = Tensor::FromFloat(v->dtype(), v->shape(), values);
      }
      KILN_ASSIGN_OR_RETURN(void* p, buffers_.Alloc(t.nbytes()));
      if (t.nbytes() > 0) {
        KILN_RETURN_IF_ERROR(Cuda(cudaMemcpy(p, t.raw_data(), t.nbytes(), cudaMemcpyHostToDevice),
                                  "tuning: uploading random inputs"));
      }
      inputs_.push_back(p);
    }
    return absl::OkStatus();
  }

  // Grows the kernel workspace to what `launch` asks (before any timing: growing
  // frees the old areas).
  absl::Status Reserve(const codegen::KernelLaunch& launch) { return workspace_.ReserveFor(launch); }

  cudaError_t Launch(const Candidate& c) {
    const codegen::KernelLaunch& l = c.launch;
    const int outs = static_cast<int>(outputs_.size());
    // Pointers, any TMA tensor maps and the workspace (runtime/tensor_map.h).
    absl::StatusOr<LaunchArgs> args = LaunchArgs::Build(
        l, [&](int a) { return a < outs ? outputs_[a] : inputs_[a - outs]; }, workspace_.view());
    if (!args.ok()) return cudaErrorInvalidValue;
    return cudaLaunchKernel(reinterpret_cast<const void*>(c.kernel), dim3(l.grid[0], l.grid[1], l.grid[2]),
                            dim3(l.block[0], l.block[1], l.block[2]), args->params(), l.shared_bytes, stream_);
  }

  // Output 0 as floats (after the launches so far).
  absl::StatusOr<std::vector<float>> Output() {
    const Value* y = node_.output(0);
    Tensor t(y->dtype(), y->shape());
    KILN_RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(stream_), "tuning: synchronising"));
    KILN_RETURN_IF_ERROR(
        Cuda(cudaMemcpy(t.mutable_raw_data(), outputs_[0], t.nbytes(), cudaMemcpyDeviceToHost), "tuning: output"));
    return t.ToFloat();
  }

  // The group's buffers for a library call on this runner's stream (no workspace).
  codegen::LibraryLaunchArgs LibraryArgs() const {
    codegen::LibraryLaunchArgs args;
    args.outputs = outputs_;
    args.inputs.assign(inputs_.begin(), inputs_.end());
    args.stream = stream_;
    return args;
  }

  // Median per-launch milliseconds of candidate `c`; a CUDA error is returned as is.
  cudaError_t Time(const Candidate& c, const GemmTuneOptions& o, Events& ev, double* ms) {
    return Time([&] { return Launch(c); }, o, ev, ms);
  }
  // The same for any enqueueing `launch` (a cudaError_t of its own).
  template <class LaunchFn>
  cudaError_t Time(const LaunchFn& launch, const GemmTuneOptions& o, Events& ev, double* ms) {
    cudaError_t e = launch();
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
    if (e != cudaSuccess) return e;
    // One timed launch decides the batch size.
    float t = 0;
    cudaEventRecord(ev.start, stream_);
    e = launch();
    cudaEventRecord(ev.stop, stream_);
    if (e == cudaSuccess) e = cudaEventSynchronize(ev.stop);
    if (e == cudaSuccess) e = cudaEventElapsedTime(&t, ev.start, ev.stop);
    if (e != cudaSuccess) return e;
    const int reps = std::clamp(static_cast<int>(std::ceil(o.min_sample_ms / std::max(t, 1e-3f))), 1, 1000);
    std::vector<double> samples;
    for (int s = 0; s < o.samples; ++s) {
      cudaEventRecord(ev.start, stream_);
      for (int r = 0; r < reps && e == cudaSuccess; ++r) e = launch();
      cudaEventRecord(ev.stop, stream_);
      if (e == cudaSuccess) e = cudaEventSynchronize(ev.stop);
      if (e == cudaSuccess) e = cudaEventElapsedTime(&t, ev.start, ev.stop);
      if (e != cudaSuccess) return e;
      samples.push_back(static_cast<double>(t) / reps);
    }
    std::sort(samples.begin(), samples.end());
    *ms = samples[samples.size() / 2];
    return cudaSuccess;
  }

 private:
  const Node& node_;
  cudaStream_t stream_;
  Buffers buffers_;
  std::vector<void*> outputs_, inputs_;
  DeviceWorkspace workspace_;  // split-K candidates' semaphores and scratch
};

// max |got - want| / max |want| (finite want); infinity where got is NaN and want is
// not, or the sizes differ.
double MaxRelError(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double scale = 0, err = 0;
  for (float w : want) {
    if (std::isfinite(w)) scale = std::max(scale, static_cast<double>(std::fabs(w)));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const float g = got[i], w = want[i];
    if (std::isnan(w) && std::isnan(g)) continue;
    if (std::isinf(w) && g == w) continue;
    if (!std::isfinite(g) || !std::isfinite(w)) return INFINITY;
    err = std::max(err, static_cast<double>(std::fabs(g - w)));
  }
  return scale > 0 ? err / scale : err;
}

std::string Ms(double ms) { return ms > 0 ? absl::StrFormat("%.4f", ms) : std::string("-"); }

// Why an output `error` (max relative, against the heuristic config's output) is
// refused for `node`'s dtype, or "" when it is within the tolerance.
std::string Mismatch(const Node& node, double error) {
  const double tolerance = node.output(0)->dtype() == DType::kBFloat16 ? 5e-2 : 1e-2;
  if (error <= tolerance) return "";
  return absl::StrFormat("output differs from the heuristic config's (max rel error %.3g)", error);
}

// A cuBLASLt handle, created on first use and destroyed with the tuner's run.
class LtHandle {
 public:
  ~LtHandle() {
    if (h_ != nullptr) cublasLtDestroy(h_);
  }
  absl::StatusOr<cublasLtHandle_t> Get() {
    if (h_ == nullptr) {
      if (cublasStatus_t st = cublasLtCreate(&h_); st != CUBLAS_STATUS_SUCCESS) {
        h_ = nullptr;
        return absl::InternalError(absl::StrCat("cublasLtCreate: ", cublasLtGetStatusString(st)));
      }
    }
    return h_;
  }

 private:
  cublasLtHandle_t h_ = nullptr;
};

// Times cuBLASLt's call for `node`'s whole group on the runner's buffers and checks
// its output against `reference` (the heuristic config's). Returns the milliseconds,
// or a status saying why it was left out; *sticky when a CUDA error ended the context.
absl::StatusOr<double> TimeLibrary(const Node& node, ProblemRunner& runner, LtHandle& lt,
                                   const std::vector<float>& reference, const GemmTuneOptions& o, Events& ev,
                                   bool* sticky) {
  KILN_ASSIGN_OR_RETURN(cublasLtHandle_t handle, lt.Get());
  codegen::LibraryHandles handles;
  handles.cublaslt = handle;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<codegen::LibraryKernel> kernel, codegen::CreateLibraryKernel(node, handles));
  Buffers scratch;
  codegen::LibraryLaunchArgs args = runner.LibraryArgs();
  args.workspace_bytes = kernel->workspace_bytes();
  if (args.workspace_bytes > 0) {
    KILN_ASSIGN_OR_RETURN(args.workspace, scratch.Alloc(args.workspace_bytes));
  }
  std::string launch_error;
  double ms = 0;
  const cudaError_t e = runner.Time(
      [&]() -> cudaError_t {
        absl::Status st = kernel->Launch(args);
        if (st.ok()) return cudaSuccess;
        launch_error = std::string(st.message());
        return cudaErrorInvalidValue;
      },
      o, ev, &ms);
  if (e != cudaSuccess) {
    *sticky = IsSticky(e);
    if (!launch_error.empty()) return absl::InternalError(launch_error);
    cudaGetLastError();
    return absl::InternalError(absl::StrCat(cudaGetErrorName(e), ": ", cudaGetErrorString(e)));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<float> out, runner.Output());
  if (std::string mismatch = Mismatch(node, MaxRelError(out, reference)); !mismatch.empty()) {
    return absl::InternalError(mismatch);
  }
  return ms;
}

// The distinct problems of the MatMul groups among `nodes`, largest first (stable:
// first use breaks ties), each with the groups that share it.
std::vector<Problem> DistinctProblems(const std::vector<Node*>& nodes, const std::string& arch) {
  std::vector<Problem> problems;
  std::map<std::string, size_t> index;
  for (const Node* node : nodes) {
    if (!codegen::IsMatMulGroup(*node)) continue;
    absl::StatusOr<ops::GemmProblem> p = ops::DescribeMatMulGroup(*node);
    if (!p.ok()) continue;  // expanded or left to the heuristic's "no kernel" path
    codegen::TuningKey key = codegen::GemmTuningKey(arch, *p);
    auto [it, inserted] = index.try_emplace(key.ToString(), problems.size());
    if (inserted) problems.push_back(Problem{key, *p, node, {}});
    problems[it->second].groups.push_back(node->name());
  }
  std::stable_sort(problems.begin(), problems.end(),
                   [](const Problem& a, const Problem& b) { return a.gemm.Flops() > b.gemm.Flops(); });
  return problems;
}

// Generates every candidate config of `problem`, compiles them (one module each:
// parallel, cacheable) and loads them into `libs`: `cands` in the family's candidate
// order (the sm90 family's when `sm90`), a candidate NVRTC or the loader refused
// carrying its failure; configs that do not generate are left out with a line in `notes`. False when the first candidate is
// not the heuristic's config (nothing to compare against).
bool BuildCandidates(const Problem& problem, bool sm90, const codegen::GemmTileConfig& heuristic,
                     const GemmTuneOptions& options, Libraries& libs, std::vector<Candidate>& cands,
                     std::vector<std::string>& notes) {
  std::vector<codegen::ModuleKernel> kernels;
  std::vector<codegen::GemmTileConfig> configs;
  if (sm90) {
    for (const ops::Sm90GemmConfig& c : ops::Sm90CandidateConfigs(*problem.node)) configs.push_back(c);
  } else {
    for (const ops::GemmConfig& c : ops::GemmCandidateConfigs(problem.gemm)) configs.push_back(c);
  }
  for (const codegen::GemmTileConfig& config : configs) {
    absl::StatusOr<std::vector<codegen::KernelLaunch>> launches =
        config.sm90 ? ops::GenerateMatMulGroupSm90(*problem.node, &config.sm90_config)
                    : ops::GenerateMatMulGroup(*problem.node, &config.sm80_config);
    if (!launches.ok() || launches->size() != 1) {
      notes.push_back(absl::StrCat(config.ToString(), ": ",
                                   launches.ok() ? "not one launch" : launches.status().message()));
      continue;
    }
    Candidate c;
    c.config = config;
    c.launch = std::move((*launches)[0]);
    kernels.push_back({absl::StrCat("kiln_tune_", kernels.size()), c.launch.source});
    cands.push_back(std::move(c));
  }
  if (cands.empty() || !(cands[0].config == heuristic)) return false;
  codegen::CompileModulesOptions mo;
  mo.max_per_module = 1;
  mo.cache = options.cache;
  absl::StatusOr<std::vector<std::string>> cubins = codegen::CompileModules(kernels, options.arch, mo);
  std::vector<absl::StatusOr<std::string>> compiled;
  if (cubins.ok()) {
    for (std::string& c : *cubins) compiled.push_back(std::move(c));
  } else {  // find the culprits one by one
    for (const codegen::ModuleKernel& k : kernels) compiled.push_back(codegen::CompileModule({k}, options.arch));
  }
  for (size_t i = 0; i < cands.size(); ++i) {
    if (!compiled[i].ok()) {
      cands[i].failure = absl::StrCat("NVRTC failed: ", compiled[i].status().message().substr(0, 200));
      continue;
    }
    absl::StatusOr<cudaKernel_t> k = libs.Load(*compiled[i], kernels[i].function, cands[i].launch.shared_bytes);
    if (!k.ok()) {
      cands[i].failure = std::string(k.status().message());
      continue;
    }
    cands[i].kernel = *k;
  }
  return true;
}

// Stores the row's result in `db` when more than the heuristic was measured (a second
// config, or cuBLASLt); else says so in `notes`.
void StoreRow(const Problem& problem, const std::string& device, codegen::TuningDb& db, GemmTuneRow& row,
              std::vector<std::string>& notes) {
  if (row.timed < 2 && row.library_ms <= 0) {
    notes.push_back("only the heuristic was measured: nothing stored");
    return;
  }
  codegen::TuningEntry entry;
  entry.key = problem.key;
  entry.config = row.best;
  entry.tuned_ms = row.best_ms;
  entry.heuristic = row.heuristic;
  entry.heuristic_ms = row.heuristic_ms;
  entry.device = device;
  entry.library_ms = row.library_ms;
  row.library_faster = codegen::LibraryMeasuredFaster(entry);
  db.Put(std::move(entry));
  row.stored = true;
}

}  // namespace

absl::Status CheckTuningDevice(const std::string& arch) {
  absl::StatusOr<GpuInfo> gpu = LocalGpu();
  if (!gpu.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--tune needs a GPU; ", gpu.status().message(),
                     ". Compile without --tune (tile configs then come from the tuning database, where "
                     "an earlier --tune on a GPU of this arch stored them, else from the heuristic)"));
  }
  const std::string local = gpu->arch;
  // sm_80 code runs on 8.6/8.9 too, but it is tuned where it will run: the same arch.
  if (local != arch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--tune measures on the local GPU (", gpu->name, ", ", local.empty() ? "no kiln arch" : local,
        ") but the bundle is compiled for --arch ", arch, "; tune with --arch ",
        local.empty() ? "<the local GPU's>" : local, " here, or on a machine with a ", arch, " GPU"));
  }
  return absl::OkStatus();
}

absl::StatusOr<GemmTuneReport> TuneGemmGroups(const std::vector<Node*>& nodes, codegen::TuningDb& db,
                                              const GemmTuneOptions& options) {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(std::max(options.budget_seconds, 0.0)));
  KILN_RETURN_IF_ERROR(CheckTuningDevice(options.arch));
  KILN_ASSIGN_OR_RETURN(GpuInfo gpu, LocalGpu());
  GemmTuneReport report;
  report.tuned = true;
  report.device = gpu.name;
  report.db_path = db.path();
  report.budget_seconds = options.budget_seconds;

  const std::vector<Problem> problems = DistinctProblems(nodes, options.arch);
  if (problems.empty()) {
    report.note = "no MatMul group runs on kiln's generated GEMM: nothing to tune";
    return report;
  }

  cudaStream_t stream = nullptr;
  KILN_RETURN_IF_ERROR(Cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() { cudaStreamDestroy(s); }
  } stream_guard{stream};
  Events ev;
  KILN_RETURN_IF_ERROR(ev.Create());
  LtHandle lt;  // options.library

  std::string stopped;  // a sticky CUDA error: nothing more can run
  for (const Problem& problem : problems) {
    GemmTuneRow row;
    row.key = problem.key;
    row.groups = problem.groups;
    const bool sm90 = codegen::UsesSm90Gemm(*problem.node, options.arch);
    if (sm90) {
      absl::StatusOr<ops::Sm90GemmConfig> h = ops::HeuristicSm90GemmConfig(*problem.node);
      if (h.ok()) row.heuristic = row.best = *h;
    } else {
      row.heuristic = row.best = ops::HeuristicGemmConfig(problem.gemm);
    }
    if (!stopped.empty()) {
      row.note = "not tuned: tuning stopped (see above)";
      report.rows.push_back(std::move(row));
      continue;
    }
    if (Clock::now() >= deadline) {
      report.budget_exhausted = true;
      row.note = "not tuned: the budget was spent";
      report.rows.push_back(std::move(row));
      continue;
    }
    std::vector<Candidate> cands;
    std::vector<std::string> notes;
    Libraries libs;
    if (!BuildCandidates(problem, sm90, row.heuristic, options, libs, cands, notes)) {
      row.note = absl::StrCat("not tuned: the heuristic's config does not generate; ", absl::StrJoin(notes, "; "));
      report.rows.push_back(std::move(row));
      continue;
    }
    row.candidates = static_cast<int>(cands.size());
    if (!cands[0].failure.empty()) {
      row.note = absl::StrCat("not tuned: the heuristic's kernel: ", cands[0].failure);
      report.rows.push_back(std::move(row));
      continue;
    }

    ProblemRunner runner(*problem.node, stream);
    KILN_RETURN_IF_ERROR(runner.Setup());
    for (const Candidate& c : cands) {
      if (c.failure.empty()) KILN_RETURN_IF_ERROR(runner.Reserve(c.launch));
    }
    std::vector<float> reference;
    int best = -1;
    for (size_t i = 0; i < cands.size(); ++i) {
      Candidate& c = cands[i];
      if (!c.failure.empty()) continue;
      if (i > 0 && Clock::now() >= deadline) {
        report.budget_exhausted = true;
        notes.push_back(absl::StrCat("the budget was spent after ", row.timed, " of ", cands.size(),
                                     " candidates; best so far kept"));
        break;
      }
      const cudaError_t e = runner.Time(c, options, ev, &c.ms);
      if (e != cudaSuccess) {
        c.failure = absl::StrCat(cudaGetErrorName(e), ": ", cudaGetErrorString(e));
        cudaGetLastError();
        if (IsSticky(e)) {
          stopped = absl::StrCat("tuning stopped: ", problem.key.ShapeText(), " config ", c.config.ToString(), ": ",
                                 c.failure);
          break;
        }
        if (i == 0) break;
        continue;
      }
      ++row.timed;
      absl::StatusOr<std::vector<float>> out = runner.Output();
      if (!out.ok()) return out.status();
      if (i == 0) {
        reference = *std::move(out);
        row.heuristic_ms = c.ms;
        best = 0;
        continue;
      }
      c.error = MaxRelError(*out, reference);
      c.failure = Mismatch(*problem.node, c.error);
      if (!c.failure.empty()) continue;
      if (c.ms < cands[best].ms) best = static_cast<int>(i);
    }
    for (const Candidate& c : cands) {
      if (!c.failure.empty()) notes.push_back(absl::StrCat(c.config.ToString(), " left out: ", c.failure));
    }
    if (best < 0) {
      row.note = absl::StrCat("not tuned: ", absl::StrJoin(notes, "; "));
      if (!stopped.empty()) row.note = stopped;
      report.rows.push_back(std::move(row));
      continue;
    }
    // Noise guard: the heuristic stays unless the best is at least 1% faster.
    if (best > 0 && cands[best].ms > 0.99 * cands[0].ms) best = 0;
    row.best = cands[best].config;
    row.best_ms = cands[best].ms;
    row.max_rel_error = cands[best].error;
    // cuBLASLt, where auto mode could give it the group.
    if (options.library && stopped.empty() && !codegen::LibraryKernelName(*problem.node).empty() &&
        std::find(options.without_library.begin(), options.without_library.end(), problem.node) ==
            options.without_library.end()) {
      if (Clock::now() >= deadline) {
        report.budget_exhausted = true;
        notes.push_back("the budget was spent before cuBLASLt was measured");
      } else {
        bool sticky = false;
        absl::StatusOr<double> lib = TimeLibrary(*problem.node, runner, lt, reference, options, ev, &sticky);
        if (lib.ok()) {
          row.library_ms = *lib;
        } else if (sticky) {
          stopped = absl::StrCat("tuning stopped: ", problem.key.ShapeText(), " cuBLASLt: ", lib.status().message());
        } else {
          notes.push_back(absl::StrCat("cuBLASLt left out: ", lib.status().message()));
        }
      }
    }
    StoreRow(problem, gpu.name, db, row, notes);
    if (!stopped.empty()) notes.push_back(stopped);
    row.note = absl::StrJoin(notes, "; ");
    report.rows.push_back(std::move(row));
  }
  if (!stopped.empty()) report.note = stopped;
  KILN_RETURN_IF_ERROR(db.Save());
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

int GroupsTunedToLibrary(const bundle::Manifest& manifest) {
  int n = 0;
  for (const bundle::FusionGroup& g : manifest.fusion().groups()) {
    if (absl::StrContains(g.note(), codegen::kTunedToLibraryReason)) ++n;
  }
  return n;
}

std::string GemmTuneTable(const GemmTuneReport& r) {
  std::string out;
  if (!r.tuned) return out;
  absl::StrAppend(&out, "GEMM tuning on ", r.device, " (database ", r.db_path.empty() ? "none" : r.db_path, ")\n");
  if (!r.note.empty()) absl::StrAppend(&out, "  ", r.note, "\n");
  if (r.rows.empty()) return out;
  absl::StrAppend(&out, absl::StrFormat("  %-40s %-20s %10s %-20s %10s %8s %10s %s\n", "problem (MxNxK dtype layout)",
                                        "heuristic", "ms", "best", "ms", "speedup", "cuBLASLt", "groups"));
  for (const GemmTuneRow& row : r.rows) {
    const std::string speedup =
        row.best_ms > 0 && row.heuristic_ms > 0 ? absl::StrFormat("%.2fx", row.heuristic_ms / row.best_ms) : "-";
    absl::StrAppend(&out, absl::StrFormat("  %-40s %-20s %10s %-20s %10s %8s %10s %s\n", row.key.ShapeText(),
                                          row.heuristic.ToString(), Ms(row.heuristic_ms),
                                          row.best_ms > 0 ? row.best.ToString() : "-", Ms(row.best_ms),
                                          speedup, Ms(row.library_ms), absl::StrJoin(row.groups, ", ")));
    absl::StrAppend(&out, "    ", row.key.signature, ": ", row.timed, "/", row.candidates, " configs measured",
                    row.library_faster ? ", cuBLASLt faster (--matmul-groups auto runs the group on it)" : "",
                    row.stored ? ", stored" : ", not stored",
                    row.timed >= 2 ? absl::StrFormat(", max rel error vs heuristic %.2g", row.max_rel_error) : "",
                    row.note.empty() ? "" : "; ", row.note, "\n");
  }
  absl::StrAppend(&out, absl::StrFormat("  %.1f s of a %.0f s budget%s\n", r.seconds, r.budget_seconds,
                                        r.budget_exhausted ? " (spent: the budget stopped tuning early; "
                                                             "rerun with a larger --tune-budget to measure the rest)"
                                                           : ""));
  return out;
}

}  // namespace kiln
