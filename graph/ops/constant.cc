// Constant: a tensor given by exactly one of the attributes value, value_float,
// value_floats, value_int or value_ints.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"

namespace kiln::ops {
namespace {

absl::StatusOr<Tensor> ConstantValue(const Node& node) {
  for (const char* unsupported : {"value_string", "value_strings", "sparse_value"}) {
    if (node.has_attr(unsupported)) {
      return absl::UnimplementedError(
          absl::StrCat(node.Describe(), ": attribute '", unsupported,
                       "' is not supported: kiln has no string or sparse tensors"));
    }
  }
  std::vector<std::string> given;
  for (const char* name : {"value", "value_float", "value_floats", "value_int", "value_ints"}) {
    if (node.has_attr(name)) given.push_back(name);
  }
  if (given.size() != 1) {
    return node.Error(
        absl::StrCat("needs exactly one of the attributes value, value_float, value_floats, "
                     "value_int, value_ints; got ",
                     given.empty() ? "none" : absl::StrJoin(given, ", ")));
  }
  const std::string& name = given[0];
  if (name == "value") return node.GetTensor("value");
  if (name == "value_float") {
    KILN_ASSIGN_OR_RETURN(float v, node.GetFloat(name));
    return Tensor::FromFloat(DType::kFloat32, {}, {v});
  }
  if (name == "value_floats") {
    KILN_ASSIGN_OR_RETURN(std::vector<float> v, node.GetFloats(name));
    return Tensor::FromFloat(DType::kFloat32, {static_cast<int64_t>(v.size())}, v);
  }
  if (name == "value_int") {
    KILN_ASSIGN_OR_RETURN(int64_t v, node.GetInt(name));
    return Tensor::FromInt64(DType::kInt64, {}, {v});
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, node.GetInts(name));
  return Tensor::FromInt64(DType::kInt64, {static_cast<int64_t>(v.size())}, v);
}

absl::Status Infer(Node& node) {
  KILN_ASSIGN_OR_RETURN(Tensor t, ConstantValue(node));
  node.output(0)->SetType(t.dtype(), t.shape());
  return absl::OkStatus();
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const>, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(out[0], ConstantValue(node));
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(constant) {
  registry.Register(
      {.name = "Constant", .min_inputs = 0, .max_inputs = 0, .infer = ops::Infer, .eval = ops::Eval});
}
