// The public C++ API (include/kiln/): Model, Session, HostTensor, profile reports.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "graph/evaluate.h"
#include "graph/tensor.h"
#include "kiln/kiln.h"
#include "runtime/bundle.h"
#include "runtime/cpu_executor.h"
#include "runtime/gpu_executor.h"

namespace kiln {

// ---------------------------------------------------------------- types

const char* DeviceName(Device device) { return device == Device::kGpu ? "gpu" : "cpu"; }

std::string TensorInfo::ToString() const {
  if (is_dynamic()) return absl::StrCat(name, ": ", DTypeName(dtype), "[", absl::StrJoin(dims, ","), "]");
  return absl::StrCat(name, ": ", DTypeName(dtype), ShapeToString(shape));
}

HostTensor::HostTensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), bytes_(static_cast<size_t>(NumElements(shape_)) * DTypeSize(dtype)) {}

absl::StatusOr<HostTensor> HostTensor::FromFloat(DType dtype, Shape shape, const std::vector<float>& values) {
  if (static_cast<int64_t>(values.size()) != NumElements(shape)) {
    return absl::InvalidArgumentError(absl::StrCat("HostTensor::FromFloat: ", values.size(), " values for shape ",
                                                   ShapeToString(shape), " (", NumElements(shape), " elements)"));
  }
  const Tensor t = Tensor::FromFloat(dtype, shape, values);
  HostTensor h(dtype, std::move(shape));
  if (h.nbytes() > 0) std::memcpy(h.data(), t.raw_data(), h.nbytes());
  return h;
}

namespace {

Tensor ToTensor(const void* data, DType dtype, const Shape& shape) {
  Tensor t(dtype, shape);
  if (t.nbytes() > 0) std::memcpy(t.mutable_raw_data(), data, t.nbytes());
  return t;
}

std::string TypeString(DType dtype, const Shape& shape) { return absl::StrCat(DTypeName(dtype), ShapeToString(shape)); }

}  // namespace

std::vector<float> HostTensor::ToFloat() const { return ToTensor(data(), dtype_, shape_).ToFloat(); }

std::string HostTensor::TypeString() const { return kiln::TypeString(dtype_, shape_); }

// ---------------------------------------------------------------- Model

struct Model::Impl {
  std::unique_ptr<Bundle> bundle;
  std::shared_ptr<const CpuProgram> program;  // declared after bundle: destroyed first
  // The device copy of the weights and the loaded kernels, made by the first GPU
  // session and shared by the later ones.
  std::mutex gpu_mu;
  std::shared_ptr<const GpuProgram> gpu_program;
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
  std::vector<DimRange> dim_ranges;
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

absl::StatusOr<std::shared_ptr<const Model>> Model::Load(const std::string& path, const LoadOptions& options) {
  auto impl = std::make_unique<Impl>();
  BundleLoadOptions bundle_options;
  bundle_options.expected_arch = options.expected_arch;
  KILN_ASSIGN_OR_RETURN(impl->bundle, Bundle::Load(path, bundle_options));
  const bundle::Manifest& m = impl->bundle->manifest();
  auto signature = [&](const google::protobuf::RepeatedPtrField<bundle::TensorSignature>& sigs,
                       std::vector<TensorInfo>* out) -> absl::Status {
    for (const bundle::TensorSignature& s : sigs) {
      auto dtype = ParseDType(s.dtype());
      if (!dtype.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": corrupt bundle: '", s.name(), "' has dtype '",
                                                       s.dtype(), "': ", dtype.status().message()));
      }
      TensorInfo info{s.name(), *dtype, ShapeFromProto(s.shape())};
      info.dims.assign(s.dims().begin(), s.dims().end());
      info.min_shape = info.shape;
      if (info.is_dynamic()) {
        std::vector<int64_t> smallest;
        for (const bundle::DimSymbol& d : m.dim_symbols()) smallest.push_back(d.min());
        absl::StatusOr<Shape> min_shape = SignatureShape(m, s, smallest);
        if (!min_shape.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(path, ": corrupt bundle: ", min_shape.status().message()));
        }
        info.min_shape = *min_shape;
      }
      out->push_back(std::move(info));
    }
    return absl::OkStatus();
  };
  for (const bundle::DimSymbol& d : m.dim_symbols()) impl->dim_ranges.push_back({d.name(), d.min(), d.max(), d.opt()});
  KILN_RETURN_IF_ERROR(signature(m.inputs(), &impl->inputs));
  KILN_RETURN_IF_ERROR(signature(m.outputs(), &impl->outputs));
  KILN_ASSIGN_OR_RETURN(impl->program, CpuProgram::Create(*impl->bundle));
  return std::shared_ptr<const Model>(new Model(std::move(impl)));
}

const std::string& Model::path() const { return impl_->bundle->path(); }
const std::vector<TensorInfo>& Model::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& Model::outputs() const { return impl_->outputs; }
const std::vector<DimRange>& Model::dim_ranges() const { return impl_->dim_ranges; }

const TensorInfo* Model::FindInput(const std::string& name) const {
  for (const TensorInfo& t : impl_->inputs) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const TensorInfo* Model::FindOutput(const std::string& name) const {
  for (const TensorInfo& t : impl_->outputs) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const std::string& Model::target_arch() const { return impl_->bundle->manifest().target_arch(); }
const std::string& Model::precision() const { return impl_->bundle->manifest().precision(); }
int Model::num_steps() const { return impl_->bundle->manifest().steps_size(); }
int64_t Model::weight_bytes() const { return impl_->program->weight_bytes(); }
int64_t Model::arena_bytes() const { return impl_->bundle->manifest().memory_plan().arena_bytes(); }

const void* Model::weight_storage() const {
  const std::vector<Tensor>& w = impl_->program->weights();
  return w.empty() ? nullptr : w.front().raw_data();
}

// ---------------------------------------------------------------- Session

struct Session::Impl {
  std::unique_ptr<CpuExecutor> executor;  // kCpu
  std::unique_ptr<GpuExecutor> gpu;       // kGpu
  std::mutex mu;  // one call at a time
};

Session::Session(std::shared_ptr<const Model> model, const SessionOptions& options)
    : model_(std::move(model)), options_(options), impl_(std::make_unique<Impl>()) {}
Session::~Session() = default;

absl::StatusOr<std::unique_ptr<Session>> Session::Create(std::shared_ptr<const Model> model,
                                                         const SessionOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("Session::Create: the model is null (did Model::Load fail?)");
  if (options.device == Device::kGpu) {
    std::shared_ptr<const GpuProgram> program;
    {
      Model::Impl& m = *model->impl_;
      std::lock_guard<std::mutex> lock(m.gpu_mu);
      if (m.gpu_program == nullptr) {
        KILN_ASSIGN_OR_RETURN(m.gpu_program, GpuProgram::Create(m.program));
      }
      program = m.gpu_program;
    }
    std::unique_ptr<Session> session(new Session(model, options));
    GpuExecutorOptions gpu_options;
    gpu_options.stream = options.stream;
    gpu_options.enable_cuda_graph = options.enable_cuda_graph;
    gpu_options.enable_programmatic_launch = options.enable_programmatic_launch;
    KILN_ASSIGN_OR_RETURN(session->impl_->gpu, GpuExecutor::Create(std::move(program), gpu_options));
    return session;
  }
  if (options.stream != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(model->path(), ": SessionOptions::stream is a CUDA stream, for Device::kGpu only; leave it null"
                                    " for a CPU session"));
  }
  std::unique_ptr<Session> session(new Session(model, options));
  KILN_ASSIGN_OR_RETURN(session->impl_->executor, CpuExecutor::Create(model->impl_->program));
  return session;
}

int64_t Session::arena_bytes() const {
  return impl_->gpu != nullptr ? impl_->gpu->arena_bytes() : impl_->executor->arena_bytes();
}
void* Session::stream() const { return impl_->gpu != nullptr ? impl_->gpu->stream() : nullptr; }

const void* Session::weight_storage() const {
  if (impl_->gpu != nullptr) return impl_->gpu->program().weight_storage();
  const std::vector<Tensor>& w = impl_->executor->program().weights();
  return w.empty() ? nullptr : w.front().raw_data();
}

namespace {

std::string Names(const std::vector<TensorInfo>& infos) {
  std::vector<std::string> names;
  for (const TensorInfo& t : infos) names.push_back(t.ToString());
  return absl::StrJoin(names, ", ");
}

// Checks `inputs` (name -> dtype, shape, device) against the model's signature.
// Host inputs become the executor's feeds; with `device_inputs` (a GPU session whose
// inputs are all in GPU memory) the device pointers are collected instead, in
// signature order.
absl::StatusOr<TensorMap> MakeFeeds(const Model& model, const std::map<std::string, ConstTensorRef>& inputs,
                                    std::vector<const void*>* device_inputs = nullptr) {
  for (const auto& [name, ref] : inputs) {
    if (model.FindInput(name) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(model.path(), ": unknown input '", name,
                                                     "'; the model's inputs are: ", Names(model.inputs())));
    }
  }
  TensorMap feeds;
  for (const TensorInfo& info : model.inputs()) {
    auto it = inputs.find(info.name);
    if (it == inputs.end()) {
      return absl::InvalidArgumentError(absl::StrCat(model.path(), ": missing input '", info.name, "' (expected ",
                                                     TypeString(info.dtype, info.shape), ")"));
    }
    const ConstTensorRef& ref = it->second;
    // A dynamic input's sizes are checked against the ranges when the run binds them.
    const bool sizes_match = info.is_dynamic() ? ref.shape.size() == info.shape.size() : ref.shape == info.shape;
    if (ref.dtype != info.dtype || !sizes_match) {
      return absl::InvalidArgumentError(absl::StrCat(model.path(), ": input '", info.name, "' must be ",
                                                     info.is_dynamic() ? info.ToString().substr(info.name.size() + 2)
                                                                       : TypeString(info.dtype, info.shape),
                                                     ", got ", TypeString(ref.dtype, ref.shape)));
    }
    if (ref.device != (device_inputs != nullptr ? Device::kGpu : Device::kCpu)) {
      return absl::InvalidArgumentError(absl::StrCat(
          model.path(), ": input '", info.name, "' is in ", ref.device == Device::kGpu ? "GPU" : "host",
          " memory; ", device_inputs != nullptr ? "a call takes all of its inputs in GPU memory or all in host memory"
                                                : "a CPU session takes host tensors"));
    }
    if (ref.data == nullptr && info.nbytes() > 0) {
      return absl::InvalidArgumentError(absl::StrCat(model.path(), ": input '", info.name, "' has no data (null)"));
    }
    if (device_inputs != nullptr) {
      device_inputs->push_back(ref.data);
    } else {
      feeds[info.name] = ToTensor(ref.data, ref.dtype, ref.shape);
    }
  }
  return feeds;
}

std::map<std::string, ConstTensorRef> Refs(const std::map<std::string, HostTensor>& inputs) {
  std::map<std::string, ConstTensorRef> refs;
  for (const auto& [name, t] : inputs) refs.emplace(name, t.ref());
  return refs;
}

}  // namespace

absl::StatusOr<std::map<std::string, HostTensor>> Session::Run(const std::map<std::string, HostTensor>& inputs) {
  KILN_ASSIGN_OR_RETURN(TensorMap feeds, MakeFeeds(*model_, Refs(inputs)));
  std::vector<Tensor> results;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->gpu != nullptr) {
      KILN_ASSIGN_OR_RETURN(results, impl_->gpu->Run(feeds));
    } else {
      KILN_ASSIGN_OR_RETURN(results, impl_->executor->Run(feeds));
    }
  }
  std::map<std::string, HostTensor> out;
  const std::vector<TensorInfo>& infos = model_->outputs();
  for (size_t i = 0; i < results.size() && i < infos.size(); ++i) {
    HostTensor h(results[i].dtype(), results[i].shape());
    if (h.nbytes() > 0) std::memcpy(h.data(), results[i].raw_data(), h.nbytes());
    out[infos[i].name] = std::move(h);
  }
  return out;
}

absl::Status Session::RunInto(const std::map<std::string, ConstTensorRef>& inputs,
                              const std::map<std::string, TensorRef>& outputs) {
  // A GPU session whose buffers are all in GPU memory runs device to device.
  bool all_device = impl_->gpu != nullptr;
  for (const auto& [name, ref] : inputs) all_device &= ref.device == Device::kGpu;
  for (const auto& [name, ref] : outputs) all_device &= ref.device == Device::kGpu;
  const Device buffers = all_device ? Device::kGpu : Device::kCpu;
  for (const auto& [name, ref] : outputs) {
    const TensorInfo* info = model_->FindOutput(name);
    if (info == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(model_->path(), ": unknown output '", name,
                                                     "'; the model's outputs are: ", Names(model_->outputs())));
    }
    // A dynamic output's buffer is checked against the run's shape after it.
    const bool sizes_match = info->is_dynamic() ? ref.shape.size() == info->shape.size() : ref.shape == info->shape;
    if (ref.dtype != info->dtype || !sizes_match) {
      return absl::InvalidArgumentError(absl::StrCat(model_->path(), ": output buffer '", name, "' must be ",
                                                     TypeString(info->dtype, info->shape), ", got ",
                                                     TypeString(ref.dtype, ref.shape)));
    }
    if (ref.device != buffers) {
      return absl::InvalidArgumentError(absl::StrCat(
          model_->path(), ": output buffer '", name, "' is in ", ref.device == Device::kGpu ? "GPU" : "host", " memory; ",
          impl_->gpu != nullptr ? "a call takes all of its buffers in GPU memory or all in host memory"
                                : "a CPU session writes host memory"));
    }
    if (ref.data == nullptr && info->nbytes() > 0) {
      return absl::InvalidArgumentError(absl::StrCat(model_->path(), ": output buffer '", name, "' is null"));
    }
  }
  if (all_device) {
    std::vector<const void*> device_inputs;
    KILN_RETURN_IF_ERROR(MakeFeeds(*model_, inputs, &device_inputs).status());
    std::vector<void*> device_outputs;
    for (const TensorInfo& info : model_->outputs()) {
      auto it = outputs.find(info.name);
      device_outputs.push_back(it == outputs.end() ? nullptr : it->second.data);
    }
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->gpu->RunDevice(device_inputs, device_outputs);
  }
  KILN_ASSIGN_OR_RETURN(TensorMap feeds, MakeFeeds(*model_, inputs));
  std::vector<Tensor> results;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->gpu != nullptr) {
      KILN_ASSIGN_OR_RETURN(results, impl_->gpu->Run(feeds));
    } else {
      KILN_ASSIGN_OR_RETURN(results, impl_->executor->Run(feeds));
    }
  }
  const std::vector<TensorInfo>& infos = model_->outputs();
  for (size_t i = 0; i < results.size() && i < infos.size(); ++i) {
    auto it = outputs.find(infos[i].name);
    if (it == outputs.end()) continue;
    if (it->second.shape != results[i].shape()) {
      return absl::InvalidArgumentError(absl::StrCat(model_->path(), ": output buffer '", infos[i].name, "' is ",
                                                     TypeString(it->second.dtype, it->second.shape),
                                                     " but this run's output is ", results[i].TypeString()));
    }
    if (results[i].nbytes() > 0) std::memcpy(it->second.data, results[i].raw_data(), results[i].nbytes());
  }
  return absl::OkStatus();
}

absl::StatusOr<ProfileReport> Session::Profile(const std::map<std::string, HostTensor>& inputs, int iterations) {
  if (iterations < 1) {
    return absl::InvalidArgumentError(absl::StrCat("Session::Profile: iterations must be >= 1, got ", iterations));
  }
  KILN_ASSIGN_OR_RETURN(TensorMap feeds, MakeFeeds(*model_, Refs(inputs)));
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->gpu != nullptr) return impl_->gpu->Profile(feeds, iterations);
  return ProfileCpuExecutor(*impl_->executor, feeds, iterations);
}

// ---------------------------------------------------------------- profile output

namespace {

std::vector<const StepProfile*> SortedSteps(const ProfileReport& r) {
  std::vector<const StepProfile*> v;
  for (const StepProfile& p : r.steps) v.push_back(&p);
  std::stable_sort(v.begin(), v.end(), [](const StepProfile* a, const StepProfile* b) {
    return a->median_ms > b->median_ms;
  });
  return v;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace

std::string FormatProfileTable(const ProfileReport& r) {
  std::string out = absl::StrFormat("%-6s %12s %8s  %-28s %s\n", "step", "median ms", "share", "kernel", "ONNX nodes");
  for (const StepProfile* p : SortedSteps(r)) {
    absl::StrAppendFormat(&out, "%-6d %12.4f %7.2f%%  %-28s %s\n", p->index, p->median_ms, 100.0 * p->share,
                          p->kernel, absl::StrJoin(p->onnx_nodes, ", "));
  }
  absl::StrAppendFormat(&out,
                        "%-6s %12.4f %7.2f%%  (%d steps, sum of step medians; whole Run median %.4f ms, "
                        "%d iteration%s)\n",
                        "total", r.steps_total_ms, r.steps.empty() ? 0.0 : 100.0, static_cast<int>(r.steps.size()),
                        r.run_median_ms, r.iterations, r.iterations == 1 ? "" : "s");
  return out;
}

std::string ProfileToJson(const ProfileReport& r) {
  std::string out = absl::StrFormat(
      "{\n  \"model\": %s,\n  \"device\": %s,\n  \"iterations\": %d,\n  \"run_median_ms\": %.6f,\n"
      "  \"steps_total_ms\": %.6f,\n  \"steps\": [",
      JsonString(r.model_path), JsonString(r.device), r.iterations, r.run_median_ms, r.steps_total_ms);
  bool first = true;
  for (const StepProfile* p : SortedSteps(r)) {
    std::vector<std::string> nodes;
    for (const std::string& n : p->onnx_nodes) nodes.push_back(JsonString(n));
    absl::StrAppendFormat(&out,
                          "%s\n    {\"index\": %d, \"kernel\": %s, \"op_type\": %s, \"onnx_nodes\": [%s], "
                          "\"median_ms\": %.6f, \"share\": %.6f}",
                          first ? "" : ",", p->index, JsonString(p->kernel), JsonString(p->op_type),
                          absl::StrJoin(nodes, ", "), p->median_ms, p->share);
    first = false;
  }
  out += first ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

}  // namespace kiln
