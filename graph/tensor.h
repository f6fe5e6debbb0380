// Tensor: a dense, row-major host array with a dtype and a static shape.
//
// Storage is shared between copies (cheap to pass around, as graph constants are);
// mutable access copies the buffer first when it is shared (copy on write).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "graph/dtype.h"

namespace kiln {

class Tensor {
 public:
  Tensor() = default;
  // A zero-filled tensor.
  Tensor(DType dtype, Shape shape);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return NumElements(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype_); }
  bool defined() const { return buffer_ != nullptr; }

  const void* raw_data() const { return buffer_ ? buffer_->data() : nullptr; }
  void* mutable_raw_data();
  template <typename T>
  const T* data() const { return static_cast<const T*>(raw_data()); }
  template <typename T>
  T* mutable_data() { return static_cast<T*>(mutable_raw_data()); }

  // Same bytes, another shape with the same element count.
  Tensor Reshaped(Shape shape) const;
  // A copy with the innermost dim zero-padded to `size` (>= its current size): each
  // row's elements, then zeros.
  Tensor PaddedInnermost(int64_t size) const;
  // A copy (rank >= 2) with its last two dims swapped, each matrix transposed.
  Tensor SwappedLastTwo() const;

  // Element values converted to float (numeric and bool dtypes).
  std::vector<float> ToFloat() const;
  // Element values converted to int64 (floats truncate toward zero).
  std::vector<int64_t> ToInt64() const;
  // Builds a tensor of `dtype` from float values (ints truncate; bool is != 0).
  static Tensor FromFloat(DType dtype, Shape shape, absl::Span<const float> values);
  // Builds a tensor of `dtype` from int64 values.
  static Tensor FromInt64(DType dtype, Shape shape, absl::Span<const int64_t> values);
  // Scalar float value of a one-element tensor.
  float ScalarFloat() const;
  int64_t ScalarInt64() const;

  // Short description: "f32[2,3]".
  std::string TypeString() const;

 private:
  DType dtype_ = DType::kFloat32;
  Shape shape_;
  std::shared_ptr<std::vector<uint8_t>> buffer_;
};

}  // namespace kiln
