// ModelBuilder and the shared layer helpers of the model generators.
#include "models/model_builder.h"

#include <cmath>
#include <exception>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "onnx/checker.h"
#include "onnx/defs/schema.h"

namespace kiln::models {
namespace {

// FNV-1a, to derive a per-initializer random stream from its name.
uint64_t HashName(absl::string_view name) {
  uint64_t h = 1469598103934665603ull;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

// A platform-independent random stream: std::mt19937_64 is fully specified by the
// standard, std::normal_distribution is not, so the normal draws use Box-Muller here.
class Rng {
 public:
  Rng(uint64_t seed, absl::string_view name) : engine_(seed ^ HashName(name)) {}
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  double Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - Uniform();  // (0, 1]
    const double u2 = Uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * M_PI * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * M_PI * u2);
  }

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0;
};

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void SetTensorType(onnx::ValueInfoProto* info, ElemType type, const std::vector<int64_t>& shape) {
  auto* tensor_type = info->mutable_type()->mutable_tensor_type();
  tensor_type->set_elem_type(type);
  auto* proto_shape = tensor_type->mutable_shape();
  for (int64_t d : shape) proto_shape->add_dim()->set_dim_value(d);
}

}  // namespace

onnx::AttributeProto AttrInt(absl::string_view name, int64_t value) {
  onnx::AttributeProto a;
  a.set_name(std::string(name));
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(value);
  return a;
}

onnx::AttributeProto AttrFloat(absl::string_view name, float value) {
  onnx::AttributeProto a;
  a.set_name(std::string(name));
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(value);
  return a;
}

onnx::AttributeProto AttrString(absl::string_view name, absl::string_view value) {
  onnx::AttributeProto a;
  a.set_name(std::string(name));
  a.set_type(onnx::AttributeProto::STRING);
  a.set_s(std::string(value));
  return a;
}

onnx::AttributeProto AttrInts(absl::string_view name, const std::vector<int64_t>& values) {
  onnx::AttributeProto a;
  a.set_name(std::string(name));
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a.add_ints(v);
  return a;
}

onnx::AttributeProto AttrFloats(absl::string_view name, const std::vector<float>& values) {
  onnx::AttributeProto a;
  a.set_name(std::string(name));
  a.set_type(onnx::AttributeProto::FLOATS);
  for (float v : values) a.add_floats(v);
  return a;
}

int64_t OnnxLibraryMaxOpset() {
  const auto& map = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = map.find("");
  return it == map.end() ? 0 : it->second.second;
}

int64_t IrVersionForOpset(int64_t opset) {
  // ONNX 1.10-1.13 (opsets 15-18) write IR 8, 1.14-1.15 (19-20) IR 9, 1.16 (21) IR 10.
  if (opset >= 21) return 10;
  if (opset >= 19) return 9;
  return 8;
}

ModelBuilder::ModelBuilder(absl::string_view graph_name, int64_t opset, uint64_t seed) : opset_(opset), seed_(seed) {
  model_.set_ir_version(IrVersionForOpset(opset));
  model_.set_producer_name("kiln_make_model");
  model_.set_producer_version("1");
  auto* import = model_.add_opset_import();
  import->set_domain("");
  import->set_version(opset);
  model_.mutable_graph()->set_name(std::string(graph_name));
}

void ModelBuilder::Fail(std::string message) { errors_.push_back(std::move(message)); }

std::string ModelBuilder::AddInput(absl::string_view name, ElemType type, const std::vector<int64_t>& shape) {
  const std::string n(name);
  if (!defined_.insert(n).second) Fail(absl::StrCat("input '", n, "' is already defined"));
  SetTensorType(model_.mutable_graph()->add_input(), type, shape);
  model_.mutable_graph()->mutable_input()->rbegin()->set_name(n);
  return n;
}

std::string ModelBuilder::AddOutput(absl::string_view name, ElemType type, const std::vector<int64_t>& shape) {
  const std::string n(name);
  if (!Defined(n)) Fail(absl::StrCat("output '", n, "' is not produced by any node"));
  auto* info = model_.mutable_graph()->add_output();
  info->set_name(n);
  SetTensorType(info, type, shape);
  return n;
}

onnx::TensorProto* ModelBuilder::NewInitializer(absl::string_view name, ElemType type,
                                                const std::vector<int64_t>& shape, int64_t expected_elements) {
  const std::string n(name);
  if (!defined_.insert(n).second) Fail(absl::StrCat("initializer '", n, "' is already defined"));
  if (NumElements(shape) != expected_elements) {
    Fail(absl::StrCat("initializer '", n, "': shape [", absl::StrJoin(shape, ","), "] holds ", NumElements(shape),
                      " elements, but ", expected_elements, " values were given"));
  }
  onnx::TensorProto* t = model_.mutable_graph()->add_initializer();
  t->set_name(n);
  t->set_data_type(type);
  for (int64_t d : shape) t->add_dims(d);
  return t;
}

std::string ModelBuilder::AddFloatInitializer(absl::string_view name, const std::vector<int64_t>& shape,
                                              const std::vector<float>& values) {
  onnx::TensorProto* t = NewInitializer(name, onnx::TensorProto::FLOAT, shape, values.size());
  t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  return std::string(name);
}

std::string ModelBuilder::AddInt64Initializer(absl::string_view name, const std::vector<int64_t>& shape,
                                              const std::vector<int64_t>& values) {
  onnx::TensorProto* t = NewInitializer(name, onnx::TensorProto::INT64, shape, values.size());
  t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t)));
  return std::string(name);
}

std::string ModelBuilder::AddBoolInitializer(absl::string_view name, const std::vector<int64_t>& shape,
                                             const std::vector<bool>& values) {
  onnx::TensorProto* t = NewInitializer(name, onnx::TensorProto::BOOL, shape, values.size());
  std::string bytes(values.size(), '\0');
  for (size_t i = 0; i < values.size(); ++i) bytes[i] = values[i] ? 1 : 0;
  t->set_raw_data(std::move(bytes));
  return std::string(name);
}

std::string ModelBuilder::AddScalar(absl::string_view name, float value) {
  return AddFloatInitializer(name, {}, {value});
}

std::string ModelBuilder::AddInt64Vector(absl::string_view name, const std::vector<int64_t>& values) {
  return AddInt64Initializer(name, {static_cast<int64_t>(values.size())}, values);
}

std::vector<float> ModelBuilder::RandomNormalValues(absl::string_view name, int64_t count, float stddev,
                                                    float mean) const {
  Rng rng(seed_, name);
  std::vector<float> values(count);
  for (float& v : values) v = static_cast<float>(mean + stddev * rng.Normal());
  return values;
}

std::vector<float> ModelBuilder::RandomUniformValues(absl::string_view name, int64_t count, float lo, float hi) const {
  Rng rng(seed_, name);
  std::vector<float> values(count);
  for (float& v : values) v = static_cast<float>(lo + (hi - lo) * rng.Uniform());
  return values;
}

std::string ModelBuilder::AddRandomNormal(absl::string_view name, const std::vector<int64_t>& shape, float stddev,
                                          float mean) {
  return AddFloatInitializer(name, shape, RandomNormalValues(name, NumElements(shape), stddev, mean));
}

std::string ModelBuilder::AddRandomUniform(absl::string_view name, const std::vector<int64_t>& shape, float lo,
                                           float hi) {
  return AddFloatInitializer(name, shape, RandomUniformValues(name, NumElements(shape), lo, hi));
}

std::string ModelBuilder::AddWeight(absl::string_view name, const std::vector<int64_t>& shape, int64_t fan_in) {
  return AddRandomNormal(name, shape, static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in))));
}

std::vector<std::string> ModelBuilder::AddNode(absl::string_view op_type, absl::string_view name,
                                               const std::vector<std::string>& inputs, int num_outputs,
                                               const std::vector<onnx::AttributeProto>& attributes) {
  const std::string node_name(name);
  if (!node_names_.insert(node_name).second) Fail(absl::StrCat("node name '", node_name, "' is used twice"));
  onnx::NodeProto* node = model_.mutable_graph()->add_node();
  node->set_op_type(std::string(op_type));
  node->set_name(node_name);
  for (const std::string& in : inputs) {
    if (!in.empty() && !Defined(in)) {
      Fail(absl::StrCat("node '", node_name, "' (", op_type, "): input '", in, "' is not defined before it"));
    }
    node->add_input(in);
  }
  std::vector<std::string> outputs;
  for (int i = 0; i < num_outputs; ++i) {
    std::string out = absl::StrCat(node_name, "_output_", i);
    if (!defined_.insert(out).second) Fail(absl::StrCat("value '", out, "' is defined twice"));
    node->add_output(out);
    outputs.push_back(std::move(out));
  }
  for (const onnx::AttributeProto& a : attributes) *node->add_attribute() = a;
  return outputs;
}

std::string ModelBuilder::Op(absl::string_view op_type, absl::string_view name, const std::vector<std::string>& inputs,
                             const std::vector<onnx::AttributeProto>& attributes) {
  return AddNode(op_type, name, inputs, 1, attributes)[0];
}

std::string ModelBuilder::RenameValue(const std::string& value, absl::string_view new_name) {
  const std::string n(new_name);
  onnx::GraphProto* graph = model_.mutable_graph();
  for (int i = graph->node_size() - 1; i >= 0; --i) {
    onnx::NodeProto* node = graph->mutable_node(i);
    for (int j = 0; j < node->output_size(); ++j) {
      if (node->output(j) != value) continue;
      for (const onnx::NodeProto& other : graph->node()) {
        for (const std::string& in : other.input()) {
          if (in == value) Fail(absl::StrCat("cannot rename '", value, "': it already has consumers"));
        }
      }
      if (!defined_.insert(n).second) Fail(absl::StrCat("value '", n, "' is defined twice"));
      defined_.erase(value);
      node->set_output(j, n);
      return n;
    }
  }
  Fail(absl::StrCat("cannot rename '", value, "': no node produces it"));
  return n;
}

absl::StatusOr<onnx::ModelProto> ModelBuilder::Build(bool* checked) {
  if (checked != nullptr) *checked = false;
  if (!errors_.empty()) {
    return absl::InternalError(
        absl::StrCat("model '", model_.graph().name(), "' is malformed: ", absl::StrJoin(errors_, "; ")));
  }
  if (opset_ <= OnnxLibraryMaxOpset()) {
    try {
      onnx::checker::check_model(model_);
    } catch (const std::exception& e) {
      return absl::InternalError(
          absl::StrCat("model '", model_.graph().name(), "' fails the ONNX checker: ", e.what()));
    }
    if (checked != nullptr) *checked = true;
  }
  return std::move(model_);
}

std::string ParamName(absl::string_view prefix, absl::string_view leaf) {
  std::string p(absl::StripPrefix(prefix, "/"));
  p = absl::StrReplaceAll(p, {{"/", "."}});
  return p.empty() ? std::string(leaf) : absl::StrCat(p, ".", leaf);
}

std::string LinearMatMul(ModelBuilder& b, absl::string_view prefix, const std::string& x, int64_t in_features,
                         int64_t out_features) {
  const std::string w = b.AddWeight(ParamName(prefix, "weight"), {in_features, out_features}, in_features);
  const std::string bias = b.AddRandomNormal(ParamName(prefix, "bias"), {out_features}, 0.1f);
  const std::string mm = b.Op("MatMul", absl::StrCat(prefix, "/MatMul"), {x, w});
  return b.Op("Add", absl::StrCat(prefix, "/Add"), {bias, mm});
}

std::string LinearGemm(ModelBuilder& b, absl::string_view prefix, const std::string& x, int64_t in_features,
                       int64_t out_features, absl::string_view param_prefix) {
  const std::string param = param_prefix.empty() ? ParamName(prefix, "") : std::string(param_prefix) + ".";
  const std::string w = b.AddWeight(param + "weight", {out_features, in_features}, in_features);
  const std::string bias = b.AddRandomNormal(param + "bias", {out_features}, 0.1f);
  return b.Op("Gemm", absl::StrCat(prefix, "/Gemm"), {x, w, bias},
              {AttrFloat("alpha", 1.f), AttrFloat("beta", 1.f), AttrInt("transB", 1)});
}

std::string LayerNorm(ModelBuilder& b, absl::string_view prefix, const std::string& x, int64_t hidden, float epsilon) {
  const std::string gamma = b.AddRandomNormal(ParamName(prefix, "weight"), {hidden}, 0.1f, 1.f);
  const std::string beta = b.AddRandomNormal(ParamName(prefix, "bias"), {hidden}, 0.1f);
  if (b.opset() >= 17) {
    return b.Op("LayerNormalization", absl::StrCat(prefix, "/LayerNormalization"), {x, gamma, beta},
                {AttrInt("axis", -1), AttrFloat("epsilon", epsilon)});
  }
  // torch.onnx's opset-9 layer_norm: ReduceMean takes `axes` as an attribute below opset 18.
  const auto axes = AttrInts("axes", {-1});
  const std::string mean = b.Op("ReduceMean", absl::StrCat(prefix, "/ReduceMean"), {x}, {axes});
  const std::string centered = b.Op("Sub", absl::StrCat(prefix, "/Sub"), {x, mean});
  const std::string two = b.AddScalar(ParamName(prefix, "pow_exponent"), 2.f);
  const std::string sq = b.Op("Pow", absl::StrCat(prefix, "/Pow"), {centered, two});
  const std::string var = b.Op("ReduceMean", absl::StrCat(prefix, "/ReduceMean_1"), {sq}, {axes});
  const std::string eps = b.AddScalar(ParamName(prefix, "epsilon"), epsilon);
  const std::string var_eps = b.Op("Add", absl::StrCat(prefix, "/Add"), {var, eps});
  const std::string stddev = b.Op("Sqrt", absl::StrCat(prefix, "/Sqrt"), {var_eps});
  const std::string normed = b.Op("Div", absl::StrCat(prefix, "/Div"), {centered, stddev});
  const std::string scaled = b.Op("Mul", absl::StrCat(prefix, "/Mul"), {normed, gamma});
  return b.Op("Add", absl::StrCat(prefix, "/Add_1"), {scaled, beta});
}

std::string GeluErf(ModelBuilder& b, absl::string_view prefix, const std::string& x) {
  if (b.opset() >= 20) {
    return b.Op("Gelu", absl::StrCat(prefix, "/Gelu"), {x}, {AttrString("approximate", "none")});
  }
  const std::string sqrt2 = b.AddScalar(ParamName(prefix, "sqrt2"), static_cast<float>(std::sqrt(2.0)));
  const std::string one = b.AddScalar(ParamName(prefix, "one"), 1.f);
  const std::string half = b.AddScalar(ParamName(prefix, "half"), 0.5f);
  const std::string scaled = b.Op("Div", absl::StrCat(prefix, "/Div"), {x, sqrt2});
  const std::string erf = b.Op("Erf", absl::StrCat(prefix, "/Erf"), {scaled});
  const std::string plus_one = b.Op("Add", absl::StrCat(prefix, "/Add"), {erf, one});
  const std::string prod = b.Op("Mul", absl::StrCat(prefix, "/Mul"), {x, plus_one});
  return b.Op("Mul", absl::StrCat(prefix, "/Mul_1"), {prod, half});
}

std::string GeluTanh(ModelBuilder& b, absl::string_view prefix, const std::string& x) {
  const std::string half = b.AddScalar(ParamName(prefix, "half"), 0.5f);
  const std::string three = b.AddScalar(ParamName(prefix, "three"), 3.f);
  const std::string coeff = b.AddScalar(ParamName(prefix, "coeff"), 0.044715f);
  const std::string sqrt_2_over_pi =
      b.AddScalar(ParamName(prefix, "sqrt_2_over_pi"), static_cast<float>(std::sqrt(2.0 / M_PI)));
  const std::string one = b.AddScalar(ParamName(prefix, "one"), 1.f);
  const std::string half_x = b.Op("Mul", absl::StrCat(prefix, "/Mul"), {x, half});
  const std::string cube = b.Op("Pow", absl::StrCat(prefix, "/Pow"), {x, three});
  const std::string cube_scaled = b.Op("Mul", absl::StrCat(prefix, "/Mul_1"), {cube, coeff});
  const std::string inner = b.Op("Add", absl::StrCat(prefix, "/Add"), {x, cube_scaled});
  const std::string arg = b.Op("Mul", absl::StrCat(prefix, "/Mul_2"), {inner, sqrt_2_over_pi});
  const std::string t = b.Op("Tanh", absl::StrCat(prefix, "/Tanh"), {arg});
  const std::string plus_one = b.Op("Add", absl::StrCat(prefix, "/Add_1"), {t, one});
  return b.Op("Mul", absl::StrCat(prefix, "/Mul_3"), {half_x, plus_one});
}

std::string Conv2d(ModelBuilder& b, absl::string_view node_name, const std::string& x, const std::string& weight,
                   const std::string& bias, int64_t kernel, int64_t stride, int64_t pad, int64_t groups) {
  std::vector<std::string> inputs = {x, weight};
  if (!bias.empty()) inputs.push_back(bias);
  return b.Op("Conv", node_name, inputs,
              {AttrInts("dilations", {1, 1}), AttrInt("group", groups), AttrInts("kernel_shape", {kernel, kernel}),
               AttrInts("pads", {pad, pad, pad, pad}), AttrInts("strides", {stride, stride})});
}

std::string ConvBatchNorm(ModelBuilder& b, absl::string_view conv_node, absl::string_view conv_param,
                          absl::string_view bn_node, absl::string_view bn_param, const std::string& x,
                          const ConvSpec& spec, bool keep_bn) {
  constexpr float kEps = 1e-5f;
  const int64_t out = spec.out_channels;
  const int64_t per_group_in = spec.in_channels / spec.groups;
  const std::vector<int64_t> w_shape = {out, per_group_in, spec.kernel, spec.kernel};
  const int64_t fan_in = per_group_in * spec.kernel * spec.kernel;
  const std::string w_name = absl::StrCat(conv_param, ".weight");
  const std::string conv_name = absl::StrCat(conv_node, "/Conv");
  const std::string gamma_name = absl::StrCat(bn_param, ".weight"), beta_name = absl::StrCat(bn_param, ".bias");
  const std::string mean_name = absl::StrCat(bn_param, ".running_mean");
  const std::string var_name = absl::StrCat(bn_param, ".running_var");
  const float w_std = static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)));
  if (keep_bn) {
    const std::string w = b.AddRandomNormal(w_name, w_shape, w_std);
    const std::string h = Conv2d(b, conv_name, x, w, "", spec.kernel, spec.stride, spec.pad, spec.groups);
    const std::string gamma = b.AddRandomNormal(gamma_name, {out}, 0.1f, 1.f);
    const std::string beta = b.AddRandomNormal(beta_name, {out}, 0.1f);
    const std::string mean = b.AddRandomNormal(mean_name, {out}, 0.1f);
    const std::string var = b.AddRandomUniform(var_name, {out}, 0.5f, 1.5f);
    return b.Op("BatchNormalization", absl::StrCat(bn_node, "/BatchNormalization"), {h, gamma, beta, mean, var},
                {AttrFloat("epsilon", kEps), AttrFloat("momentum", 0.9f)});
  }
  std::vector<float> w = b.RandomNormalValues(w_name, out * fan_in, w_std);
  const std::vector<float> gamma = b.RandomNormalValues(gamma_name, out, 0.1f, 1.f);
  const std::vector<float> beta = b.RandomNormalValues(beta_name, out, 0.1f);
  const std::vector<float> mean = b.RandomNormalValues(mean_name, out, 0.1f);
  const std::vector<float> var = b.RandomUniformValues(var_name, out, 0.5f, 1.5f);
  std::vector<float> bias(out);
  for (int64_t o = 0; o < out; ++o) {
    const double scale = gamma[o] / std::sqrt(static_cast<double>(var[o]) + kEps);
    for (int64_t i = 0; i < fan_in; ++i) w[o * fan_in + i] = static_cast<float>(w[o * fan_in + i] * scale);
    bias[o] = static_cast<float>(beta[o] - mean[o] * scale);
  }
  const std::string w_init = b.AddFloatInitializer(w_name, w_shape, w);
  const std::string b_init = b.AddFloatInitializer(absl::StrCat(conv_param, ".bias"), {out}, bias);
  return Conv2d(b, conv_name, x, w_init, b_init, spec.kernel, spec.stride, spec.pad, spec.groups);
}

}  // namespace kiln::models
