// TensorProto <-> Tensor conversion, including external data files.
#include "frontend/onnx_tensor.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/float16.h"
#include "common/status_macros.h"

namespace kiln {

using onnx::TensorProto;

absl::StatusOr<DType> DTypeFromOnnx(int32_t t) {
  switch (t) {
    case TensorProto::FLOAT: return DType::kFloat32;
    case TensorProto::FLOAT16: return DType::kFloat16;
    case TensorProto::BFLOAT16: return DType::kBFloat16;
    case TensorProto::INT64: return DType::kInt64;
    case TensorProto::INT32: return DType::kInt32;
    case TensorProto::INT8: return DType::kInt8;
    case TensorProto::UINT8: return DType::kUInt8;
    case TensorProto::BOOL: return DType::kBool;
    default:
      return absl::UnimplementedError(absl::StrCat(
          "element type ", OnnxTypeName(t),
          " is not supported (kiln supports FLOAT, FLOAT16, BFLOAT16, INT64, INT32, INT8, UINT8, BOOL)"));
  }
}

int32_t OnnxFromDType(DType d) {
  switch (d) {
    case DType::kFloat32: return TensorProto::FLOAT;
    case DType::kFloat16: return TensorProto::FLOAT16;
    case DType::kBFloat16: return TensorProto::BFLOAT16;
    case DType::kInt64: return TensorProto::INT64;
    case DType::kInt32: return TensorProto::INT32;
    case DType::kInt8: return TensorProto::INT8;
    case DType::kUInt8: return TensorProto::UINT8;
    case DType::kBool: return TensorProto::BOOL;
  }
  return TensorProto::UNDEFINED;
}

std::string OnnxTypeName(int32_t t) {
  if (TensorProto::DataType_IsValid(t)) return TensorProto::DataType_Name(static_cast<TensorProto::DataType>(t));
  return absl::StrCat("#", t);
}

namespace {

absl::StatusOr<std::string> ReadExternalData(const TensorProto& proto, const std::string& base_dir) {
  const std::string what = absl::StrCat("tensor '", proto.name(), "'");
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : proto.external_data()) {
    if (kv.key() == "location") location = kv.value();
    if (kv.key() == "offset" || kv.key() == "length") {
      int64_t v;
      if (!absl::SimpleAtoi(kv.value(), &v) || v < 0) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": external data ", kv.key(), " '", kv.value(),
                                                       "' is not a non-negative integer"));
      }
      (kv.key() == "offset" ? offset : length) = v;
    }
  }
  if (location.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": external data has no location"));
  std::filesystem::path rel(location);
  if (rel.is_absolute() || location.find("..") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": external data location '", location, "' must be a relative path inside the model's folder"));
  }
  const std::filesystem::path path = std::filesystem::path(base_dir) / rel;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(what, ": external data file '", location,
                                            "' not found (looked for ", path.string(), ")"));
  }
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": external data location '", location,
                                                   "' is not a regular file (", path.string(), ")"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(what, ": external data file '", location,
                                            "' cannot be opened (looked for ", path.string(), ")"));
  }
  in.seekg(0, std::ios::end);
  const int64_t size = in.tellg();
  if (size < 0) return absl::DataLossError(absl::StrCat(what, ": cannot read external data file ", path.string()));
  // Compared without forming offset + length, which may overflow.
  if (offset > size || (length >= 0 && length > size - offset)) {
    const std::string range =
        length < 0 ? absl::StrCat("[", offset, ", end)")
        : offset > std::numeric_limits<int64_t>::max() - length
            ? absl::StrCat("offset ", offset, " + length ", length)
            : absl::StrCat("[", offset, ", ", offset + length, ")");
    return absl::OutOfRangeError(absl::StrCat(what, ": external data range ", range, " lies outside '",
                                              path.string(), "' (", size, " bytes)"));
  }
  if (length < 0) length = size - offset;
  std::string bytes(length, '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  if (!in) return absl::DataLossError(absl::StrCat(what, ": reading external data from ", path.string(), " failed"));
  return bytes;
}

// Copies typed repeated-field values into `out`.
template <typename Field, typename Store>
absl::Status CopyField(const Field& field, int64_t n, const std::string& what, Store store) {
  if (field.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": holds ", field.size(), " values but its shape needs ", n));
  }
  for (int64_t i = 0; i < n; ++i) store(i, field.Get(i));
  return absl::OkStatus();
}

// The number of values a proto's typed field holds for its data type.
int64_t TypedFieldSize(const TensorProto& proto) {
  switch (proto.data_type()) {
    case TensorProto::FLOAT: return proto.float_data_size();
    case TensorProto::DOUBLE: return proto.double_data_size();
    case TensorProto::INT64: return proto.int64_data_size();
    default: return proto.int32_data_size();
  }
}

}  // namespace

absl::StatusOr<Tensor> TensorFromProto(const TensorProto& proto, const std::string& base_dir,
                                       bool double_to_float) {
  const std::string what = absl::StrCat("tensor '", proto.name(), "'");
  Shape shape(proto.dims().begin(), proto.dims().end());
  // (Unsupported element types are rejected below, with their own message.)
  auto known = DTypeFromOnnx(proto.data_type());
  const bool is_double = proto.data_type() == TensorProto::DOUBLE;
  const int64_t elem_size = is_double ? 8 : known.ok() ? DTypeSize(*known) : 0;
  if (!known.ok() && !(is_double && double_to_float)) {
    return absl::UnimplementedError(absl::StrCat(what, ": ", known.status().message()));
  }
  // The claimed shape is checked against the bytes or values the proto (or its
  // external file) really holds before anything of that size is allocated: a
  // corrupt or non-tensor file can claim absurd dims.
  const absl::StatusOr<int64_t> count = CheckedNumElements(shape);
  if (!count.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", count.status().message()));
  const int64_t n = *count;
  std::string external;
  const bool raw_form = proto.data_location() == TensorProto::EXTERNAL || proto.has_raw_data();
  const std::string* raw = &proto.raw_data();
  if (proto.data_location() == TensorProto::EXTERNAL) {
    KILN_ASSIGN_OR_RETURN(external, ReadExternalData(proto, base_dir));
    raw = &external;
  }
  int64_t needed = 0;
  const bool fits = CheckedMul(n, elem_size, &needed);
  if (raw_form && (!fits || static_cast<int64_t>(raw->size()) != needed)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": raw data has ", raw->size(), " bytes, but shape ",
                                                   ShapeToString(shape), " needs ",
                                                   fits ? absl::StrCat(needed) : "more than 2^63", " bytes"));
  }
  if (!raw_form && TypedFieldSize(proto) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": holds ", TypedFieldSize(proto), " values but its shape ", ShapeToString(shape), " needs ", n));
  }
  if (is_double) {
    std::vector<float> values(n);
    if (raw_form) {
      for (int64_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, raw->data() + i * 8, 8);
        values[i] = static_cast<float>(d);
      }
    } else {
      KILN_RETURN_IF_ERROR(CopyField(proto.double_data(), n, what,
                                     [&](int64_t i, double v) { values[i] = static_cast<float>(v); }));
    }
    return Tensor::FromFloat(DType::kFloat32, shape, values);
  }
  const DType dtype = *known;
  Tensor t(dtype, shape);
  const size_t nbytes = t.nbytes();
  if (raw_form) {
    if (nbytes > 0) std::memcpy(t.mutable_raw_data(), raw->data(), nbytes);
    return t;
  }
  void* dst = t.mutable_raw_data();
  switch (dtype) {
    case DType::kFloat32:
      KILN_RETURN_IF_ERROR(CopyField(proto.float_data(), n, what,
                                     [&](int64_t i, float v) { static_cast<float*>(dst)[i] = v; }));
      break;
    case DType::kInt64:
      KILN_RETURN_IF_ERROR(CopyField(proto.int64_data(), n, what,
                                     [&](int64_t i, int64_t v) { static_cast<int64_t*>(dst)[i] = v; }));
      break;
    case DType::kInt32:
      KILN_RETURN_IF_ERROR(CopyField(proto.int32_data(), n, what,
                                     [&](int64_t i, int32_t v) { static_cast<int32_t*>(dst)[i] = v; }));
      break;
    case DType::kInt8:
      KILN_RETURN_IF_ERROR(CopyField(proto.int32_data(), n, what, [&](int64_t i, int32_t v) {
        static_cast<int8_t*>(dst)[i] = static_cast<int8_t>(v);
      }));
      break;
    case DType::kUInt8:
    case DType::kBool:
      KILN_RETURN_IF_ERROR(CopyField(proto.int32_data(), n, what, [&](int64_t i, int32_t v) {
        static_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(v);
      }));
      break;
    case DType::kFloat16:
    case DType::kBFloat16:  // stored as uint16 bit patterns in int32_data
      KILN_RETURN_IF_ERROR(CopyField(proto.int32_data(), n, what, [&](int64_t i, int32_t v) {
        static_cast<uint16_t*>(dst)[i] = static_cast<uint16_t>(v);
      }));
      break;
  }
  return t;
}

TensorProto TensorToProto(const Tensor& tensor, const std::string& name) {
  TensorProto proto;
  proto.set_name(name);
  proto.set_data_type(OnnxFromDType(tensor.dtype()));
  for (int64_t d : tensor.shape()) proto.add_dims(d);
  proto.set_raw_data(tensor.raw_data(), tensor.nbytes());
  return proto;
}

}  // namespace kiln
