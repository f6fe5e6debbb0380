// fp32 read/write access to tensors of any dtype.
#include "graph/ops/float_access.h"



namespace kiln::ops {

FloatView::FloatView(const Tensor& t) {
  if (t.dtype() == DType::kFloat32) {
    ptr_ = t.data<float>();
  } else {
    copy_ = t.ToFloat();
    ptr_ = copy_.data();
  }
}

FloatSink::FloatSink(Tensor& t) : tensor_(t) {
  if (t.dtype() == DType::kFloat32) {
    ptr_ = t.mutable_data<float>();
  } else {
    buffer_.resize(t.numel());
    ptr_ = buffer_.data();
  }
}

void FloatSink::Commit() {
  if (tensor_.dtype() != DType::kFloat32) {
    tensor_ = Tensor::FromFloat(tensor_.dtype(), tensor_.shape(), buffer_);
  }
}

}  // namespace kiln::ops
