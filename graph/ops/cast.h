// ONNX Cast semantics on tensors, shared by Cast and CastLike (defined in
// graph/ops/cast.cc). Internal to graph/ops.
#pragma once

#include "graph/dtype.h"
#include "graph/tensor.h"

namespace kiln::ops {

// Converts `in` to dtype `to` with ONNX Cast semantics: floats to integers
// truncate toward zero (NaN gives 0, out-of-range values saturate to int64 then
// wrap), anything to bool is x != 0, integers convert exactly through int64.
Tensor CastTensor(const Tensor& in, DType to);

}  // namespace kiln::ops
