// Cast: converts the input to the ONNX data type number in attribute `to`
// (floats to integers truncate toward zero; anything to bool is x != 0).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/cast.h"

namespace kiln::ops {

Tensor CastTensor(const Tensor& in, DType to) {
  if (in.dtype() == to) return in;
  if (!IsFloating(in.dtype())) return Tensor::FromInt64(to, in.shape(), in.ToInt64());
  std::vector<float> values = in.ToFloat();
  if (IsFloating(to) || to == DType::kBool) return Tensor::FromFloat(to, in.shape(), values);
  std::vector<int64_t> ints(values.size());
  for (size_t i = 0; i < values.size(); ++i) ints[i] = TruncToInt64(values[i]);
  return Tensor::FromInt64(to, in.shape(), ints);
}

namespace {

// ONNX TensorProto.DataType names, indexed by number, for messages.
const char* OnnxTypeName(int64_t t) {
  static const char* const kNames[] = {
      "UNDEFINED",      "FLOAT",      "UINT8",          "INT8",       "UINT16",   "INT16",
      "INT32",          "INT64",      "STRING",         "BOOL",       "FLOAT16",  "DOUBLE",
      "UINT32",         "UINT64",     "COMPLEX64",      "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN",
      "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",      "INT4",     "FLOAT4E2M1"};
  if (t < 0 || t >= static_cast<int64_t>(sizeof(kNames) / sizeof(kNames[0]))) return "unknown";
  return kNames[t];
}

absl::StatusOr<DType> TargetType(const Node& node) {
  KILN_ASSIGN_OR_RETURN(int64_t to, node.GetInt("to"));
  switch (to) {
    case 1:
      return DType::kFloat32;
    case 2:
      return DType::kUInt8;
    case 3:
      return DType::kInt8;
    case 6:
      return DType::kInt32;
    case 7:
      return DType::kInt64;
    case 9:
      return DType::kBool;
    case 10:
      return DType::kFloat16;
    case 16:
      return DType::kBFloat16;
    default:
      return absl::UnimplementedError(absl::StrCat(node.Describe(), ": cast to ", OnnxTypeName(to),
                                                   " (ONNX data type ", to,
                                                   ") is not supported; kiln supports FLOAT, FLOAT16, "
                                                   "BFLOAT16, INT64, INT32, INT8, UINT8 and BOOL"));
  }
}

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(DType to, TargetType(node));
  node.output(0)->SetType(to, node.input(0)->shape());
  return absl::OkStatus();
}

absl::Status Eval(const Node&, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  out[0] = CastTensor(*in[0], out[0].dtype());
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(cast) {
  registry.Register({.name = "Cast", .infer = ops::Infer, .eval = ops::Eval, .is_elementwise = true});
}
