// GPU backend: weight upload, cubin loading, per-session arena, launches, CUDA graphs.
#include "runtime/gpu_executor.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/library_kernels.h"
#include "common/status_macros.h"
#include "graph/specialize.h"
#include "runtime/tensor_map.h"

namespace kiln {
namespace {

absl::Status Cuda(cudaError_t e, const std::string& what) { return CudaStatus(static_cast<int>(e), what); }

// Whether a GPU of arch `gpu_arch` runs cubins built for `bundle_arch`: cubins run on
// the arch they were built for and, within one major version, on later minors
// (sm_80 code on sm_86/sm_89); sm_90a code only on sm_90.
bool CanRun(const std::string& gpu_arch, const std::string& bundle_arch) {
  if (gpu_arch == bundle_arch) return true;
  return bundle_arch == "sm_80" && (gpu_arch == "sm_86" || gpu_arch == "sm_89");
}

// Whether `values` (one per dim symbol) lie in one of `boxes` ([lo, hi] per symbol,
// box after box); true for no boxes.
bool InSizeBoxes(const std::vector<int64_t>& boxes, const std::vector<int64_t>& values) {
  if (boxes.empty()) return true;
  const size_t n = 2 * values.size();
  for (size_t b = 0; b + n <= boxes.size(); b += n) {
    bool in = true;
    for (size_t k = 0; k < values.size() && in; ++k) {
      in = boxes[b + 2 * k] <= values[k] && values[k] <= boxes[b + 2 * k + 1];
    }
    if (in) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const GpuProgram>> GpuProgram::Create(std::shared_ptr<const CpuProgram> host) {
  if (host == nullptr) return absl::InvalidArgumentError("GpuProgram::Create: null program");
  const Bundle& bundle = host->bundle();
  const bundle::Manifest& m = bundle.manifest();
  const std::string& path = bundle.path();

  // Steps without a GPU kernel: name them all at once, by op.
  std::map<std::string, std::pair<int, std::string>> missing;  // op -> count, first reason
  for (const bundle::Step& step : m.steps()) {
    if (!absl::StartsWith(step.kernel(), "cpu_ref:")) continue;
    auto& [count, reason] = missing[step.op_type()];
    if (count++ == 0) reason = step.gpu_unsupported();
  }
  if (!missing.empty()) {
    std::vector<std::string> parts;
    for (const auto& [op, info] : missing) parts.push_back(absl::StrCat(op, " x", info.first, " (", info.second, ")"));
    return absl::FailedPreconditionError(absl::StrCat(path, ": cannot run on the GPU: no GPU kernel for ",
                                                      absl::StrJoin(parts, "; "),
                                                      ". Run this bundle with --device cpu."));
  }

  auto gpu = LocalGpu();
  if (!gpu.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": --device gpu needs a CUDA GPU: ", gpu.status().message()));
  }
  if (!CanRun(gpu->arch, m.target_arch())) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": the bundle's kernels were compiled for ", m.target_arch(), " but this GPU (", gpu->name,
        ", compute capability ", gpu->major, ".", gpu->minor, ") cannot run them; recompile with --arch ",
        gpu->arch.empty() ? std::string("<an arch kiln supports>") : gpu->arch));
  }

  std::shared_ptr<GpuProgram> p(new GpuProgram());
  p->host_ = std::move(host);
  p->gpu_ = *gpu;

  // Weights: one allocation laid out like the weight section (offsets 256-aligned).
  p->weight_bytes_ = static_cast<int64_t>(m.weight_section_bytes());
  if (p->weight_bytes_ > 0) {
    void* w = nullptr;
    KILN_RETURN_IF_ERROR(Cuda(cudaMalloc(&w, p->weight_bytes_),
                              absl::StrCat(path, ": allocating ", p->weight_bytes_, " bytes of weights on the GPU")));
    p->weights_ = static_cast<uint8_t*>(w);
    const std::vector<Tensor>& weights = p->host_->weights();
    for (int i = 0; i < m.weights_size(); ++i) {
      const Tensor& t = weights[i];
      if (static_cast<uint64_t>(t.nbytes()) != m.weights(i).bytes() ||
          m.weights(i).offset() + m.weights(i).bytes() > m.weight_section_bytes()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": weight '", m.weights(i).name(), "' does not fit"));
      }
      if (t.nbytes() == 0) continue;
      KILN_RETURN_IF_ERROR(Cuda(cudaMemcpy(p->weights_ + m.weights(i).offset(), t.raw_data(), t.nbytes(),
                                           cudaMemcpyHostToDevice),
                                absl::StrCat(path, ": uploading weight '", m.weights(i).name(), "'")));
    }
  }

  // Kernels: every cubin, then each launch's function.
  for (int k = 0; k < m.kernels_size(); ++k) {
    absl::Span<const uint8_t> image = bundle.kernel_bytes(k);
    cudaLibrary_t lib = nullptr;
    KILN_RETURN_IF_ERROR(Cuda(cudaLibraryLoadData(&lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
                              absl::StrCat(path, ": loading kernel module '", m.kernels(k).name(), "' (",
                                           m.kernels(k).arch(), ")")));
    p->libraries_.push_back(lib);
  }
  p->kernels_.resize(m.steps_size());
  for (int s = 0; s < m.steps_size(); ++s) {
    for (const bundle::Launch& launch : m.steps(s).launches()) {
      if (launch.module() < 0 || launch.module() >= static_cast<int>(p->libraries_.size()) ||
          launch.grid_size() != 3 || launch.block_size() != 3) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": step ", s, ": malformed launch of '",
                                                       launch.function(), "'"));
      }
      cudaKernel_t kernel = nullptr;
      KILN_RETURN_IF_ERROR(Cuda(
          cudaLibraryGetKernel(&kernel, static_cast<cudaLibrary_t>(p->libraries_[launch.module()]),
                               launch.function().c_str()),
          absl::StrCat(path, ": step ", s, ": kernel '", launch.function(), "'")));
      if (launch.shared_bytes() > 48 * 1024) {
        KILN_RETURN_IF_ERROR(Cuda(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       static_cast<int>(launch.shared_bytes())),
                                  absl::StrCat(path, ": step ", s, ": shared memory of '", launch.function(), "'")));
      }
      p->kernels_[s].push_back(kernel);
    }
  }
  return std::shared_ptr<const GpuProgram>(std::move(p));
}

GpuProgram::~GpuProgram() {
  for (void* lib : libraries_) cudaLibraryUnload(static_cast<cudaLibrary_t>(lib));
  if (weights_ != nullptr) cudaFree(weights_);
}

void* GpuProgram::weight_ptr(int i) const {
  return weights_ == nullptr ? nullptr : weights_ + bundle().manifest().weights(i).offset();
}

// What one step runs, resolved for this session: the launches' argument arrays or a
// planned library call.
struct GpuExecutor::StepPlan {
  struct LaunchArgs {
    void* kernel = nullptr;
    dim3 grid, block;
    uint32_t shared_bytes = 0;
    // Launched with programmatic stream serialization when the launch before it on
    // the stream is a kernel of the bundle too (EnqueueStep).
    bool grid_dependency_wait = false;
    // Pointer parameters, then TMA tensor maps encoded once for this session's
    // buffers (runtime/tensor_map.h); args() is what cudaLaunchKernel takes.
    kiln::LaunchArgs params;
    // Run-time sizes: per grid axis the extent over the dim symbols and how many of
    // it a block takes (0: the axis is fixed at `grid`).
    std::array<DimExpr, 3> extents;
    std::array<uint64_t, 3> per_block{0, 0, 0};
    // A size variant (bundle::Launch.size_boxes, size_select / size_ranges): [lo, hi]
    // per dim symbol, box after box; the expression and its [lo, hi] pairs. Empty: it
    // runs at every size.
    std::vector<int64_t> size_boxes;
    DimExpr size_select;
    std::vector<int64_t> size_ranges;
    bool variant() const { return !size_boxes.empty() || !size_ranges.empty(); }
  };
  std::vector<LaunchArgs> launches;
  std::unique_ptr<codegen::LibraryKernel> library;
  codegen::LibraryLaunchArgs library_args;
};

// One run size of a dynamic bundle: the graph specialised to it, the library calls
// planned for it (per step; null for the others), each launch's grid and the CUDA
// graph captured for it.
struct GpuExecutor::SizeState {
  std::vector<int64_t> values;
  std::unique_ptr<Graph> graph;
  std::vector<std::unique_ptr<codegen::LibraryKernel>> libraries;
  std::vector<std::vector<dim3>> grids;
  CapturedRun run;
  // The size-only steps' outputs at these sizes (one device allocation) and, per
  // step, the copies a run makes of them into the arena.
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  void* size_only_values = nullptr;
  std::vector<std::vector<Copy>> copies;
  ~SizeState() {
    if (size_only_values != nullptr) cudaFree(size_only_values);
  }
};

void GpuExecutor::CapturedRun::Destroy() {
  if (exec != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
  if (graph != nullptr) cudaGraphDestroy(static_cast<cudaGraph_t>(graph));
  exec = graph = nullptr;
}

bool GpuExecutor::using_cuda_graph() const {
  return (size_ != nullptr ? size_->run.exec : static_run_.exec) != nullptr;
}

void* GpuExecutor::BindingPtr(const bundle::Binding& b) const {
  switch (b.kind()) {
    case bundle::Binding::ARENA: return arena_ + b.offset();
    case bundle::Binding::WEIGHT: return program_->weight_ptr(b.weight_index());
    default: return nullptr;
  }
}

absl::Status GpuExecutor::AllocateKernelWorkspace() {
  const bundle::Manifest& m = program_->bundle().manifest();
  const std::string& path = program_->bundle().path();
  for (const bundle::Step& step : m.steps()) {
    for (const bundle::Launch& launch : step.launches()) {
      semaphore_count_ = std::max(semaphore_count_, launch.semaphores());
      scratch_bytes_ = std::max<uint64_t>(scratch_bytes_, launch.scratch_bytes());
    }
  }
  if (semaphore_count_ > 0) {
    const size_t bytes = static_cast<size_t>(semaphore_count_) * sizeof(uint32_t);
    KILN_RETURN_IF_ERROR(Cuda(cudaMalloc(&semaphores_, bytes),
                              absl::StrCat(path, ": allocating ", semaphore_count_, " kernel semaphores")));
    // On the session's stream: a non-blocking stream is not ordered after cudaMemset's
    // legacy default stream.
    KILN_RETURN_IF_ERROR(Cuda(cudaMemsetAsync(semaphores_, 0, bytes, static_cast<cudaStream_t>(stream_)),
                              absl::StrCat(path, ": zeroing kernel semaphores")));
  }
  if (scratch_bytes_ > 0) {
    KILN_RETURN_IF_ERROR(Cuda(cudaMalloc(&scratch_, scratch_bytes_),
                              absl::StrCat(path, ": allocating ", scratch_bytes_, " bytes of kernel scratch")));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GpuExecutor>> GpuExecutor::Create(std::shared_ptr<const GpuProgram> program,
                                                                 const GpuExecutorOptions& options) {
  if (program == nullptr) return absl::InvalidArgumentError("GpuExecutor::Create: null program");
  std::unique_ptr<GpuExecutor> ex(new GpuExecutor());
  ex->program_ = std::move(program);
  ex->options_ = options;
  const Bundle& bundle = ex->program_->bundle();
  const bundle::Manifest& m = bundle.manifest();
  const std::string& path = bundle.path();
  KILN_RETURN_IF_ERROR(Cuda(cudaSetDevice(ex->program_->gpu().device), "cudaSetDevice"));

  ex->arena_bytes_ = m.memory_plan().arena_bytes();
  void* arena = nullptr;
  KILN_RETURN_IF_ERROR(Cuda(cudaMalloc(&arena, std::max<int64_t>(256, ex->arena_bytes_)),
                            absl::StrCat(path, ": allocating the ", ex->arena_bytes_, "-byte activation arena")));
  ex->arena_ = static_cast<uint8_t*>(arena);
  for (const auto* sig : {&m.inputs(), &m.outputs()}) {
    for (const bundle::TensorSignature& t : *sig) {
      const bundle::Binding& b = t.binding();
      if (b.kind() == bundle::Binding::ARENA && (b.offset() < 0 || b.offset() + b.bytes() > ex->arena_bytes_)) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": '", t.name(), "' lies outside the arena"));
      }
    }
  }

  if (options.stream != nullptr) {
    ex->stream_ = options.stream;
  } else {
    cudaStream_t s = nullptr;
    KILN_RETURN_IF_ERROR(Cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "creating a CUDA stream"));
    ex->stream_ = s;
    ex->own_stream_ = true;
  }

  // Library handles, only when a step needs them.
  bool needs_lt = false, needs_dnn = false;
  for (const bundle::Step& step : m.steps()) {
    needs_lt |= absl::StartsWith(step.kernel(), "cublaslt:");
    needs_dnn |= absl::StartsWith(step.kernel(), "cudnn:");
  }
  codegen::LibraryHandles& handles = ex->handles_;
  if (needs_lt) {
    cublasLtHandle_t h = nullptr;
    if (cublasStatus_t st = cublasLtCreate(&h); st != CUBLAS_STATUS_SUCCESS) {
      return absl::InternalError(absl::StrCat(path, ": cublasLtCreate: ", cublasLtGetStatusString(st)));
    }
    ex->cublaslt_ = h;
    handles.cublaslt = h;
  }
  if (needs_dnn) {
    cudnnHandle_t h = nullptr;
    if (cudnnStatus_t st = cudnnCreate(&h); st != CUDNN_STATUS_SUCCESS) {
      return absl::InternalError(absl::StrCat(path, ": cudnnCreate: ", cudnnGetErrorString(st)));
    }
    ex->cudnn_ = h;
    handles.cudnn = h;
  }

  KILN_RETURN_IF_ERROR(ex->AllocateKernelWorkspace());
  LaunchWorkspace kernel_workspace;
  kernel_workspace.semaphores = ex->semaphores_;
  kernel_workspace.semaphore_count = ex->semaphore_count_;
  kernel_workspace.scratch = ex->scratch_;
  kernel_workspace.scratch_bytes = ex->scratch_bytes_;

  for (int s = 0; s < m.steps_size(); ++s) {
    const bundle::Step& step = m.steps(s);
    auto plan = std::make_unique<StepPlan>();
    const int num_outputs = step.outputs_size();
    auto binding = [&](int a) -> const bundle::Binding& {
      return a < num_outputs ? step.outputs(a) : step.inputs(a - num_outputs);
    };
    if (absl::StartsWith(step.kernel(), "cublaslt:") || absl::StartsWith(step.kernel(), "cudnn:")) {
      const Node& node = ex->program_->host().step_node(s);
      auto lib = codegen::CreateLibraryKernel(node, handles);
      if (!lib.ok()) {
        return absl::Status(lib.status().code(), absl::StrCat(path, ": step ", s, " (", step.kernel(), ", node '",
                                                              step.node(), "'): ", lib.status().message()));
      }
      plan->library = *std::move(lib);
      ex->workspace_bytes_ = std::max(ex->workspace_bytes_, plan->library->workspace_bytes());
      for (const bundle::Binding& b : step.outputs()) plan->library_args.outputs.push_back(ex->BindingPtr(b));
      for (const bundle::Binding& b : step.inputs()) plan->library_args.inputs.push_back(ex->BindingPtr(b));
    }
    for (int j = 0; j < step.launches_size(); ++j) {
      const bundle::Launch& launch = step.launches(j);
      StepPlan::LaunchArgs la;
      la.kernel = ex->program_->kernel(s, j);
      la.grid = dim3(launch.grid(0), launch.grid(1), launch.grid(2));
      la.block = dim3(launch.block(0), launch.block(1), launch.block(2));
      la.shared_bytes = launch.shared_bytes();
      la.grid_dependency_wait = launch.grid_dependency_wait() && ex->options_.enable_programmatic_launch &&
                                ex->program_->gpu().major >= 9;
      codegen::KernelLaunch kl;  // the parameters' description, for LaunchArgs::Build
      kl.args.assign(launch.args().begin(), launch.args().end());
      absl::StatusOr<std::vector<codegen::TensorMapSpec>> maps = TensorMapsFromProto(launch);
      if (!maps.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": step ", s, ": ", maps.status().message()));
      kl.tensor_maps = *std::move(maps);
      kl.semaphores = launch.semaphores();
      kl.scratch_bytes = launch.scratch_bytes();
      kl.dim_param = launch.dim_param();
      if (launch.dim_param() && (launch.grid_extents_size() != 3 || launch.grid_per_block_size() != 3 ||
                                 m.dim_symbols_size() == 0 || m.dim_symbols_size() > codegen::kMaxKernelDims)) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": step ", s, ": malformed run-time sizes of '",
                                                       launch.function(), "'"));
      }
      la.size_boxes.assign(launch.size_boxes().begin(), launch.size_boxes().end());
      la.size_ranges.assign(launch.size_ranges().begin(), launch.size_ranges().end());
      if (!la.size_ranges.empty()) {
        absl::StatusOr<DimExpr> e = DimExpr::Parse(launch.size_select(), DimSymbolsOf(m));
        if (!e.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(path, ": step ", s, ": size variant: ", e.status().message()));
        }
        la.size_select = *std::move(e);
      }
      for (int a = 0; a < 3 && launch.dim_param(); ++a) {
        la.per_block[a] = launch.grid_per_block(a);
        if (la.per_block[a] == 0) continue;
        absl::StatusOr<DimExpr> e = DimExpr::Parse(launch.grid_extents(a), DimSymbolsOf(m));
        if (!e.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": step ", s, ": grid: ", e.status().message()));
        la.extents[a] = *std::move(e);
      }
      for (int a : kl.args) {
        if (a < 0 || a >= num_outputs + step.inputs_size()) {
          return absl::InvalidArgumentError(absl::StrCat(path, ": step ", s, ": launch argument ", a, " out of range"));
        }
      }
      for (const codegen::TensorMapSpec& t : kl.tensor_maps) {
        if (t.tensor < 0 || t.tensor >= num_outputs + step.inputs_size()) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": step ", s, ": tensor map of argument ", t.tensor, " out of range"));
        }
      }
      absl::StatusOr<kiln::LaunchArgs> params =
          kiln::LaunchArgs::Build(kl, [&](int a) { return ex->BindingPtr(binding(a)); }, kernel_workspace, &ex->dims_);
      if (!params.ok()) {
        return absl::Status(params.status().code(), absl::StrCat(path, ": step ", s, " (node '", step.node(),
                                                                 "'): ", params.status().message()));
      }
      la.params = *std::move(params);
      plan->launches.push_back(std::move(la));
    }
    ex->steps_.push_back(std::move(plan));
  }
  if (m.dim_symbols_size() > 0 && options.size_only_steps_on_host) {
    ex->size_only_ = FindSizeOnlySteps(ex->program_->host().graph(), m);
  }
  if (ex->workspace_bytes_ > 0) {
    KILN_RETURN_IF_ERROR(Cuda(cudaMalloc(&ex->workspace_, ex->workspace_bytes_),
                              absl::StrCat(path, ": allocating ", ex->workspace_bytes_, " bytes of library workspace")));
  }
  for (auto& plan : ex->steps_) {
    plan->library_args.workspace = ex->workspace_;
    plan->library_args.workspace_bytes = ex->workspace_bytes_;
    plan->library_args.stream = static_cast<cudaStream_t>(ex->stream_);
  }
  return ex;
}

GpuExecutor::~GpuExecutor() {
  if (stream_ != nullptr) cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  static_run_.Destroy();
  for (auto& state : sizes_) state->run.Destroy();
  sizes_.clear();
  steps_.clear();
  if (cudnn_ != nullptr) cudnnDestroy(static_cast<cudnnHandle_t>(cudnn_));
  if (cublaslt_ != nullptr) cublasLtDestroy(static_cast<cublasLtHandle_t>(cublaslt_));
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (semaphores_ != nullptr) cudaFree(semaphores_);
  if (arena_ != nullptr) cudaFree(arena_);
  if (own_stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

absl::Status GpuExecutor::UploadSizeOnlyOutputs(SizeState& state) {
  const bundle::Manifest& m = program_->bundle().manifest();
  const std::string where =
      absl::StrCat(program_->bundle().path(), " at ", BindingToString(program_->host().graph(), state.values));
  KILN_ASSIGN_OR_RETURN(std::vector<SizeOnlyOutput> outputs, ComputeSizeOnlyOutputs(size_only_, *state.graph, where));
  // One allocation, each output at a 256-byte offset.
  std::vector<size_t> offsets;
  size_t total = 0;
  for (const SizeOnlyOutput& out : outputs) {
    const bundle::Binding& b = m.steps(out.step).outputs(out.output);
    if (b.kind() != bundle::Binding::ARENA || static_cast<uint64_t>(out.tensor.nbytes()) > b.bytes()) {
      return absl::InternalError(absl::StrCat(where, ": step ", out.step, " output ", out.output, ": ",
                                              out.tensor.nbytes(), " bytes do not fit its arena binding"));
    }
    offsets.push_back(total);
    total += (static_cast<size_t>(out.tensor.nbytes()) + 255) / 256 * 256;
  }
  state.copies.assign(steps_.size(), {});
  if (total == 0) return absl::OkStatus();
  KILN_RETURN_IF_ERROR(Cuda(cudaMalloc(&state.size_only_values, total),
                            absl::StrCat(where, ": allocating ", total, " bytes for the size-only steps' outputs")));
  auto* base = static_cast<uint8_t*>(state.size_only_values);
  for (size_t k = 0; k < outputs.size(); ++k) {
    const SizeOnlyOutput& out = outputs[k];
    const size_t bytes = static_cast<size_t>(out.tensor.nbytes());
    if (bytes == 0) continue;
    KILN_RETURN_IF_ERROR(Cuda(cudaMemcpy(base + offsets[k], out.tensor.raw_data(), bytes, cudaMemcpyHostToDevice),
                              absl::StrCat(where, ": uploading step ", out.step, "'s output ", out.output)));
    state.copies[out.step].push_back({BindingPtr(m.steps(out.step).outputs(out.output)), base + offsets[k], bytes});
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GpuExecutor::SizeState>> GpuExecutor::PlanSizes(const std::vector<int64_t>& values) {
  const Bundle& bundle = program_->bundle();
  const std::string& path = bundle.path();
  const Graph& graph = program_->host().graph();
  auto state = std::make_unique<SizeState>();
  state->values = values;
  KILN_ASSIGN_OR_RETURN(state->graph, Specialize(graph, values));
  const std::vector<Node*> nodes = state->graph->nodes();
  if (nodes.size() != steps_.size()) {
    return absl::InternalError(absl::StrCat(path, ": the graph specialised to ", BindingToString(graph, values),
                                            " has ", nodes.size(), " nodes, not one per step"));
  }
  if (size_only_.any()) KILN_RETURN_IF_ERROR(UploadSizeOnlyOutputs(*state));
  state->libraries.resize(steps_.size());
  state->grids.resize(steps_.size());
  for (size_t s = 0; s < steps_.size(); ++s) {
    const StepPlan& plan = *steps_[s];
    if (plan.library != nullptr) {
      auto lib = codegen::CreateLibraryKernel(*nodes[s], handles_);
      if (!lib.ok()) {
        return absl::Status(lib.status().code(), absl::StrCat(path, ": step ", s, " at ", BindingToString(graph, values),
                                                              ": ", lib.status().message()));
      }
      if ((*lib)->workspace_bytes() > workspace_bytes_) KILN_RETURN_IF_ERROR(GrowWorkspace((*lib)->workspace_bytes()));
      state->libraries[s] = *std::move(lib);
    }
    int variants = 0, taken = 0;
    for (const StepPlan::LaunchArgs& la : plan.launches) {
      variants += la.variant() ? 1 : 0;
      bool in = InSizeBoxes(la.size_boxes, values);
      if (in && !la.size_ranges.empty()) {
        KILN_ASSIGN_OR_RETURN(const int64_t x, la.size_select.Evaluate(values));
        in = false;
        for (size_t r = 0; r + 1 < la.size_ranges.size() && !in; r += 2) {
          in = la.size_ranges[r] <= x && x <= la.size_ranges[r + 1];
        }
      }
      if (!in) {  // another variant serves these sizes
        state->grids[s].push_back(dim3(0, 0, 0));
        continue;
      }
      taken += la.variant() ? 1 : 0;
      uint32_t grid[3] = {la.grid.x, la.grid.y, la.grid.z};
      for (int a = 0; a < 3; ++a) {
        if (la.per_block[a] == 0) continue;
        KILN_ASSIGN_OR_RETURN(int64_t extent, la.extents[a].Evaluate(values));
        const uint64_t blocks = (static_cast<uint64_t>(std::max<int64_t>(extent, 1)) + la.per_block[a] - 1) /
                                la.per_block[a];
        grid[a] = static_cast<uint32_t>(std::min<uint64_t>(grid[a], blocks));
      }
      state->grids[s].push_back(dim3(grid[0], grid[1], grid[2]));
    }
    if (variants > 0 && taken != 1) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": step ", s, " at ", BindingToString(graph, values), ": ",
                                                     taken, " of its ", variants,
                                                     " size variants cover these sizes (the bundle is malformed)"));
    }
  }
  return state;
}

absl::Status GpuExecutor::GrowWorkspace(size_t bytes) {
  // Nothing may use the old area; the graphs captured with its address go too.
  KILN_RETURN_IF_ERROR(Synchronize("growing the library workspace"));
  for (auto& state : sizes_) state->run.Destroy();
  if (workspace_ != nullptr) cudaFree(workspace_);
  workspace_ = nullptr;
  workspace_bytes_ = 0;
  KILN_RETURN_IF_ERROR(Cuda(cudaMalloc(&workspace_, bytes), absl::StrCat(program_->bundle().path(), ": allocating ",
                                                                          bytes, " bytes of library workspace")));
  workspace_bytes_ = bytes;
  for (auto& plan : steps_) {
    plan->library_args.workspace = workspace_;
    plan->library_args.workspace_bytes = workspace_bytes_;
  }
  return absl::OkStatus();
}

absl::Status GpuExecutor::SelectSizes(const TensorMap& feeds) {
  const Graph& graph = program_->host().graph();
  std::map<std::string, Shape> shapes;
  for (const auto& [name, t] : feeds) shapes[name] = t.shape();
  absl::StatusOr<std::vector<int64_t>> values = BindDims(graph, shapes);
  if (!values.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(program_->bundle().path(), ": ", values.status().message()));
  }
  auto hit = std::find_if(sizes_.begin(), sizes_.end(), [&](const auto& st) { return st->values == *values; });
  if (hit != sizes_.end()) {
    std::rotate(hit, hit + 1, sizes_.end());  // now the most recently used
  } else {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<SizeState> state, PlanSizes(*values));
    if (static_cast<int>(sizes_.size()) >= kMaxCachedSizes) {
      // Nothing of the oldest size may be in flight when its graph and plans go.
      KILN_RETURN_IF_ERROR(Synchronize("dropping the state of a run size"));
      sizes_.front()->run.Destroy();
      sizes_.erase(sizes_.begin());
    }
    sizes_.push_back(std::move(state));
  }
  size_ = sizes_.back().get();
  dims_ = codegen::KernelDims();
  for (size_t k = 0; k < size_->values.size() && k < codegen::kMaxKernelDims; ++k) dims_.v[k] = size_->values[k];
  return absl::OkStatus();
}

Shape GpuExecutor::OutputShape(int o) const {
  if (size_ != nullptr) return size_->graph->outputs()[o]->shape();
  return ShapeFromProto(program_->bundle().manifest().outputs(o).shape());
}

bool GpuExecutor::SizeOnlyStep(int s) const { return size_ != nullptr && size_only_.any() && size_only_.size_only[s]; }

int GpuExecutor::launches_per_run() const {
  int n = 0;
  for (size_t s = 0; s < steps_.size(); ++s) {
    if (SizeOnlyStep(static_cast<int>(s))) {
      n += static_cast<int>(size_->copies[s].size());
    } else if (steps_[s]->library != nullptr) {
      ++n;
    } else {
      for (size_t j = 0; j < steps_[s]->launches.size(); ++j) n += size_ == nullptr || size_->grids[s][j].x != 0;
    }
  }
  return n;
}

absl::Status GpuExecutor::EnqueueStep(int s, bool* after_kernel) {
  const StepPlan& plan = *steps_[s];
  if (SizeOnlyStep(s)) {  // computed for this size when it was planned
    for (const SizeState::Copy& c : size_->copies[s]) {
      KILN_RETURN_IF_ERROR(
          Cuda(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream_)),
               absl::StrCat(program_->bundle().path(), ": step ", s, ": copying its output")));
      *after_kernel = false;
    }
    return absl::OkStatus();
  }
  const codegen::LibraryKernel* library = size_ != nullptr ? size_->libraries[s].get() : plan.library.get();
  if (library != nullptr) {
    *after_kernel = false;
    return library->Launch(plan.library_args);
  }
  for (size_t j = 0; j < plan.launches.size(); ++j) {
    const StepPlan::LaunchArgs& la = plan.launches[j];
    if (size_ != nullptr && size_->grids[s][j].x == 0) continue;  // a variant for other sizes
    // Programmatic dependent launch only right after another of the bundle's kernels:
    // its CTAs start as that kernel's CTAs exit and wait in KILN_GRID_DEPENDENCY_WAIT()
    // (codegen/templates/prelude.cuh) until its writes are visible. After a library
    // call, a copy or an event the launch is an ordinary one.
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = size_ != nullptr ? size_->grids[s][j] : la.grid;
    config.blockDim = la.block;
    config.dynamicSmemBytes = la.shared_bytes;
    config.stream = static_cast<cudaStream_t>(stream_);
    config.attrs = &attr;
    config.numAttrs = la.grid_dependency_wait && *after_kernel ? 1 : 0;
    cudaError_t e =
        cudaLaunchKernelExC(&config, la.kernel, const_cast<StepPlan::LaunchArgs&>(la).params.params());
    if (e != cudaSuccess) {
      const bundle::Step& step = program_->bundle().manifest().steps(s);
      return Cuda(e, absl::StrCat(program_->bundle().path(), ": step ", s, " (", step.kernel(), ", node '",
                                  step.node(), "'): launch"));
    }
    *after_kernel = true;
  }
  return absl::OkStatus();
}

absl::Status GpuExecutor::EnqueueSteps() {
  bool after_kernel = false;
  for (int s = 0; s < static_cast<int>(steps_.size()); ++s) KILN_RETURN_IF_ERROR(EnqueueStep(s, &after_kernel));
  return absl::OkStatus();
}

absl::Status GpuExecutor::Enqueue() {
  auto stream = static_cast<cudaStream_t>(stream_);
  if (program_->bundle().manifest().dim_symbols_size() > 0 && size_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(program_->bundle().path(), ": a dynamic bundle runs at the sizes of a Run's inputs; Run first"));
  }
  CapturedRun& captured = size_ != nullptr ? size_->run : static_run_;
  if (options_.enable_cuda_graph && captured.exec == nullptr && !captured.failed) {
    // Capture once; on any failure fall back to plain launches for this session.
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    absl::Status enqueued = e == cudaSuccess ? EnqueueSteps() : Cuda(e, "cudaStreamBeginCapture");
    if (e == cudaSuccess) {
      cudaError_t end = cudaStreamEndCapture(stream, &graph);
      if (enqueued.ok() && end != cudaSuccess) enqueued = Cuda(end, "cudaStreamEndCapture");
    }
    cudaGraphExec_t exec = nullptr;
    if (enqueued.ok()) enqueued = Cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    if (enqueued.ok()) {
      captured.graph = graph;
      captured.exec = exec;
      graph_note_ = absl::StrCat("CUDA graph captured (", steps_.size(), " steps",
                                 size_ != nullptr ? absl::StrCat(", one per run size: ", sizes_.size(), " kept") : "",
                                 ")");
    } else {
      if (graph != nullptr) cudaGraphDestroy(graph);
      cudaGetLastError();
      captured.failed = true;
      graph_note_ = absl::StrCat("CUDA graph capture failed, launching step by step: ", enqueued.message());
    }
  }
  if (captured.exec != nullptr) {
    return Cuda(cudaGraphLaunch(static_cast<cudaGraphExec_t>(captured.exec), stream),
                absl::StrCat(program_->bundle().path(), ": cudaGraphLaunch"));
  }
  return EnqueueSteps();
}

absl::Status GpuExecutor::Synchronize(const std::string& what) {
  return Cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)),
              absl::StrCat(program_->bundle().path(), ": ", what));
}

absl::StatusOr<std::vector<Tensor>> GpuExecutor::Run(const TensorMap& feeds) {
  const Bundle& bundle = program_->bundle();
  const bundle::Manifest& m = bundle.manifest();
  KILN_RETURN_IF_ERROR(CheckFeeds(bundle, feeds));
  KILN_RETURN_IF_ERROR(Cuda(cudaSetDevice(program_->gpu().device), "cudaSetDevice"));
  if (m.dim_symbols_size() > 0) KILN_RETURN_IF_ERROR(SelectSizes(feeds));
  auto stream = static_cast<cudaStream_t>(stream_);
  for (const bundle::TensorSignature& in : m.inputs()) {
    const Tensor& t = feeds.at(in.name());
    void* dst = BindingPtr(in.binding());
    if (t.nbytes() == 0 || dst == nullptr) continue;
    KILN_RETURN_IF_ERROR(Cuda(cudaMemcpyAsync(dst, t.raw_data(), t.nbytes(), cudaMemcpyHostToDevice, stream),
                              absl::StrCat(bundle.path(), ": copying input '", in.name(), "' to the GPU")));
  }
  KILN_RETURN_IF_ERROR(Enqueue());
  std::vector<Tensor> results;
  for (int o = 0; o < m.outputs_size(); ++o) {
    const bundle::TensorSignature& out = m.outputs(o);
    KILN_ASSIGN_OR_RETURN(DType dtype, DTypeFromBinding(out.binding()));
    Tensor t(dtype, OutputShape(o));
    const void* src = BindingPtr(out.binding());
    if (t.nbytes() > 0 && src != nullptr) {
      KILN_RETURN_IF_ERROR(Cuda(cudaMemcpyAsync(t.mutable_raw_data(), src, t.nbytes(), cudaMemcpyDeviceToHost, stream),
                                absl::StrCat(bundle.path(), ": copying output '", out.name(), "' from the GPU")));
    }
    results.push_back(std::move(t));
  }
  KILN_RETURN_IF_ERROR(Synchronize("running the model on the GPU"));
  return results;
}

absl::Status GpuExecutor::RunDevice(const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                                    bool synchronize) {
  const Bundle& bundle = program_->bundle();
  const bundle::Manifest& m = bundle.manifest();
  if (m.dim_symbols_size() > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        bundle.path(), ": compiled for dim ranges (", DimRangesText(m),
        "): device pointers carry no sizes, so run it with host tensors (Session::Run), which give them"));
  }
  if (static_cast<int>(inputs.size()) != m.inputs_size() || static_cast<int>(outputs.size()) != m.outputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat(bundle.path(), ": RunDevice takes ", m.inputs_size(),
                                                   " input and ", m.outputs_size(), " output pointers"));
  }
  KILN_RETURN_IF_ERROR(Cuda(cudaSetDevice(program_->gpu().device), "cudaSetDevice"));
  auto stream = static_cast<cudaStream_t>(stream_);
  for (int i = 0; i < m.inputs_size(); ++i) {
    const bundle::Binding& b = m.inputs(i).binding();
    if (inputs[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(bundle.path(), ": input '", m.inputs(i).name(), "' is null"));
    }
    if (b.bytes() == 0) continue;
    KILN_RETURN_IF_ERROR(Cuda(cudaMemcpyAsync(BindingPtr(b), inputs[i], b.bytes(), cudaMemcpyDeviceToDevice, stream),
                              absl::StrCat(bundle.path(), ": copying input '", m.inputs(i).name(), "'")));
  }
  KILN_RETURN_IF_ERROR(Enqueue());
  for (int o = 0; o < m.outputs_size(); ++o) {
    const bundle::Binding& b = m.outputs(o).binding();
    if (outputs[o] == nullptr || b.bytes() == 0) continue;
    KILN_RETURN_IF_ERROR(Cuda(cudaMemcpyAsync(outputs[o], BindingPtr(b), b.bytes(), cudaMemcpyDeviceToDevice, stream),
                              absl::StrCat(bundle.path(), ": copying output '", m.outputs(o).name(), "'")));
  }
  if (synchronize) return Synchronize("running the model on the GPU");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> GpuExecutor::TimeRuns(int iterations) {
  auto stream = static_cast<cudaStream_t>(stream_);
  std::vector<cudaEvent_t> events(iterations + 1, nullptr);
  absl::Status status;
  for (auto& e : events) {
    if (status.ok()) status = Cuda(cudaEventCreate(&e), "cudaEventCreate");
  }
  if (status.ok()) status = Cuda(cudaEventRecord(events[0], stream), "cudaEventRecord");
  for (int i = 0; i < iterations && status.ok(); ++i) {
    status = Enqueue();
    if (status.ok()) status = Cuda(cudaEventRecord(events[i + 1], stream), "cudaEventRecord");
  }
  if (status.ok()) status = Synchronize("timing runs");
  std::vector<double> ms;
  for (int i = 0; i < iterations && status.ok(); ++i) {
    float t = 0;
    status = Cuda(cudaEventElapsedTime(&t, events[i], events[i + 1]), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  for (auto& e : events) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  KILN_RETURN_IF_ERROR(status);
  return ms;
}

}  // namespace kiln
