// Tensor storage and element conversion.
#include "graph/tensor.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "common/float16.h"

namespace kiln {

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype),
      shape_(std::move(shape)),
      buffer_(std::make_shared<std::vector<uint8_t>>(NumElements(shape_) * DTypeSize(dtype))) {}

void* Tensor::mutable_raw_data() {
  if (!buffer_) return nullptr;
  if (buffer_.use_count() > 1) buffer_ = std::make_shared<std::vector<uint8_t>>(*buffer_);
  return buffer_->data();
}

Tensor Tensor::Reshaped(Shape shape) const {
  assert(NumElements(shape) == numel());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::PaddedInnermost(int64_t size) const {
  const int64_t n = shape_.back();
  assert(size >= n);
  const int64_t rows = n == 0 ? 0 : numel() / n;
  const size_t es = DTypeSize(dtype_);
  Shape padded = shape_;
  padded.back() = size;
  Tensor t(dtype_, padded);
  auto* dst = static_cast<uint8_t*>(t.mutable_raw_data());
  std::memset(dst, 0, t.nbytes());
  const auto* src = static_cast<const uint8_t*>(raw_data());
  for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * size * es, src + r * n * es, n * es);
  return t;
}

Tensor Tensor::SwappedLastTwo() const {
  assert(shape_.size() >= 2);
  const size_t r = shape_.size();
  const int64_t rows = shape_[r - 2], cols = shape_[r - 1], mats = rows * cols == 0 ? 0 : numel() / (rows * cols);
  Shape swapped = shape_;
  std::swap(swapped[r - 1], swapped[r - 2]);
  Tensor out(dtype_, swapped);
  const size_t es = DTypeSize(dtype_);
  const auto* src = static_cast<const uint8_t*>(raw_data());
  auto* dst = static_cast<uint8_t*>(out.mutable_raw_data());
  for (int64_t t = 0; t < mats; ++t) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        std::memcpy(dst + ((t * cols + j) * rows + i) * es, src + ((t * rows + i) * cols + j) * es, es);
      }
    }
  }
  return out;
}

namespace {

template <typename Out, typename Fn>
void ForEachAs(const Tensor& t, Out* out, Fn convert) {
  const int64_t n = t.numel();
  switch (t.dtype()) {
    case DType::kFloat32: {
      const float* p = t.data<float>();
      for (int64_t i = 0; i < n; ++i) out[i] = convert(p[i]);
      break;
    }
    case DType::kFloat16: {
      const uint16_t* p = t.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) out[i] = convert(HalfToFloat(p[i]));
      break;
    }
    case DType::kBFloat16: {
      const uint16_t* p = t.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) out[i] = convert(BFloat16ToFloat(p[i]));
      break;
    }
    case DType::kInt64: {
      const int64_t* p = t.data<int64_t>();
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(p[i]);
      break;
    }
    case DType::kInt32: {
      const int32_t* p = t.data<int32_t>();
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(p[i]);
      break;
    }
    case DType::kInt8: {
      const int8_t* p = t.data<int8_t>();
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(p[i]);
      break;
    }
    case DType::kUInt8:
    case DType::kBool: {
      const uint8_t* p = t.data<uint8_t>();
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(p[i]);
      break;
    }
  }
}

template <typename In, typename FromFloatFn>
Tensor Build(DType dtype, Shape shape, absl::Span<const In> values, FromFloatFn to_float) {
  // Floats become integers as the GPU stores them (TruncToInt64), never through an
  // out-of-range cast.
  auto to_int = [](In v) -> int64_t {
    if constexpr (std::is_floating_point_v<In>) {
      return TruncToInt64(v);
    } else {
      return static_cast<int64_t>(v);
    }
  };
  Tensor t(dtype, std::move(shape));
  const int64_t n = t.numel();
  assert(static_cast<int64_t>(values.size()) == n);
  switch (dtype) {
    case DType::kFloat32: {
      float* p = t.mutable_data<float>();
      for (int64_t i = 0; i < n; ++i) p[i] = to_float(values[i]);
      break;
    }
    case DType::kFloat16: {
      uint16_t* p = t.mutable_data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = FloatToHalf(to_float(values[i]));
      break;
    }
    case DType::kBFloat16: {
      uint16_t* p = t.mutable_data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = FloatToBFloat16(to_float(values[i]));
      break;
    }
    case DType::kInt64: {
      int64_t* p = t.mutable_data<int64_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int64_t>(to_int(values[i]));
      break;
    }
    case DType::kInt32: {
      int32_t* p = t.mutable_data<int32_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(to_int(values[i]));
      break;
    }
    case DType::kInt8: {
      int8_t* p = t.mutable_data<int8_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int8_t>(to_int(values[i]));
      break;
    }
    case DType::kUInt8: {
      uint8_t* p = t.mutable_data<uint8_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(to_int(values[i]));
      break;
    }
    case DType::kBool: {
      uint8_t* p = t.mutable_data<uint8_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = values[i] != 0 ? 1 : 0;
      break;
    }
  }
  return t;
}

}  // namespace

std::vector<float> Tensor::ToFloat() const {
  std::vector<float> out(numel());
  if (defined()) ForEachAs(*this, out.data(), [](float f) { return f; });
  return out;
}

std::vector<int64_t> Tensor::ToInt64() const {
  std::vector<int64_t> out(numel());
  if (defined()) {
    ForEachAs(*this, out.data(), [](float f) {
      if (std::isnan(f)) return int64_t{0};
      return static_cast<int64_t>(f);
    });
  }
  return out;
}

Tensor Tensor::FromFloat(DType dtype, Shape shape, absl::Span<const float> values) {
  return Build(dtype, std::move(shape), values, [](float f) { return f; });
}

Tensor Tensor::FromInt64(DType dtype, Shape shape, absl::Span<const int64_t> values) {
  return Build(dtype, std::move(shape), values, [](int64_t v) { return static_cast<float>(v); });
}

float Tensor::ScalarFloat() const { return ToFloat().at(0); }
int64_t Tensor::ScalarInt64() const { return ToInt64().at(0); }

std::string Tensor::TypeString() const { return absl::StrCat(DTypeName(dtype_), ShapeToString(shape_)); }

}  // namespace kiln
