// Conversion between ONNX TensorProto / element types and kiln tensors / dtypes.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "graph/tensor.h"
#include "onnx/onnx_pb.h"

namespace kiln {

// ONNX TensorProto.DataType number -> DType; error names the ONNX type.
absl::StatusOr<DType> DTypeFromOnnx(int32_t elem_type);
int32_t OnnxFromDType(DType dtype);
// "FLOAT", "DOUBLE", ... for messages.
std::string OnnxTypeName(int32_t elem_type);

// Reads a TensorProto (typed fields, raw_data, or external data resolved against
// `base_dir`). DOUBLE tensors are converted to f32 when `double_to_float` is set
// (used for user-supplied input files), otherwise they are an error.
absl::StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& proto, const std::string& base_dir,
                                       bool double_to_float = false);
onnx::TensorProto TensorToProto(const Tensor& tensor, const std::string& name);

}  // namespace kiln
