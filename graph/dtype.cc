// Element type names, sizes and shape helpers.
#include "graph/dtype.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "f32";
    case DType::kFloat16: return "f16";
    case DType::kBFloat16: return "bf16";
    case DType::kInt64: return "i64";
    case DType::kInt32: return "i32";
    case DType::kInt8: return "i8";
    case DType::kUInt8: return "u8";
    case DType::kBool: return "bool";
  }
  return "?";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  for (DType d : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt64,
                  DType::kInt32, DType::kInt8, DType::kUInt8, DType::kBool}) {
    if (DTypeName(d) == name) return d;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name, "' (expected f32, f16, bf16, i64, i32, i8, u8 or bool)"));
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kInt64: return 8;
    case DType::kInt32: return 4;
    case DType::kInt8: return 1;
    case DType::kUInt8: return 1;
    case DType::kBool: return 1;
  }
  return 0;
}

bool IsFloating(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16;
}

bool IsInteger(DType d) {
  return d == DType::kInt64 || d == DType::kInt32 || d == DType::kInt8 || d == DType::kUInt8;
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t TruncToInt64(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

bool CheckedMul(int64_t a, int64_t b, int64_t* out) {
  if (a < 0 || b < 0) return false;
  return !__builtin_mul_overflow(a, b, out);
}

absl::StatusOr<int64_t> CheckedNumElements(const Shape& shape) {
  // The product of the non-zero dims must fit too (a zero dim makes the count 0, but
  // code that splits a shape at an axis multiplies the others).
  int64_t nonzero = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeToString(shape), " has a negative dim"));
    empty |= d == 0;
    if (d != 0 && !CheckedMul(nonzero, d, &nonzero)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", ShapeToString(shape), " has more elements than a 64-bit count holds"));
    }
  }
  return empty ? 0 : nonzero;
}

absl::StatusOr<int64_t> CheckedTensorBytes(DType dtype, const Shape& shape, absl::string_view what) {
  absl::StatusOr<int64_t> n = CheckedNumElements(shape);
  int64_t bytes = 0;
  if (!n.ok() || !CheckedMul(*n, static_cast<int64_t>(DTypeSize(dtype)), &bytes) || bytes > kMaxTensorBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", DTypeName(dtype), ShapeToString(shape), " is too large: ",
        n.ok() ? absl::StrCat(*n, " elements") : std::string(n.status().message()),
        "; kiln takes tensors of at most 2^38 bytes (256 GiB)"));
  }
  return bytes;
}

std::string ShapeToString(const Shape& shape) { return absl::StrCat("[", absl::StrJoin(shape, ","), "]"); }

}  // namespace kiln
