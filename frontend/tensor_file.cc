// .npy and TensorProto .pb reading and writing.
#include "frontend/tensor_file.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/read_file.h"
#include "common/write_file.h"
#include "frontend/onnx_tensor.h"

namespace kiln {
namespace {

absl::Status WriteAll(const std::string& path, const std::string& bytes) {
  return WriteFile(path, bytes, "writing a tensor");
}

// Value of `key` in the header dict, e.g. 'descr': '<f4'.
absl::StatusOr<std::string> HeaderField(const std::string& header, const std::string& key) {
  const std::string needle = absl::StrCat("'", key, "':");
  size_t pos = header.find(needle);
  if (pos == std::string::npos) return absl::InvalidArgumentError(absl::StrCat("header lacks '", key, "'"));
  pos += needle.size();
  while (pos < header.size() && header[pos] == ' ') ++pos;
  size_t end;
  if (header[pos] == '(') {
    end = header.find(')', pos);
    if (end == std::string::npos) return absl::InvalidArgumentError("unterminated shape tuple");
    return header.substr(pos, end - pos + 1);
  }
  end = header.find_first_of(",}", pos);
  return std::string(absl::StripAsciiWhitespace(header.substr(pos, end - pos)));
}

}  // namespace

absl::StatusOr<Tensor> ReadNpy(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a valid .npy file (", why, ")"));
  };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return bad("bad magic");
  const int major = static_cast<uint8_t>(bytes[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return bad("truncated header");
    uint32_t len;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    header_start = 12;
  } else {
    return bad(absl::StrCat("unknown version ", major));
  }
  if (header_start + header_len > bytes.size()) return bad("truncated header");
  const std::string header = bytes.substr(header_start, header_len);
  auto descr = HeaderField(header, "descr");
  auto fortran = HeaderField(header, "fortran_order");
  auto shape_text = HeaderField(header, "shape");
  if (!descr.ok() || !fortran.ok() || !shape_text.ok()) return bad("header lacks descr, fortran_order or shape");
  if (*fortran != "False") return bad("Fortran-order arrays are not supported; save with np.ascontiguousarray");
  Shape shape;
  std::string dims(absl::StripSuffix(absl::StripPrefix(*shape_text, "("), ")"));
  for (absl::string_view d : absl::StrSplit(dims, ',', absl::SkipWhitespace())) {
    int64_t v;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(d), &v) || v < 0) return bad("bad shape");
    shape.push_back(v);
  }
  std::string type(absl::StripSuffix(absl::StripPrefix(*descr, "'"), "'"));
  if (type.size() >= 2 && type[0] == '>') return bad("big-endian data is not supported");
  const std::string code = type.size() >= 2 ? type.substr(1) : type;
  const char* data = bytes.data() + header_start + header_len;
  const size_t available = bytes.size() - header_start - header_len;
  // The shape is checked against the bytes the file holds before anything of its size
  // is allocated.
  const absl::StatusOr<int64_t> count = CheckedNumElements(shape);
  if (!count.ok()) return bad(count.status().message());
  const int64_t n = *count;
  int64_t needed = 0;
  auto fits = [&](int64_t elem) { return CheckedMul(n, elem, &needed) && static_cast<uint64_t>(needed) <= available; };
  if (code == "f8") {
    if (!fits(8)) return bad(absl::StrCat("data has ", available, " bytes, shape ", ShapeToString(shape), " needs more"));
    std::vector<float> values(n);
    for (int64_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, data + i * 8, 8);
      values[i] = static_cast<float>(d);
    }
    return Tensor::FromFloat(DType::kFloat32, shape, values);
  }
  DType dtype;
  if (code == "f4") dtype = DType::kFloat32;
  else if (code == "f2") dtype = DType::kFloat16;
  else if (code == "i8") dtype = DType::kInt64;
  else if (code == "i4") dtype = DType::kInt32;
  else if (code == "i1") dtype = DType::kInt8;
  else if (code == "u1") dtype = DType::kUInt8;
  else if (code == "b1") dtype = DType::kBool;
  else return bad(absl::StrCat("dtype '", type, "' is not supported (use float32, float16, int64, int32, int8, uint8 or bool)"));
  if (!fits(static_cast<int64_t>(DTypeSize(dtype)))) {
    return bad(absl::StrCat("data has ", available, " bytes, shape ", ShapeToString(shape), " needs more"));
  }
  Tensor t(dtype, shape);
  if (t.nbytes() > 0) std::memcpy(t.mutable_raw_data(), data, t.nbytes());
  return t;
}

absl::StatusOr<Tensor> ReadTensorProtoFile(const std::string& path, std::string* name) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a valid ONNX TensorProto file"));
  }
  if (name != nullptr) *name = proto.name();
  auto t = TensorFromProto(proto, ".", /*double_to_float=*/true);
  if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
  return t;
}

absl::StatusOr<Tensor> ReadTensorFile(const std::string& path) {
  if (absl::EndsWith(path, ".npy")) return ReadNpy(path);
  return ReadTensorProtoFile(path);
}

absl::Status WriteNpy(const std::string& path, const Tensor& in) {
  Tensor tensor = in.dtype() == DType::kBFloat16 ? Tensor::FromFloat(DType::kFloat32, in.shape(), in.ToFloat()) : in;
  const char* descr = "<f4";
  switch (tensor.dtype()) {
    case DType::kFloat32: descr = "<f4"; break;
    case DType::kFloat16: descr = "<f2"; break;
    case DType::kBFloat16: descr = "<f4"; break;
    case DType::kInt64: descr = "<i8"; break;
    case DType::kInt32: descr = "<i4"; break;
    case DType::kInt8: descr = "|i1"; break;
    case DType::kUInt8: descr = "|u1"; break;
    case DType::kBool: descr = "|b1"; break;
  }
  // NumPy tuple syntax: "()", "(4,)", "(2, 3)".
  std::string shape = absl::StrCat("(", absl::StrJoin(tensor.shape(), ", "), tensor.rank() == 1 ? ",)" : ")");
  std::string header = absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Pad so that magic + len + header is a multiple of 64, ending in '\n'.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string bytes = "\x93NUMPY";
  bytes.push_back(1);
  bytes.push_back(0);
  bytes.push_back(static_cast<char>(header.size() & 0xff));
  bytes.push_back(static_cast<char>(header.size() >> 8));
  bytes += header;
  bytes.append(static_cast<const char*>(tensor.raw_data()), tensor.nbytes());
  return WriteAll(path, bytes);
}

absl::Status WriteTensorProtoFile(const std::string& path, const Tensor& tensor, const std::string& name) {
  return WriteAll(path, TensorToProto(tensor, name).SerializeAsString());
}

}  // namespace kiln
