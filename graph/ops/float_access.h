// fp32 access to tensors of any dtype for the CPU reference: FloatView reads
// (f32 in place, other dtypes converted once), FloatSink writes (f32 in place,
// other dtypes through a buffer converted on Commit). Internal to graph/ops.
#pragma once

#include <vector>

#include "graph/tensor.h"

namespace kiln::ops {

// Read access to a tensor's elements as fp32: f32 data is used in place, other
// dtypes are converted once.
class FloatView {
 public:
  explicit FloatView(const Tensor& t);
  FloatView(const FloatView&) = delete;
  FloatView& operator=(const FloatView&) = delete;
  const float* data() const { return ptr_; }

 private:
  std::vector<float> copy_;
  const float* ptr_ = nullptr;
};

// Write access to an output as fp32: f32 outputs are written in place, other
// dtypes through a buffer that Commit() converts into the tensor.
class FloatSink {
 public:
  explicit FloatSink(Tensor& t);
  FloatSink(const FloatSink&) = delete;
  FloatSink& operator=(const FloatSink&) = delete;
  float* data() { return ptr_; }
  void Commit();

 private:
  Tensor& tensor_;
  std::vector<float> buffer_;
  float* ptr_ = nullptr;
};

}  // namespace kiln::ops
