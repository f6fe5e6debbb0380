// Public value types of the kiln C++ API: DType, Shape, Device, tensor signatures,
// owning host tensors and non-owning tensor references (host or device memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/dtype.h"  // kiln::DType, kiln::Shape, DTypeName, DTypeSize (no other internals)

namespace kiln {

// Where a session runs and where a TensorRef's memory lives.
enum class Device : uint8_t { kCpu, kGpu };
const char* DeviceName(Device device);  // "cpu", "gpu"

// One entry of a model's signature: name, element type, shape. A model compiled for
// dim ranges (`kiln compile --dim seq=1..512`) takes any sizes inside them: `dims` gives
// each dim as an expression over Model::dim_ranges() ("batch", "seq", "768"), `shape` is
// the largest shape and `min_shape` the smallest. For a static model `dims` is empty
// and min_shape == shape.
struct TensorInfo {
  std::string name;
  DType dtype = DType::kFloat32;
  Shape shape;
  std::vector<std::string> dims;
  Shape min_shape;

  bool is_dynamic() const { return !dims.empty(); }

  int64_t numel() const { return NumElements(shape); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype); }
  // "input_ids: i64[1,128]"
  std::string ToString() const;
};

// A named dim of a model compiled for a range of sizes, and the range; `opt` is the
// size its GEMMs were tuned for (`--dim seq=1..512:128`), 0 where none was given.
struct DimRange {
  std::string name;
  int64_t min = 0, max = 0;
  int64_t opt = 0;
};

// A non-owning, writable view of a dense row-major tensor in host (kCpu) or device
// (kGpu) memory. The caller keeps the memory alive for the call it is passed to.
struct TensorRef {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  Shape shape;
  Device device = Device::kCpu;
};

// The read-only counterpart, for inputs. Converts implicitly from TensorRef.
struct ConstTensorRef {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
  Shape shape;
  Device device = Device::kCpu;

  ConstTensorRef() = default;
  ConstTensorRef(const void* d, DType t, Shape s, Device dev = Device::kCpu)
      : data(d), dtype(t), shape(std::move(s)), device(dev) {}
  ConstTensorRef(const TensorRef& r)  // NOLINT(google-explicit-constructor)
      : data(r.data), dtype(r.dtype), shape(r.shape), device(r.device) {}
};

// An owning, dense, row-major host tensor (zero-initialised). Copies are deep.
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, Shape shape);

  // `values` converted to `dtype` (rounded to nearest for f16/bf16, truncated toward
  // zero for integers). InvalidArgument when values.size() != NumElements(shape).
  static absl::StatusOr<HostTensor> FromFloat(DType dtype, Shape shape, const std::vector<float>& values);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return NumElements(shape_); }
  size_t nbytes() const { return bytes_.size(); }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  template <typename T>
  T* data_as() { return reinterpret_cast<T*>(bytes_.data()); }
  template <typename T>
  const T* data_as() const { return reinterpret_cast<const T*>(bytes_.data()); }

  // Every element as float (any dtype).
  std::vector<float> ToFloat() const;
  // "f32[1,10]"
  std::string TypeString() const;

  TensorRef ref() { return TensorRef{data(), dtype_, shape_, Device::kCpu}; }
  ConstTensorRef ref() const { return ConstTensorRef(data(), dtype_, shape_, Device::kCpu); }

 private:
  DType dtype_ = DType::kFloat32;
  Shape shape_;
  std::vector<uint8_t> bytes_;
};

}  // namespace kiln
