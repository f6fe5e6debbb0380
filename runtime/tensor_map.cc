#include "runtime/tensor_map.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 EncodeFunction(std::string* why_not) {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || p == nullptr) {
      cudaGetLastError();
      error = absl::StrCat("the CUDA driver has no cuTensorMapEncodeTiled (", cudaGetErrorString(e),
                           "): TMA kernels need a GPU and a CUDA 12+ driver");
      return;
    }
    fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  });
  *why_not = error;
  return fn;
}

}  // namespace

absl::StatusOr<EncodedTensorMap> EncodeTensorMap(const codegen::TensorMapSpec& spec, const void* base) {
  if (spec.rank < 1 || spec.rank > 5) {
    return absl::InvalidArgumentError(absl::StrCat("tensor map of rank ", spec.rank, " (TMA takes 1..5)"));
  }
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor map over address 0x", absl::Hex(reinterpret_cast<uintptr_t>(base)),
                     ": TMA needs 16-byte aligned global addresses (route this tensor to a kernel without TMA, e.g. "
                     "the sm_80 GEMM template, or align the buffer)"));
  }
  for (int d = 0; d + 1 < spec.rank; ++d) {
    if (spec.strides_bytes[d] % 16 != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor map stride ", spec.strides_bytes[d], " bytes of dim ", d + 1,
          ": TMA needs strides that are multiples of 16 bytes (the generator must route such shapes elsewhere)"));
    }
  }
  for (int d = 0; d < spec.rank; ++d) {
    if (spec.box[d] == 0 || spec.box[d] > 256) {
      return absl::InvalidArgumentError(absl::StrCat("tensor map box dim ", d, " = ", spec.box[d], " (1..256)"));
    }
  }
  CUtensorMapDataType type;
  switch (spec.dtype) {
    case DType::kFloat16: type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16; break;
    case DType::kBFloat16: type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; break;
    case DType::kFloat32: type = CU_TENSOR_MAP_DATA_TYPE_FLOAT32; break;
    default: return absl::InvalidArgumentError(absl::StrCat("tensor map of ", DTypeName(spec.dtype)));
  }
  CUtensorMapSwizzle swizzle;
  switch (spec.swizzle_bytes) {
    case 0: swizzle = CU_TENSOR_MAP_SWIZZLE_NONE; break;
    case 32: swizzle = CU_TENSOR_MAP_SWIZZLE_32B; break;
    case 64: swizzle = CU_TENSOR_MAP_SWIZZLE_64B; break;
    case 128: swizzle = CU_TENSOR_MAP_SWIZZLE_128B; break;
    default: return absl::InvalidArgumentError(absl::StrCat("tensor map swizzle of ", spec.swizzle_bytes, " bytes"));
  }
  std::string why_not;
  PFN_cuTensorMapEncodeTiled_v12000 encode = EncodeFunction(&why_not);
  if (encode == nullptr) return absl::FailedPreconditionError(why_not);
  cuuint64_t dims[5];
  cuuint64_t strides[4];
  cuuint32_t box[5], elem_strides[5];
  for (int d = 0; d < spec.rank; ++d) {
    dims[d] = spec.dims[d];
    box[d] = spec.box[d];
    elem_strides[d] = 1;
    if (d + 1 < spec.rank) strides[d] = spec.strides_bytes[d];
  }
  EncodedTensorMap out;
  const CUresult r = encode(reinterpret_cast<CUtensorMap*>(out.bytes), type, static_cast<cuuint32_t>(spec.rank),
                            const_cast<void*>(base), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::string dims_text;
    for (int d = 0; d < spec.rank; ++d) absl::StrAppend(&dims_text, d ? ", " : "", spec.dims[d], " (box ", spec.box[d], ")");
    return absl::InternalError(absl::StrCat("cuTensorMapEncodeTiled failed (CUresult ", static_cast<int>(r),
                                            ") for dims ", dims_text));
  }
  return out;
}

absl::StatusOr<LaunchArgs> LaunchArgs::Build(const codegen::KernelLaunch& launch,
                                             const std::function<void*(int)>& pointer_of,
                                             const LaunchWorkspace& workspace,
                                             const codegen::KernelDims* dims) {
  if (launch.dim_param && dims == nullptr) {
    return absl::FailedPreconditionError("the launch takes the run's dim sizes and the runner gave none");
  }
  const bool takes_workspace = launch.semaphores > 0 || launch.scratch_bytes > 0;
  if (takes_workspace && (launch.semaphores > workspace.semaphore_count ||
                          launch.scratch_bytes > workspace.scratch_bytes ||
                          (launch.semaphores > 0 && workspace.semaphores == nullptr) ||
                          (launch.scratch_bytes > 0 && workspace.scratch == nullptr))) {
    return absl::FailedPreconditionError(
        absl::StrCat("the launch needs a workspace of ", launch.semaphores, " semaphores and ", launch.scratch_bytes,
                     " bytes of scratch; the runner gave ", workspace.semaphores ? workspace.semaphore_count : 0,
                     " semaphores and ", workspace.scratch ? workspace.scratch_bytes : 0, " bytes"));
  }
  LaunchArgs a;
  a.pointers_.reserve(launch.args.size() + 2);
  for (int v : launch.args) a.pointers_.push_back(pointer_of(v));
  a.maps_.reserve(launch.tensor_maps.size());
  for (const codegen::TensorMapSpec& spec : launch.tensor_maps) {
    absl::StatusOr<EncodedTensorMap> m = EncodeTensorMap(spec, pointer_of(spec.tensor));
    if (!m.ok()) return m.status();
    a.maps_.push_back(*m);
  }
  if (takes_workspace) {
    a.pointers_.push_back(workspace.semaphores);
    a.pointers_.push_back(workspace.scratch);
  }
  const size_t tensors = launch.args.size();
  for (size_t i = 0; i < tensors; ++i) a.params_.push_back(&a.pointers_[i]);
  for (EncodedTensorMap& m : a.maps_) a.params_.push_back(m.bytes);
  for (size_t i = tensors; i < a.pointers_.size(); ++i) a.params_.push_back(&a.pointers_[i]);
  if (launch.dim_param) a.params_.push_back(const_cast<codegen::KernelDims*>(dims));
  return a;
}

DeviceWorkspace::~DeviceWorkspace() {
  if (view_.semaphores != nullptr) cudaFree(view_.semaphores);
  if (view_.scratch != nullptr) cudaFree(view_.scratch);
}

absl::Status DeviceWorkspace::Reserve(uint32_t semaphores, uint64_t scratch_bytes) {
  if (semaphores > view_.semaphore_count) {
    if (view_.semaphores != nullptr) cudaFree(view_.semaphores);
    view_.semaphores = nullptr;
    view_.semaphore_count = 0;
    void* p = nullptr;
    const size_t bytes = static_cast<size_t>(semaphores) * sizeof(uint32_t);
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaSuccess) e = cudaMemset(p, 0, bytes);
    // Done before any stream (non-blocking ones included) launches into it.
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      if (p != nullptr) cudaFree(p);
      cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrCat("allocating ", semaphores,
                                                       " kernel semaphores: ", cudaGetErrorString(e)));
    }
    view_.semaphores = p;
    view_.semaphore_count = semaphores;
  }
  if (scratch_bytes > view_.scratch_bytes) {
    if (view_.scratch != nullptr) cudaFree(view_.scratch);
    view_.scratch = nullptr;
    view_.scratch_bytes = 0;
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, scratch_bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrCat("allocating ", scratch_bytes,
                                                       " bytes of kernel scratch: ", cudaGetErrorString(e)));
    }
    view_.scratch = p;
    view_.scratch_bytes = scratch_bytes;
  }
  return absl::OkStatus();
}

absl::Status DeviceWorkspace::ReserveFor(const codegen::KernelLaunch& launch) {
  return Reserve(launch.semaphores, launch.scratch_bytes);
}

}  // namespace kiln
