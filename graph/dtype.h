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

// Number of elements of a shape (1 for a scalar). For shapes already checked
// (CheckedNumElements): every value's type passes that check when it is set by
// import, inference or a bundle's validation.
int64_t NumElements(const Shape& shape);

// The largest tensor a model or bundle may declare: 2^38 bytes (256 GiB), more than
// any GPU holds.
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 38;

// a * b for non-negative a, b; false when it overflows int64.
bool CheckedMul(int64_t a, int64_t b, int64_t* out);
// The element count of `shape`; InvalidArgument naming the shape when a dim is
// negative or the product of its non-zero dims overflows int64.
absl::StatusOr<int64_t> CheckedNumElements(const Shape& shape);
// The bytes of a `dtype` tensor of `shape`; InvalidArgument as above, and when they
// exceed kMaxTensorBytes. `what` (e.g. "input 'x'") starts the message.
absl::StatusOr<int64_t> CheckedTensorBytes(DType dtype, const Shape& shape, absl::string_view what);
// v truncated toward zero into int64, saturating; NaN gives 0. Narrower integer
// types take this value's low bits, as the GPU's stores do (PTX cvt.rzi.s64).
int64_t TruncToInt64(double v);
// "[1,3,224,224]"; "[]" for a scalar.
std::string ShapeToString(const Shape& shape);

}  // namespace kiln
