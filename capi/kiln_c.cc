// The C API (include/kiln/kiln_c.h) over the C++ API and the compiler driver. Every
// entry point turns absl::Status into a kiln_status plus the thread's last error, and
// no C++ exception crosses into C.
#include "kiln/kiln_c.h"

#include <cuda_runtime_api.h>

#include <exception>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "compiler/compiler.h"
#include "kiln/kiln.h"
#include "runtime/cuda_util.h"
#include "tools/args.h"
#include "tools/compile_flags.h"

struct kiln_model {
  std::shared_ptr<const kiln::Model> model;
  // The C strings of each input's and output's dims (kiln_model_input_dims).
  std::vector<std::vector<const char*>> input_dims, output_dims;
};

struct kiln_session {
  std::shared_ptr<const kiln::Model> model;  // keeps the model alive after kiln_model_free
  std::unique_ptr<kiln::Session> session;
};

namespace {

thread_local std::string last_error;

kiln_status Fail(const absl::Status& status) {
  last_error = std::string(status.message());
  return static_cast<kiln_status>(status.code());
}

kiln_status Fail(kiln_status code, const std::string& message) {
  last_error = message;
  return code;
}

// Runs `body` (returning absl::Status) with C++ exceptions turned into codes.
template <typename Body>
kiln_status Guard(const char* function, Body&& body) {
  try {
    const absl::Status status = body();
    return status.ok() ? KILN_OK : Fail(status);
  } catch (const std::bad_alloc&) {
    return Fail(KILN_RESOURCE_EXHAUSTED, absl::StrCat(function, ": out of host memory"));
  } catch (const std::exception& e) {
    return Fail(KILN_INTERNAL, absl::StrCat(function, ": internal error: ", e.what()));
  } catch (...) {
    return Fail(KILN_INTERNAL, absl::StrCat(function, ": internal error"));
  }
}

absl::Status Null(const char* function, const char* argument) {
  return absl::InvalidArgumentError(absl::StrCat(function, ": ", argument, " is NULL"));
}

bool ValidDType(int dtype) { return dtype >= KILN_F32 && dtype <= KILN_BOOL; }
bool ValidDevice(int device) { return device == KILN_DEVICE_CPU || device == KILN_DEVICE_GPU; }

// Entry `index` of the model's inputs or outputs, for kiln_model_input/output.
kiln_status SignatureEntry(const char* function, const kiln_model* model, size_t index, kiln_tensor_info* info,
                           bool inputs) {
  return Guard(function, [&]() -> absl::Status {
    if (model == nullptr) return Null(function, "model");
    if (info == nullptr) return Null(function, "info");
    const std::vector<kiln::TensorInfo>& entries = inputs ? model->model->inputs() : model->model->outputs();
    if (index >= entries.size()) {
      return absl::OutOfRangeError(absl::StrCat(function, ": index ", index, ", but the model has ", entries.size(),
                                                inputs ? " inputs" : " outputs"));
    }
    const kiln::TensorInfo& t = entries[index];
    info->name = t.name.c_str();
    info->dtype = static_cast<kiln_dtype>(t.dtype);
    info->ndim = static_cast<int32_t>(t.shape.size());
    info->shape = t.shape.data();
    return absl::OkStatus();
  });
}

// The dims and smallest shape of entry `index`, for kiln_model_input_dims/output_dims.
kiln_status SignatureDims(const char* function, const kiln_model* model, size_t index, const char* const** dims,
                          const int64_t** min_shape, bool inputs) {
  return Guard(function, [&]() -> absl::Status {
    if (model == nullptr) return Null(function, "model");
    const std::vector<kiln::TensorInfo>& entries = inputs ? model->model->inputs() : model->model->outputs();
    if (index >= entries.size()) {
      return absl::OutOfRangeError(absl::StrCat(function, ": index ", index, ", but the model has ", entries.size(),
                                                inputs ? " inputs" : " outputs"));
    }
    const std::vector<const char*>& d = (inputs ? model->input_dims : model->output_dims)[index];
    if (dims != nullptr) *dims = d.empty() ? nullptr : d.data();
    if (min_shape != nullptr) *min_shape = entries[index].min_shape.data();
    return absl::OkStatus();
  });
}

// A kiln_tensor array as the C++ API's map of tensor references; `what` is "input" or
// "output". Checks what the C++ API cannot see: NULL names, enum values, shapes.
absl::Status ToRefs(const kiln_tensor* tensors, size_t n, const char* what,
                    std::map<std::string, kiln::TensorRef>* refs) {
  if (n > 0 && tensors == nullptr) return absl::InvalidArgumentError(absl::StrCat("kiln_session_run: ", n, " ", what,
                                                                                  "s but the array is NULL"));
  for (size_t i = 0; i < n; ++i) {
    const kiln_tensor& t = tensors[i];
    if (t.name == nullptr) return absl::InvalidArgumentError(absl::StrCat("kiln_session_run: ", what, " ", i,
                                                                          " has no name (NULL)"));
    const std::string name = t.name;
    const std::string where = absl::StrCat("kiln_session_run: ", what, " '", name, "'");
    if (!ValidDType(t.dtype)) return absl::InvalidArgumentError(absl::StrCat(where, ": no dtype numbered ", t.dtype));
    if (!ValidDevice(t.device)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": no device numbered ", t.device));
    }
    if (t.ndim < 0 || (t.ndim > 0 && t.shape == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ndim ", t.ndim, " with ",
                                                     t.shape == nullptr ? "no shape (NULL)" : "a shape"));
    }
    kiln::TensorRef ref;
    ref.data = t.data;
    ref.dtype = static_cast<kiln::DType>(t.dtype);
    ref.shape.assign(t.shape, t.shape + t.ndim);
    ref.device = t.device == KILN_DEVICE_GPU ? kiln::Device::kGpu : kiln::Device::kCpu;
    if (!refs->emplace(name, std::move(ref)).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, " is given twice"));
    }
  }
  return absl::OkStatus();
}

// DLPack 0.8's ABI (https://github.com/dmlc/dlpack, include/dlpack/dlpack.h): the
// structs and codes kiln hands out, declared here to the letter of that header.
struct DLDevice {
  int32_t device_type;  // kDLCUDA = 2
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // NULL: compact row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
constexpr int32_t kDLCUDA = 2;

DLDataType ToDLDataType(kiln_dtype dtype) {
  switch (dtype) {
    case KILN_F32: return {2, 32, 1};
    case KILN_F16: return {2, 16, 1};
    case KILN_BF16: return {4, 16, 1};
    case KILN_I64: return {0, 64, 1};
    case KILN_I32: return {0, 32, 1};
    case KILN_I8: return {0, 8, 1};
    case KILN_U8: return {1, 8, 1};
    case KILN_BOOL: return {6, 8, 1};
  }
  return {0, 0, 0};
}

struct DLPackContext {
  std::vector<int64_t> shape;
};

void DeleteDLManagedTensor(DLManagedTensor* self) {
  if (self == nullptr) return;
  cudaFree(self->dl_tensor.data);
  delete static_cast<DLPackContext*>(self->manager_ctx);
  delete self;
}

}  // namespace

extern "C" {

int32_t kiln_api_version(void) { return KILN_C_API_VERSION; }

const char* kiln_last_error(void) { return last_error.c_str(); }

const char* kiln_status_name(kiln_status status) {
  static const char* const kNames[] = {"OK",       "CANCELLED",        "UNKNOWN",        "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
                                       "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS"};
  const int i = static_cast<int>(status);
  return i >= 0 && i < 16 ? kNames[i] : "UNKNOWN";
}

const char* kiln_dtype_name(kiln_dtype dtype) {
  static const char* const kNames[] = {"f32", "f16", "bf16", "i64", "i32", "i8", "u8", "bool"};
  return ValidDType(dtype) ? kNames[dtype] : "?";
}

size_t kiln_dtype_size(kiln_dtype dtype) {
  return ValidDType(dtype) ? kiln::DTypeSize(static_cast<kiln::DType>(dtype)) : 0;
}

kiln_status kiln_compile(const char* onnx_path, const char* bundle_path, const char* const* options,
                         size_t num_options) {
  return Guard("kiln_compile", [&]() -> absl::Status {
    if (onnx_path == nullptr) return Null("kiln_compile", "onnx_path");
    if (bundle_path == nullptr) return Null("kiln_compile", "bundle_path");
    if (num_options > 0 && options == nullptr) return Null("kiln_compile", "options");
    std::vector<std::string> argv;
    for (size_t i = 0; i < num_options; ++i) {
      if (options[i] == nullptr) return absl::InvalidArgumentError(absl::StrCat("kiln_compile: option ", i, " is NULL"));
      if (!absl::StartsWith(options[i], "--")) {
        return absl::InvalidArgumentError(absl::StrCat("kiln_compile: option '", options[i],
                                                       "' is not a flag: write kiln compile's options as "
                                                       "--name=value or --name (docs/cli.md)"));
      }
      argv.push_back(options[i]);
    }
    auto args = kiln::cli::Args::Parse(argv, kiln::cli::CompileValueFlags(), kiln::cli::CompileBoolFlags());
    if (!args.ok()) return absl::InvalidArgumentError(absl::StrCat("kiln_compile: ", args.status().message()));
    auto compile_options = kiln::cli::CompileOptionsFromArgs(*args);
    if (!compile_options.ok()) return compile_options.status();
    return kiln::CompileToFile(onnx_path, bundle_path, *compile_options);
  });
}

kiln_status kiln_model_load(const char* path, kiln_model** model) {
  return Guard("kiln_model_load", [&]() -> absl::Status {
    if (path == nullptr) return Null("kiln_model_load", "path");
    if (model == nullptr) return Null("kiln_model_load", "model");
    auto loaded = kiln::Model::Load(path);
    if (!loaded.ok()) return loaded.status();
    auto* m = new kiln_model{*std::move(loaded)};
    for (const kiln::TensorInfo& t : m->model->inputs()) {
      auto& d = m->input_dims.emplace_back();
      for (const std::string& e : t.dims) d.push_back(e.c_str());
    }
    for (const kiln::TensorInfo& t : m->model->outputs()) {
      auto& d = m->output_dims.emplace_back();
      for (const std::string& e : t.dims) d.push_back(e.c_str());
    }
    *model = m;
    return absl::OkStatus();
  });
}

void kiln_model_free(kiln_model* model) { delete model; }

size_t kiln_model_num_inputs(const kiln_model* model) { return model == nullptr ? 0 : model->model->inputs().size(); }
size_t kiln_model_num_outputs(const kiln_model* model) { return model == nullptr ? 0 : model->model->outputs().size(); }

kiln_status kiln_model_input(const kiln_model* model, size_t index, kiln_tensor_info* info) {
  return SignatureEntry("kiln_model_input", model, index, info, /*inputs=*/true);
}

kiln_status kiln_model_output(const kiln_model* model, size_t index, kiln_tensor_info* info) {
  return SignatureEntry("kiln_model_output", model, index, info, /*inputs=*/false);
}

size_t kiln_model_num_dims(const kiln_model* model) { return model == nullptr ? 0 : model->model->dim_ranges().size(); }

namespace {

// The model's dim range at `index`, for the C function `fn`.
absl::StatusOr<const kiln::DimRange*> DimAt(const char* fn, const kiln_model* model, size_t index) {
  if (model == nullptr) return Null(fn, "model");
  const std::vector<kiln::DimRange>& ranges = model->model->dim_ranges();
  if (index >= ranges.size()) {
    return absl::OutOfRangeError(
        absl::StrCat(fn, ": index ", index, ", but the model has ", ranges.size(), " dims with a range"));
  }
  return &ranges[index];
}

}  // namespace

kiln_status kiln_model_dim(const kiln_model* model, size_t index, const char** name, int64_t* min, int64_t* max) {
  return Guard("kiln_model_dim", [&]() -> absl::Status {
    absl::StatusOr<const kiln::DimRange*> range = DimAt("kiln_model_dim", model, index);
    if (!range.ok()) return range.status();
    if (name != nullptr) *name = (*range)->name.c_str();
    if (min != nullptr) *min = (*range)->min;
    if (max != nullptr) *max = (*range)->max;
    return absl::OkStatus();
  });
}

kiln_status kiln_model_dim_opt(const kiln_model* model, size_t index, int64_t* opt) {
  return Guard("kiln_model_dim_opt", [&]() -> absl::Status {
    if (opt == nullptr) return Null("kiln_model_dim_opt", "opt");
    absl::StatusOr<const kiln::DimRange*> range = DimAt("kiln_model_dim_opt", model, index);
    if (!range.ok()) return range.status();
    *opt = (*range)->opt;
    return absl::OkStatus();
  });
}

kiln_status kiln_model_input_dims(const kiln_model* model, size_t index, const char* const** dims,
                                  const int64_t** min_shape) {
  return SignatureDims("kiln_model_input_dims", model, index, dims, min_shape, /*inputs=*/true);
}

kiln_status kiln_model_output_dims(const kiln_model* model, size_t index, const char* const** dims,
                                   const int64_t** min_shape) {
  return SignatureDims("kiln_model_output_dims", model, index, dims, min_shape, /*inputs=*/false);
}

const char* kiln_model_path(const kiln_model* model) { return model == nullptr ? "" : model->model->path().c_str(); }
const char* kiln_model_arch(const kiln_model* model) {
  return model == nullptr ? "" : model->model->target_arch().c_str();
}
const char* kiln_model_precision(const kiln_model* model) {
  return model == nullptr ? "" : model->model->precision().c_str();
}
int64_t kiln_model_weight_bytes(const kiln_model* model) { return model == nullptr ? 0 : model->model->weight_bytes(); }
int64_t kiln_model_arena_bytes(const kiln_model* model) { return model == nullptr ? 0 : model->model->arena_bytes(); }

kiln_status kiln_session_create(kiln_model* model, kiln_device device, void* stream, uint32_t flags,
                                kiln_session** session) {
  return Guard("kiln_session_create", [&]() -> absl::Status {
    if (model == nullptr) return Null("kiln_session_create", "model");
    if (session == nullptr) return Null("kiln_session_create", "session");
    if (!ValidDevice(device)) {
      return absl::InvalidArgumentError(absl::StrCat("kiln_session_create: no device numbered ", device,
                                                     " (KILN_DEVICE_CPU 0, KILN_DEVICE_GPU 1)"));
    }
    if ((flags & ~(KILN_SESSION_NO_CUDA_GRAPH | KILN_SESSION_NO_PROGRAMMATIC_LAUNCH)) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("kiln_session_create: unknown flags 0x", absl::Hex(flags)));
    }
    kiln::SessionOptions options;
    options.device = device == KILN_DEVICE_GPU ? kiln::Device::kGpu : kiln::Device::kCpu;
    options.stream = stream;
    options.enable_cuda_graph = (flags & KILN_SESSION_NO_CUDA_GRAPH) == 0;
    options.enable_programmatic_launch = (flags & KILN_SESSION_NO_PROGRAMMATIC_LAUNCH) == 0;
    auto created = kiln::Session::Create(model->model, options);
    if (!created.ok()) return created.status();
    *session = new kiln_session{model->model, *std::move(created)};
    return absl::OkStatus();
  });
}

void kiln_session_free(kiln_session* session) { delete session; }

kiln_device kiln_session_device(const kiln_session* session) {
  return session != nullptr && session->session->device() == kiln::Device::kGpu ? KILN_DEVICE_GPU : KILN_DEVICE_CPU;
}

void* kiln_session_stream(const kiln_session* session) {
  return session == nullptr ? nullptr : session->session->stream();
}

kiln_status kiln_session_run(kiln_session* session, const kiln_tensor* inputs, size_t num_inputs,
                             const kiln_tensor* outputs, size_t num_outputs) {
  return Guard("kiln_session_run", [&]() -> absl::Status {
    if (session == nullptr) return Null("kiln_session_run", "session");
    std::map<std::string, kiln::TensorRef> in, out;
    if (absl::Status s = ToRefs(inputs, num_inputs, "input", &in); !s.ok()) return s;
    if (absl::Status s = ToRefs(outputs, num_outputs, "output", &out); !s.ok()) return s;
    std::map<std::string, kiln::ConstTensorRef> const_in(in.begin(), in.end());
    return session->session->RunInto(const_in, out);
  });
}

int32_t kiln_gpu_available(void) {
  try {
    return kiln::HasGpu() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

kiln_status kiln_gpu_device(int32_t* device) {
  return Guard("kiln_gpu_device", [&]() -> absl::Status {
    if (device == nullptr) return Null("kiln_gpu_device", "device");
    auto gpu = kiln::LocalGpu();
    if (!gpu.ok()) return gpu.status();
    *device = gpu->device;
    return absl::OkStatus();
  });
}

kiln_status kiln_gpu_alloc(size_t bytes, void** ptr) {
  return Guard("kiln_gpu_alloc", [&]() -> absl::Status {
    if (ptr == nullptr) return Null("kiln_gpu_alloc", "ptr");
    if (!kiln::HasGpu()) return absl::FailedPreconditionError("kiln_gpu_alloc: no CUDA GPU");
    void* p = nullptr;
    if (absl::Status s = kiln::CudaStatus(cudaMalloc(&p, bytes == 0 ? 1 : bytes),
                                          absl::StrCat("kiln_gpu_alloc: cudaMalloc of ", bytes, " bytes"));
        !s.ok()) {
      return s;
    }
    *ptr = p;
    return absl::OkStatus();
  });
}

void kiln_gpu_free(void* ptr) {
  if (ptr != nullptr) cudaFree(ptr);
}

kiln_status kiln_gpu_copy(void* dst, kiln_device dst_device, const void* src, kiln_device src_device, size_t bytes) {
  return Guard("kiln_gpu_copy", [&]() -> absl::Status {
    if (bytes == 0) return absl::OkStatus();
    if (dst == nullptr) return Null("kiln_gpu_copy", "dst");
    if (src == nullptr) return Null("kiln_gpu_copy", "src");
    if (!ValidDevice(dst_device) || !ValidDevice(src_device)) {
      return absl::InvalidArgumentError("kiln_gpu_copy: devices are KILN_DEVICE_CPU (0) or KILN_DEVICE_GPU (1)");
    }
    const bool from_gpu = src_device == KILN_DEVICE_GPU, to_gpu = dst_device == KILN_DEVICE_GPU;
    const cudaMemcpyKind kind = from_gpu ? (to_gpu ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                                         : (to_gpu ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
    return kiln::CudaStatus(cudaMemcpy(dst, src, bytes, kind), absl::StrCat("kiln_gpu_copy: ", bytes, " bytes"));
  });
}

kiln_status kiln_dlpack_from_gpu(void* ptr, kiln_dtype dtype, int32_t ndim, const int64_t* shape, void** managed) {
  return Guard("kiln_dlpack_from_gpu", [&]() -> absl::Status {
    if (ptr == nullptr) return Null("kiln_dlpack_from_gpu", "ptr");
    if (managed == nullptr) return Null("kiln_dlpack_from_gpu", "managed");
    if (!ValidDType(dtype)) {
      return absl::InvalidArgumentError(absl::StrCat("kiln_dlpack_from_gpu: no dtype numbered ", dtype));
    }
    if (ndim < 0 || (ndim > 0 && shape == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat("kiln_dlpack_from_gpu: ndim ", ndim, " needs a shape"));
    }
    int device = 0;
    if (absl::Status s = kiln::CudaStatus(cudaGetDevice(&device), "kiln_dlpack_from_gpu: cudaGetDevice"); !s.ok()) {
      return s;
    }
    auto context = std::make_unique<DLPackContext>();
    context->shape.assign(shape, shape + ndim);
    auto tensor = std::make_unique<DLManagedTensor>();
    tensor->dl_tensor.data = ptr;
    tensor->dl_tensor.device = DLDevice{kDLCUDA, device};
    tensor->dl_tensor.ndim = ndim;
    tensor->dl_tensor.dtype = ToDLDataType(dtype);
    tensor->dl_tensor.shape = context->shape.data();
    tensor->dl_tensor.strides = nullptr;
    tensor->dl_tensor.byte_offset = 0;
    tensor->manager_ctx = context.release();
    tensor->deleter = DeleteDLManagedTensor;
    *managed = tensor.release();
    return absl::OkStatus();
  });
}

void kiln_dlpack_delete(void* managed) {
  auto* tensor = static_cast<DLManagedTensor*>(managed);
  if (tensor != nullptr && tensor->deleter != nullptr) tensor->deleter(tensor);
}

}  // extern "C"
