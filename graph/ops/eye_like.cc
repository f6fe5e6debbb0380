// EyeLike: a 2-D tensor of the input's shape with ones on the diagonal shifted by k
// and zeros elsewhere, of dtype `dtype` (default: the input's). The input's values
// are not read.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"

namespace kiln::ops {
namespace {

absl::StatusOr<DType> OutType(const Node& node) {
  if (!node.has_attr("dtype")) return node.input(0)->dtype();
  KILN_ASSIGN_OR_RETURN(int64_t t, node.GetInt("dtype"));
  switch (t) {
    case 1: case 11: return DType::kFloat32;  // DOUBLE computes as FLOAT (frontend/onnx_importer.h)
    case 2: return DType::kUInt8;
    case 3: return DType::kInt8;
    case 6: return DType::kInt32;
    case 7: return DType::kInt64;
    case 9: return DType::kBool;
    case 10: return DType::kFloat16;
    case 16: return DType::kBFloat16;
    default: return node.Unsupported(absl::StrCat("dtype ", t, " is not supported"));
  }
}

absl::Status Infer(Node& node) {
  KILN_RETURN_IF_ERROR(node.GetInt("k", 0).status());
  if (node.input(0)->rank() != 2) {
    return node.Error(absl::StrCat("input must be 2-D, got ", node.input(0)->TypeString()));
  }
  KILN_ASSIGN_OR_RETURN(DType dtype, OutType(node));
  node.output(0)->SetType(dtype, node.input(0)->shape());
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(int64_t k, node.GetInt("k", 0));
  const Shape& s = in[0]->shape();
  std::vector<int64_t> v(out[0].numel(), 0);
  for (int64_t i = 0; i < s[0]; ++i) {
    const int64_t j = i + k;
    if (j >= 0 && j < s[1]) v[i * s[1] + j] = 1;
  }
  out[0] = Tensor::FromInt64(out[0].dtype(), s, v);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(eye_like) {
  registry.Register({.name = "EyeLike", .infer = ops::Infer, .eval = ops::Eval});
}
