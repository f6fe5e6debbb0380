// Element types of kiln values and tensors, with their names and sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace kiln {

enum class DType : uint8_t {
  kFloat32,
  kFloat16,
  kBFloat16,
  kInt64,
  kInt32,
  kInt8,
  kUInt8,
  kBool,
};

using Shape = std::vector<int64_t>;

// Short name used in the text format and messages: f32, f16, bf16, i64, i32, i8, u8, bool.
absl::string_view DTypeName(DType dtype);
absl::StatusOr<DType> ParseDType(absl::string_view name);
size_t DTypeSize(DType dtype);
bool IsFloating(DType dtype);  // f32, f16, bf16
bool IsInteger(DType dtype);   // i64, i32, i8, u8 (not bool)

// Number of elements of a shape (1 for a scalar).
int64_t NumElements(const Shape& shape);
// "[1,3,224,224]"; "[]" for a scalar.
std::string ShapeToString(const Shape& shape);

}  // namespace kiln
