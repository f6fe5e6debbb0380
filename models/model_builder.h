// ModelBuilder: a small API for writing ONNX models (inputs, outputs, seeded random
// initializers, nodes with attributes) plus the layer helpers that the model
// generators share (Linear, LayerNorm, GELU forms) in the op patterns PyTorch exports.
//
// Errors made while building (an undefined input, a duplicate node or initializer
// name) are recorded and reported by Build(), so generator code stays linear.
// Build() runs the ONNX checker when the installed ONNX library knows the opset.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "onnx/onnx_pb.h"

namespace kiln::models {

// ONNX element types (onnx::TensorProto::FLOAT, INT64, BOOL, ...): kiln maps them to
// its dtypes in frontend/onnx_tensor.h.
using ElemType = onnx::TensorProto::DataType;

// Node attributes, built with the helpers below: {AttrInt("axis", -1), AttrFloat("epsilon", 1e-5f)}.
onnx::AttributeProto AttrInt(absl::string_view name, int64_t value);
onnx::AttributeProto AttrFloat(absl::string_view name, float value);
onnx::AttributeProto AttrString(absl::string_view name, absl::string_view value);
onnx::AttributeProto AttrInts(absl::string_view name, const std::vector<int64_t>& values);
onnx::AttributeProto AttrFloats(absl::string_view name, const std::vector<float>& values);

// The highest default-domain opset the linked ONNX library has schemas for (1.12: 17).
int64_t OnnxLibraryMaxOpset();
// The IR version PyTorch/ONNX pair with a default-domain opset (opset 17 -> 8, 20 -> 9).
int64_t IrVersionForOpset(int64_t opset);

class ModelBuilder {
 public:
  // `seed` feeds every random initializer; each initializer draws from its own stream
  // derived from (seed, initializer name), so a weight does not change when layers
  // are added or removed around it.
  ModelBuilder(absl::string_view graph_name, int64_t opset, uint64_t seed);

  int64_t opset() const { return opset_; }
  uint64_t seed() const { return seed_; }

  // Graph inputs and outputs with static shapes. Both return the value's name.
  std::string AddInput(absl::string_view name, ElemType type, const std::vector<int64_t>& shape);
  std::string AddOutput(absl::string_view name, ElemType type, const std::vector<int64_t>& shape);

  // Initializers (stored as raw_data, little-endian). Each returns its name.
  std::string AddFloatInitializer(absl::string_view name, const std::vector<int64_t>& shape,
                                  const std::vector<float>& values);
  std::string AddInt64Initializer(absl::string_view name, const std::vector<int64_t>& shape,
                                  const std::vector<int64_t>& values);
  std::string AddBoolInitializer(absl::string_view name, const std::vector<int64_t>& shape,
                                 const std::vector<bool>& values);
  // f32 scalar (shape []), as PyTorch exports Python-number operands.
  std::string AddScalar(absl::string_view name, float value);
  // 1-D int64 tensor: Reshape shapes, Split sizes, axes.
  std::string AddInt64Vector(absl::string_view name, const std::vector<int64_t>& values);

  // The values the seeded random initializers below hold, without adding one: for
  // weights a generator derives (BatchNorm folded into a conv, a tied weight stored
  // transposed) from the same per-name streams.
  std::vector<float> RandomNormalValues(absl::string_view name, int64_t count, float stddev, float mean = 0.f) const;
  std::vector<float> RandomUniformValues(absl::string_view name, int64_t count, float lo, float hi) const;

  // Seeded random f32 initializers.
  std::string AddRandomNormal(absl::string_view name, const std::vector<int64_t>& shape, float stddev,
                              float mean = 0.f);
  std::string AddRandomUniform(absl::string_view name, const std::vector<int64_t>& shape, float lo, float hi);
  // A weight N(0, 1/fan_in): keeps activations of order 1 through a layer.
  std::string AddWeight(absl::string_view name, const std::vector<int64_t>& shape, int64_t fan_in);

  // Appends a node named `name` with `num_outputs` outputs named "<name>_output_<i>"
  // (PyTorch's convention); returns the output names. An empty input name is an
  // absent optional input.
  std::vector<std::string> AddNode(absl::string_view op_type, absl::string_view name,
                                   const std::vector<std::string>& inputs, int num_outputs = 1,
                                   const std::vector<onnx::AttributeProto>& attributes = {});
  // Single-output form of AddNode.
  std::string Op(absl::string_view op_type, absl::string_view name, const std::vector<std::string>& inputs,
                 const std::vector<onnx::AttributeProto>& attributes = {});
  // Renames the output of the node that produced `value` to `new_name` (used to give
  // the last node's output the graph output's name). Returns `new_name`.
  std::string RenameValue(const std::string& value, absl::string_view new_name);

  // Number of nodes added so far.
  int num_nodes() const { return model_.graph().node_size(); }

  // Checks the collected errors, runs the ONNX checker (when the linked ONNX library
  // knows the opset; `checked` reports whether it ran) and hands the model over
  // (moved out: call it once, last).
  absl::StatusOr<onnx::ModelProto> Build(bool* checked = nullptr);

 private:
  onnx::TensorProto* NewInitializer(absl::string_view name, ElemType type, const std::vector<int64_t>& shape,
                                    int64_t expected_elements);
  void Fail(std::string message);
  bool Defined(const std::string& name) const { return defined_.count(name) > 0; }

  int64_t opset_;
  uint64_t seed_;
  onnx::ModelProto model_;
  std::set<std::string> defined_;  // values: inputs, initializers, node outputs
  std::set<std::string> node_names_;
  std::vector<std::string> errors_;
};

// Layer helpers in PyTorch's export patterns. `prefix` is the module path used for
// node names ("/encoder/layer.0/attention/self/query") and initializer names
// ("encoder.layer.0.attention.self.query.bias").

// nn.Linear on an input of rank >= 3: MatMul(x, W[in,out]) then Add(bias, ·) with the
// bias as the first operand, as torch.onnx exports it.
std::string LinearMatMul(ModelBuilder& b, absl::string_view prefix, const std::string& x, int64_t in_features,
                         int64_t out_features);
// nn.Linear on a 2-D input: Gemm(x, W[out,in], bias, transB=1). Initializers are named
// after `param_prefix` when given (modules inside nn.Sequential, whose node scope
// "/classifier/classifier.1" differs from the parameter path "classifier.1"), else
// after `prefix`.
std::string LinearGemm(ModelBuilder& b, absl::string_view prefix, const std::string& x, int64_t in_features,
                       int64_t out_features, absl::string_view param_prefix = "");
// nn.LayerNorm over the last dim of size `hidden`: LayerNormalization(axis=-1) at
// opset >= 17, else ReduceMean, Sub, Pow(2), ReduceMean, Add(eps), Sqrt, Div, Mul(gamma),
// Add(beta).
std::string LayerNorm(ModelBuilder& b, absl::string_view prefix, const std::string& x, int64_t hidden, float epsilon);
// GELU, erf form: Div(x, sqrt2), Erf, Add(1), Mul(x, ·), Mul(·, 0.5); at opset >= 20
// one Gelu node (approximate="none").
std::string GeluErf(ModelBuilder& b, absl::string_view prefix, const std::string& x);
// GELU, tanh form (GPT-2's NewGELUActivation): Mul(x, 0.5), Pow(x, 3), Mul(·, 0.044715),
// Add(x, ·), Mul(·, sqrt(2/pi)), Tanh, Add(·, 1), Mul(half_x, ·).
std::string GeluTanh(ModelBuilder& b, absl::string_view prefix, const std::string& x);

// nn.Conv2d as torch.onnx exports it: Conv with dilations, group, kernel_shape, pads
// and strides (square kernel, symmetric padding). `bias` may be empty (bias=False).
std::string Conv2d(ModelBuilder& b, absl::string_view node_name, const std::string& x, const std::string& weight,
                   const std::string& bias, int64_t kernel, int64_t stride, int64_t pad, int64_t groups);

// Conv2d(bias=False) followed by BatchNorm2d (eps 1e-5) in eval mode, in one of the two
// forms torch.onnx writes:
// - keep_bn = false (the default export: eval mode, torch's eval peephole fuses the
//   pair): one Conv whose weight and bias are the BatchNorm-folded ones,
//   W' = W * g/sqrt(v+eps), b' = beta - mean * g/sqrt(v+eps);
// - keep_bn = true (training=TrainingMode.PRESERVE): Conv without bias, then
//   BatchNormalization(epsilon 1e-5, momentum 0.9) with the running statistics.
// Both draw the same per-name streams (`conv_param`.weight; `bn_param`.weight, .bias,
// .running_mean, .running_var), so they compute the same function. Nodes are named
// `conv_node`/Conv and `bn_node`/BatchNormalization; the folded weight and bias are
// `conv_param`.weight and `conv_param`.bias.
struct ConvSpec {
  int64_t in_channels, out_channels, kernel, stride, pad, groups = 1;
};
std::string ConvBatchNorm(ModelBuilder& b, absl::string_view conv_node, absl::string_view conv_param,
                          absl::string_view bn_node, absl::string_view bn_param, const std::string& x,
                          const ConvSpec& spec, bool keep_bn);

// "/encoder/layer.0/attention" -> "encoder.layer.0.attention" (initializer names).
std::string ParamName(absl::string_view prefix, absl::string_view leaf);

}  // namespace kiln::models
