// GPU backend: runs a bundle's steps on the current CUDA device.
//
// GpuProgram is the part shared by every session of a model: the weights, uploaded
// once into one device allocation laid out like the bundle's weight section, and the
// bundle's cubins, loaded with cudaLibraryLoadData (cudart only, no libcuda).
// GpuExecutor is one session: one device arena of the planned size, a stream (the
// caller's or its own), cuBLASLt and cuDNN handles, the library calls planned for
// this device, the kernel workspace (one semaphore area, zeroed once, and one scratch
// area, each the largest any launch asks for; codegen/kernel_launch.h "Workspace"),
// and the argument arrays of every launch, resolved once. A run copies
// the inputs into the arena, enqueues the steps in order and copies the outputs out.
// With CUDA graphs on, the steps are captured into a graph on the first run and the
// graph is replayed afterwards (if capture fails, the executor launches step by step
// and says so in cuda_graph_note()).
//
// Dynamic bundles (compiled for dim ranges, docs/dynamic_shapes.md). A run binds the
// dim symbols from the feeds' shapes and uses the state of those sizes: the graph
// specialised to them, the library calls planned for them, each launch's grid at
// them and a CUDA graph captured for them. The states of the last kMaxCachedSizes
// sizes are kept (the oldest is dropped first); every size runs in the one arena
// planned for the largest. Kernels with run-time sizes read the symbols' values
// (codegen/kernel_launch.h).
//
// Thread-safety: a GpuProgram is immutable and may be shared across threads; a
// GpuExecutor runs one call at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/library_kernels.h"
#include "graph/evaluate.h"
#include "kiln/profile.h"
#include "runtime/bundle.h"
#include "runtime/cpu_executor.h"
#include "runtime/cuda_util.h"
#include "runtime/size_only_steps.h"

namespace kiln {

class GpuProgram {
 public:
  // Checks that every step has a GPU kernel (FailedPrecondition listing the ops that
  // do not) and that this GPU can run the bundle's arch, uploads the weights and
  // loads the kernels. FailedPrecondition without a GPU. `host` supplies the graph
  // nodes and weights and must come from the same bundle.
  static absl::StatusOr<std::shared_ptr<const GpuProgram>> Create(std::shared_ptr<const CpuProgram> host);
  ~GpuProgram();
  GpuProgram(const GpuProgram&) = delete;
  GpuProgram& operator=(const GpuProgram&) = delete;

  const Bundle& bundle() const { return host_->bundle(); }
  const CpuProgram& host() const { return *host_; }
  const GpuInfo& gpu() const { return gpu_; }
  // Device address of weight `i`.
  void* weight_ptr(int i) const;
  const void* weight_storage() const { return weights_; }
  int64_t weight_bytes() const { return weight_bytes_; }
  // The loaded kernel (a cudaKernel_t) behind step `s`'s launch `j`.
  void* kernel(int s, int j) const { return kernels_[s][j]; }

 private:
  GpuProgram() = default;
  std::shared_ptr<const CpuProgram> host_;
  GpuInfo gpu_;
  uint8_t* weights_ = nullptr;
  int64_t weight_bytes_ = 0;
  std::vector<void*> libraries_;           // cudaLibrary_t per bundle kernel image
  std::vector<std::vector<void*>> kernels_;  // per step, per launch
};

struct GpuExecutorOptions {
  void* stream = nullptr;  // cudaStream_t to launch on; nullptr: the executor's own
  bool enable_cuda_graph = true;
  // On sm_90 and later, a generated kernel that follows another starts as that one's
  // CTAs exit (programmatic dependent launch; bundle::Launch.grid_dependency_wait).
  bool enable_programmatic_launch = true;
  // Dynamic bundles: the steps whose outputs depend on the run's sizes alone
  // (graph/specialize.h SizeOnlyNodes: the masks and position ids that transformers
  // build from the input's shape) are computed once per run size, on the host, and a
  // run copies their results into the arena from a device copy kept with that size's
  // state, instead of running their kernels every time. Off: their kernels run.
  bool size_only_steps_on_host = true;
};

class GpuExecutor {
 public:
  static absl::StatusOr<std::unique_ptr<GpuExecutor>> Create(std::shared_ptr<const GpuProgram> program,
                                                             const GpuExecutorOptions& options = {});
  ~GpuExecutor();
  GpuExecutor(const GpuExecutor&) = delete;
  GpuExecutor& operator=(const GpuExecutor&) = delete;

  // Host tensors in and out (CheckFeeds rules); synchronises before returning.
  absl::StatusOr<std::vector<Tensor>> Run(const TensorMap& feeds);
  // Device memory in and out: inputs[i] / outputs[i] are device pointers for the
  // signature's input / output i (outputs may be nullptr: not copied). Enqueued on the
  // stream; synchronises only when `synchronize`.
  absl::Status RunDevice(const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                         bool synchronize = true);
  // One warm-up run, then `iterations` runs timing each step with CUDA events (steps
  // launched one by one, no graph, the stream held until all are enqueued, so a step's
  // time is the GPU's and not the host's launch time) and each whole run (graph replay
  // when enabled).
  absl::StatusOr<ProfileReport> Profile(const TensorMap& feeds, int iterations);

  // Device time of `iterations` back-to-back runs on the data already in the arena
  // (no copies in or out; graph replay when enabled), one CUDA-event time in
  // milliseconds per run. Call after a Run.
  absl::StatusOr<std::vector<double>> TimeRuns(int iterations);

  int64_t arena_bytes() const { return arena_bytes_; }
  // The generated kernels' workspace (separate from the libraries' workspace):
  // `kernel_semaphore_count()` uint32 counters at `kernel_semaphores()` (zero
  // between runs), and the scratch area's size.
  const void* kernel_semaphores() const { return semaphores_; }
  uint32_t kernel_semaphore_count() const { return semaphore_count_; }
  uint64_t kernel_scratch_bytes() const { return scratch_bytes_; }
  void* stream() const { return stream_; }
  const GpuProgram& program() const { return *program_; }
  // What one run enqueues: kernel launches, library calls and copies (at the sizes of
  // the last run, for a dynamic bundle); views count none.
  int launches_per_run() const;
  // Whether the last run replayed (or captured) a CUDA graph.
  bool using_cuda_graph() const;
  const std::string& cuda_graph_note() const { return graph_note_; }
  // Dynamic bundles: the sizes whose state is kept, at most kMaxCachedSizes.
  int cached_sizes() const { return static_cast<int>(sizes_.size()); }
  static constexpr int kMaxCachedSizes = 8;

 private:
  struct StepPlan;
  struct SizeState;
  // A captured CUDA graph of the steps, or why there is none.
  struct CapturedRun {
    void* graph = nullptr;  // cudaGraph_t
    void* exec = nullptr;   // cudaGraphExec_t
    bool failed = false;
    void Destroy();
  };
  // Dynamic bundles: binds the feeds' sizes and makes their state the current one
  // (from the cache, or planned now; the least recently used dropped beyond
  // kMaxCachedSizes).
  absl::Status SelectSizes(const TensorMap& feeds);
  absl::StatusOr<std::unique_ptr<SizeState>> PlanSizes(const std::vector<int64_t>& values);
  // PlanSizes' part for the size-only steps (runtime/size_only_steps.h): the outputs a
  // run copies, computed at the state's sizes and uploaded into its device copy.
  absl::Status UploadSizeOnlyOutputs(SizeState& state);
  // Whether step `s` is size-only at the current run size (its copies replace it).
  bool SizeOnlyStep(int s) const;
  // A library call planned for a run size asks for more workspace than the session
  // holds: a larger area, and no captured graph keeps the old one's address.
  absl::Status GrowWorkspace(size_t bytes);
  // The run's shape of output `o` (the signature's for a static bundle).
  Shape OutputShape(int o) const;
  GpuExecutor() = default;
  void* BindingPtr(const bundle::Binding& b) const;
  // The generated kernels' workspace (Create): one semaphore area, zeroed here once
  // (kernels leave it zero), and one scratch area for all launches, which run in
  // stream order; each as large as the largest launch asks.
  absl::Status AllocateKernelWorkspace();
  // *after_kernel: whether the last thing enqueued on the stream is one of the
  // bundle's kernels (then a launch may overlap it); updated.
  absl::Status EnqueueStep(int s, bool* after_kernel);
  absl::Status EnqueueSteps();
  absl::Status Enqueue();  // graph replay or EnqueueSteps
  absl::Status Synchronize(const std::string& what);

  std::shared_ptr<const GpuProgram> program_;
  GpuExecutorOptions options_;
  uint8_t* arena_ = nullptr;
  int64_t arena_bytes_ = 0;
  void* workspace_ = nullptr;  // the libraries' (cuBLASLt, cuDNN)
  size_t workspace_bytes_ = 0;
  void* semaphores_ = nullptr;  // the generated kernels' (KernelLaunch::semaphores)
  uint32_t semaphore_count_ = 0;
  void* scratch_ = nullptr;  // ... and KernelLaunch::scratch_bytes
  uint64_t scratch_bytes_ = 0;
  void* stream_ = nullptr;
  bool own_stream_ = false;
  void* cublaslt_ = nullptr;
  void* cudnn_ = nullptr;
  std::vector<std::unique_ptr<StepPlan>> steps_;
  // Dynamic bundles with size_only_steps_on_host: the size-only steps.
  SizeOnlySteps size_only_;
  CapturedRun static_run_;  // a static bundle's
  std::string graph_note_;
  // Dynamic bundles: the library handles (for plans per size), the cached sizes' states
  // (least recently used first), the current one and the values its launches read.
  codegen::LibraryHandles handles_;
  std::vector<std::unique_ptr<SizeState>> sizes_;
  SizeState* size_ = nullptr;
  codegen::KernelDims dims_;
};

}  // namespace kiln
