// Reading and writing tensors as NumPy .npy files and ONNX TensorProto .pb files.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/tensor.h"

namespace kiln {

// Reads a .npy (by extension; anything else is read as a TensorProto .pb).
// float64 data is converted to f32; Fortran-order arrays are rejected.
absl::StatusOr<Tensor> ReadTensorFile(const std::string& path);
absl::StatusOr<Tensor> ReadNpy(const std::string& path);
// `name`, when given, receives the TensorProto's name ("" when it has none).
absl::StatusOr<Tensor> ReadTensorProtoFile(const std::string& path, std::string* name = nullptr);

// Writes a .npy (version 1.0, little endian). bf16 has no NumPy type and is
// written as float32.
absl::Status WriteNpy(const std::string& path, const Tensor& tensor);
absl::Status WriteTensorProtoFile(const std::string& path, const Tensor& tensor, const std::string& name);

}  // namespace kiln
