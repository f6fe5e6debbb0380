// Element-wise kernels with multidirectional broadcasting: one generated
// expression per op over fp32 (floating inputs) or int64 (integer/bool inputs)
// registers; each input is indexed through broadcast strides baked as constants,
// or by the output index itself when it has the output's shape. The loop, its
// vectorised loads and stores and the scalar fallback are EmitElementwiseKernel's
// (codegen/ops/kernel_util.h).
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/ops/families.h"
#include "codegen/ops/kernel_util.h"
#include "codegen/ops/pointwise_spec.h"
#include "codegen/templates.h"
#include "absl/container/flat_hash_map.h"
#include "graph/fused_group.h"
#include "graph/pattern_match.h"

namespace kiln::codegen::ops {
namespace {

// One element-wise kernel: inputs loaded into v<k> (k = position in `inputs`),
// `body` statements, then `result` stored into output 0 (and `extra` outputs).
struct PwSpec {
  struct Input {
    int input;        // node input index
    Shape view;       // shape broadcast against the output (usually the input's)
    Domain domain;    // register domain of v<k>
  };
  std::vector<Input> inputs;
  std::string body;
  std::string result;
  Domain result_domain = Domain::kFloat;
};

absl::StatusOr<std::vector<KernelLaunch>> Emit(const Node& node, const PwSpec& spec) {
  const Value* out = node.output(0);
  EwKernel k;
  k.comment = absl::StrCat(node.op_type(), " ", out->TypeString());
  k.shape = out->shape();
  // A dynamic graph's node reads each input as it is, at strides over expressions.
  const bool dynamic = HasDynamicValues(node);
  if (dynamic) k.dims = ValueDims(*out);
  KernelLaunch launch;
  launch.args.push_back(0);
  std::string inlined;  // a dynamic graph's scalar computed from the sizes: its expression
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const PwSpec::Input& in = spec.inputs[i];
    const Value* v = node.input(in.input);
    if (dynamic && v->has_symbolic_data()) {
      if (v->numel() != 1) return NoKernel(node, "a tensor computed from the sizes");
      absl::StrAppend(&inlined, "const ", DomainType(in.domain), " v", i, " = (", DomainType(in.domain), ")",
                      DimCode(v->symbolic_data()[0]), ";\n");
      continue;
    }
    EwOperand op{absl::StrCat("in", i), v->dtype(), in.domain, absl::StrCat("v", i), {}};
    if (in.view.size() > k.shape.size()) return NoKernel(node, "input of higher rank than the output");
    if (dynamic && (in.view != v->shape() || !DynamicBroadcastStrides(ValueDims(*v), k.dims, &op.dim_strides))) {
      return NoKernel(node, "an input that does not broadcast to the output for every size in the dim ranges");
    }
    if (!BroadcastStrides(in.view, k.shape, &op.strides)) return NoKernel(node, "input does not broadcast to the output");
    k.operands.push_back(std::move(op));
    launch.args.push_back(InputArg(node, in.input));
  }
  k.code = inlined + spec.body;
  k.outputs.push_back({"out0", out->dtype(), spec.result_domain, spec.result});
  KernelLaunch emitted = EmitElementwiseKernel(k);
  emitted.args = std::move(launch.args);
  return std::vector<KernelLaunch>{std::move(emitted)};
}

PwSpec::Input In(const Node& node, int i, Domain d) { return {i, node.input(i)->shape(), d}; }

// Unary op: float expression `ff` over x (nullptr: floating inputs only) and
// int64 expression `fi`.
using Unary = std::pair<const char*, const char*>;
const std::map<std::string, Unary>& UnaryOps() {
  static const auto* ops = new std::map<std::string, Unary>{
      {"Relu", {"x > 0.f ? x : 0.f", "x > 0 ? x : (kiln_i64)0"}},
      {"Sigmoid", {"1.f / (1.f + expf(-x))", nullptr}},
      {"Tanh", {"tanhf(x)", nullptr}},
      {"Erf", {"erff(x)", "(kiln_i64)erf((double)x)"}},
      {"Exp", {"expf(x)", nullptr}},
      {"Log", {"logf(x)", nullptr}},
      {"Sqrt", {"sqrtf(x)", nullptr}},
      {"Reciprocal", {"1.f / x", nullptr}},
      {"Neg", {"-x", "kiln_wneg(x)"}},
      {"Abs", {"fabsf(x)", "x < 0 ? kiln_wneg(x) : x"}},
      {"Floor", {"floorf(x)", nullptr}},
      {"Ceil", {"ceilf(x)", nullptr}},
      {"HardSwish", {"x * fmaxf(0.f, fminf(1.f, x * (1.f / 6.f) + 0.5f))", nullptr}},
      {"Softplus", {"kiln_softplus(x)", nullptr}},
      {"Softsign", {"x / (1.f + fabsf(x))", nullptr}},
      {"Round", {"rintf(x)", nullptr}},  // half to even, as the reference
      {"Sign", {"x > 0.f ? 1.f : (x < 0.f ? -1.f : (x == 0.f ? 0.f : x))",
                "x > 0 ? (kiln_i64)1 : (x < 0 ? (kiln_i64)-1 : (kiln_i64)0)"}},
      {"Sin", {"sinf(x)", nullptr}},
      {"Cos", {"cosf(x)", nullptr}},
      {"Tan", {"tanf(x)", nullptr}},
      {"Asin", {"asinf(x)", nullptr}},
      {"Acos", {"acosf(x)", nullptr}},
      {"Atan", {"atanf(x)", nullptr}},
      {"Sinh", {"sinhf(x)", nullptr}},
      {"Cosh", {"coshf(x)", nullptr}},
      {"Asinh", {"asinhf(x)", nullptr}},
      {"Acosh", {"acoshf(x)", nullptr}},
      {"Atanh", {"atanhf(x)", nullptr}},
  };
  return *ops;
}

// Binary op: float and int64 expressions over a, b; result domain.
struct Binary {
  const char* ff;
  const char* fi;
  bool compare;
};
const std::map<std::string, Binary>& BinaryOps() {
  static const auto* ops = new std::map<std::string, Binary>{
      {"Add", {"a + b", "kiln_wadd(a, b)", false}},
      {"Sub", {"a - b", "kiln_wsub(a, b)", false}},
      {"Mul", {"a * b", "kiln_wmul(a, b)", false}},
      {"Div", {"a / b", "kiln_idiv(a, b)", false}},
      {"PRelu", {"a < 0.f ? b * a : a", "a < 0 ? kiln_wmul(b, a) : a", false}},
      {"Equal", {"a == b", "a == b", true}},
      {"Less", {"a < b", "a < b", true}},
      {"Greater", {"a > b", "a > b", true}},
      {"LessOrEqual", {"a <= b", "a <= b", true}},
      {"GreaterOrEqual", {"a >= b", "a >= b", true}},
      {"And", {nullptr, "a & b", false}},
      {"Or", {nullptr, "a | b", false}},
      {"Xor", {nullptr, "a ^ b", false}},
  };
  return *ops;
}

std::string Subst(std::string expr, const std::map<std::string, std::string>& vars) {
  // Replace whole identifiers x / a / b.
  std::string out;
  for (size_t i = 0; i < expr.size();) {
    const char c = expr[i];
    const bool ident_start = (std::isalpha(static_cast<unsigned char>(c)) || c == '_') &&
                             (i == 0 || !(std::isalnum(static_cast<unsigned char>(expr[i - 1])) || expr[i - 1] == '_'));
    if (ident_start) {
      size_t j = i;
      while (j < expr.size() && (std::isalnum(static_cast<unsigned char>(expr[j])) || expr[j] == '_')) ++j;
      const std::string id = expr.substr(i, j - i);
      auto it = vars.find(id);
      out += it == vars.end() ? id : it->second;
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

absl::StatusOr<float> Attr(const Node& node, const char* name, float dflt) { return node.GetFloat(name, dflt); }

// Max, Min, Sum and Mean over their present inputs (Mean: floats only).
absl::StatusOr<PwSpec> VariadicSpec(const Node& node, PwSpec s) {
  const std::string& op = node.op_type();
  const DType t0 = node.input(0)->dtype();
  const Domain d0 = DomainOf(t0);
  const bool fl = d0 == Domain::kFloat;
  if (op == "Mean" && !fl) return NoKernel(node, absl::StrCat("dtype ", DTypeName(t0)));
  int count = 0;
  for (int i = 0; i < node.num_inputs(); ++i) {
    if (!node.has_input(i)) continue;
    s.inputs.push_back(In(node, i, d0));
    ++count;
  }
  if (count == 0) return NoKernel(node, "no inputs");
  s.body = absl::StrCat(DomainType(d0), " acc = v0;\n");
  for (int k = 1; k < count; ++k) {
    std::string step;
    if (op == "Max") step = fl ? "kiln_fmax_nan(acc, v%)" : "kiln_imax(acc, v%)";
    if (op == "Min") step = fl ? "kiln_fmin_nan(acc, v%)" : "kiln_imin(acc, v%)";
    if (op == "Sum" || op == "Mean") step = fl ? "acc + v%" : "kiln_wadd(acc, v%)";
    step.replace(step.find('%'), 1, std::to_string(k));
    absl::StrAppend(&s.body, "acc = ", step, ";\n");
  }
  s.result = op == "Mean" ? absl::StrCat("acc / ", FloatLit(static_cast<float>(count))) : "acc";
  s.result_domain = d0;
  return s;
}

// Clip to its optional min and max: constants become literals, others inputs.
absl::StatusOr<PwSpec> ClipSpec(const Node& node, PwSpec s) {
  const DType t0 = node.input(0)->dtype();
  const Domain d0 = DomainOf(t0);
  const bool fl = d0 == Domain::kFloat;
  s.inputs = {In(node, 0, d0)};
  s.result_domain = d0;
  s.body = absl::StrCat(DomainType(d0), " y = v0;\n");
  for (int i = 1; i <= 2; ++i) {
    if (!node.has_input(i)) continue;
    std::string bound;
    const Value* b = node.input(i);
    if (b->is_constant()) {
      bound = fl ? FloatLit(b->constant().ScalarFloat()) : IntLit(b->constant().ScalarInt64());
    } else {
      s.inputs.push_back({i, Shape{}, d0});
      bound = absl::StrCat("v", s.inputs.size() - 1);
    }
    absl::StrAppend(&s.body, i == 1 ? "y = y < " : "y = y > ", bound, " ? ", bound, " : y;\n");
  }
  s.result = "y";
  return s;
}

// The ops with float inputs only, each reading input 0 as a float (BatchNormalization
// its parameters too): LeakyRelu, Elu, Selu, HardSigmoid, ThresholdedRelu, Gelu and
// inference BatchNormalization; NoKernel for any other op.
absl::StatusOr<PwSpec> FloatOnlySpec(const Node& node, PwSpec s) {
  const std::string& op = node.op_type();
  s.inputs = {In(node, 0, Domain::kFloat)};
  s.result_domain = Domain::kFloat;
  if (op == "LeakyRelu") {
    auto alpha = Attr(node, "alpha", 0.01f);
    if (!alpha.ok()) return alpha.status();
    s.result = absl::StrCat("v0 >= 0.f ? v0 : ", FloatLit(*alpha), " * v0");
  } else if (op == "Elu") {
    auto alpha = Attr(node, "alpha", 1.f);
    if (!alpha.ok()) return alpha.status();
    s.result = absl::StrCat("v0 >= 0.f ? v0 : ", FloatLit(*alpha), " * expm1f(v0)");
  } else if (op == "Selu") {
    auto alpha = Attr(node, "alpha", 1.67326319217681884765625f);
    auto gamma = Attr(node, "gamma", 1.05070102214813232421875f);
    if (!alpha.ok()) return alpha.status();
    if (!gamma.ok()) return gamma.status();
    s.result = absl::StrCat(FloatLit(*gamma), " * (v0 > 0.f ? v0 : ", FloatLit(*alpha), " * expm1f(v0))");
  } else if (op == "HardSigmoid") {
    auto alpha = Attr(node, "alpha", 0.2f);
    auto beta = Attr(node, "beta", 0.5f);
    if (!alpha.ok()) return alpha.status();
    if (!beta.ok()) return beta.status();
    s.result = absl::StrCat("fmaxf(0.f, fminf(1.f, ", FloatLit(*alpha), " * v0 + ", FloatLit(*beta), "))");
  } else if (op == "ThresholdedRelu") {
    auto alpha = Attr(node, "alpha", 1.f);
    if (!alpha.ok()) return alpha.status();
    s.result = absl::StrCat("v0 > ", FloatLit(*alpha), " ? v0 : 0.f");
  } else if (op == "Gelu") {
    auto approx = node.GetString("approximate", "none");
    if (!approx.ok()) return approx.status();
    // A 16-bit result takes the one-MUFU-op forms (templates/pointwise.cuh): their error
    // is below the result's own rounding; an fp32 result keeps erff / tanhf.
    const DType out = node.output(0)->dtype();
    const bool sixteen = out == DType::kFloat16 || out == DType::kBFloat16;
    if (*approx == "none") {
      s.result = sixteen ? "kiln_gelu_erf_fast(v0)" : "kiln_gelu_erf(v0)";
    } else if (*approx == "tanh") {
      s.result = sixteen ? "kiln_gelu_tanh_fast(v0)" : "kiln_gelu_tanh(v0)";
    } else {
      return NoKernel(node, absl::StrCat("approximate=", *approx));
    }
  } else if (op == "BatchNormalization") {
    if (node.num_outputs() != 1 || node.input(0)->rank() < 2) return NoKernel(node, "training form");
    auto eps = Attr(node, "epsilon", 1e-5f);
    if (!eps.ok()) return eps.status();
    Shape view(node.input(0)->rank(), 1);
    view[1] = node.input(0)->shape()[1];
    for (int i = 1; i <= 4; ++i) {
      if (!IsFloating(node.input(i)->dtype())) return NoKernel(node, "non-float parameters");
      s.inputs.push_back({i, view, Domain::kFloat});
    }
    s.body = absl::StrCat("const float a = v1 / sqrtf(v4 + ", FloatLit(*eps), ");\nconst float b = v2 - v3 * a;\n");
    s.result = "v0 * a + b";
  } else {
    return NoKernel(node, "");
  }
  return s;
}

absl::StatusOr<PwSpec> Spec(const Node& node) {
  const std::string& op = node.op_type();
  PwSpec s;
  const DType t0 = node.input(0)->dtype();
  const Domain d0 = DomainOf(t0);
  const bool fl = d0 == Domain::kFloat;
  // A 16-bit Sigmoid result takes the approximate exp and division
  // (templates/pointwise.cuh, kiln_sigmoid_fast), as Gelu's below; fp32 keeps expf.
  const DType out_dt = node.output(0)->dtype();
  if (op == "Sigmoid" && fl && (out_dt == DType::kFloat16 || out_dt == DType::kBFloat16)) {
    s.inputs = {In(node, 0, d0)};
    s.result = "kiln_sigmoid_fast(v0)";
    s.result_domain = d0;
    return s;
  }
  if (auto it = UnaryOps().find(op); it != UnaryOps().end()) {
    const char* e = fl ? it->second.first : it->second.second;
    if (e == nullptr) return NoKernel(node, absl::StrCat("dtype ", DTypeName(t0)));
    s.inputs = {In(node, 0, d0)};
    s.result = Subst(e, {{"x", "v0"}});
    s.result_domain = d0;
    return s;
  }
  if (auto it = BinaryOps().find(op); it != BinaryOps().end()) {
    const char* e = fl ? it->second.ff : it->second.fi;
    if (e == nullptr) return NoKernel(node, absl::StrCat("dtype ", DTypeName(t0)));
    s.inputs = {In(node, 0, d0), In(node, 1, d0)};
    s.result = Subst(e, {{"a", "v0"}, {"b", "v1"}});
    s.result_domain = it->second.compare ? Domain::kBool : d0;
    return s;
  }
  if (op == "Pow") {
    const Domain d1 = DomainOf(node.input(1)->dtype());
    if (fl) {
      s.inputs = {In(node, 0, Domain::kFloat), In(node, 1, Domain::kFloat)};
      s.result = "powf(v0, v1)";
    } else if (d1 == Domain::kInt) {
      s.inputs = {In(node, 0, Domain::kInt), In(node, 1, Domain::kInt)};
      s.result = "kiln_ipow(v0, v1)";
    } else {
      s.inputs = {In(node, 0, Domain::kInt), In(node, 1, Domain::kFloat)};
      s.result = "kiln_fpow_i64(v0, v1)";
    }
    s.result_domain = d0;
    return s;
  }
  if (op == "Max" || op == "Min" || op == "Sum" || op == "Mean") return VariadicSpec(node, std::move(s));
  if (op == "Mod") {
    auto fmod = node.GetInt("fmod", 0);
    if (!fmod.ok()) return fmod.status();
    s.inputs = {In(node, 0, d0), In(node, 1, d0)};
    s.result_domain = d0;
    if (fl) {
      if (*fmod == 0) return NoKernel(node, "fmod=0 on floats");
      s.result = "fmodf(v0, v1)";
    } else {
      // C's remainder takes the dividend's sign; fmod=0 takes the divisor's. A zero or
      // -1 divisor gives 0, as the reference.
      s.body = "const kiln_i64 r = (v1 == 0 || v1 == -1) ? (kiln_i64)0 : v0 % v1;\n";
      s.result = *fmod != 0 ? "r" : "(r != 0 && ((r < 0) != (v1 < 0))) ? r + v1 : r";
    }
    return s;
  }
  if (op == "IsNaN" || op == "IsInf") {
    if (!fl) return NoKernel(node, absl::StrCat("dtype ", DTypeName(t0)));
    s.inputs = {In(node, 0, Domain::kFloat)};
    s.result_domain = Domain::kBool;
    if (op == "IsNaN") {
      s.result = "v0 != v0";
      return s;
    }
    auto neg = node.GetInt("detect_negative", 1);
    auto pos = node.GetInt("detect_positive", 1);
    if (!neg.ok()) return neg.status();
    if (!pos.ok()) return pos.status();
    const std::string inf = FloatLit(INFINITY);
    s.result = absl::StrCat("(", *pos != 0 ? absl::StrCat("v0 == ", inf) : "false", ") || (",
                            *neg != 0 ? absl::StrCat("v0 == -", inf) : "false", ")");
    return s;
  }
  if (op == "BitShift") {
    auto dir = node.GetString("direction");
    if (!dir.ok()) return dir.status();
    s.inputs = {In(node, 0, Domain::kInt), In(node, 1, Domain::kInt)};
    s.result_domain = Domain::kInt;
    s.result = *dir == "LEFT" ? "v1 >= 8 ? (kiln_i64)0 : ((v0 << v1) & 0xff)" : "v1 >= 8 ? (kiln_i64)0 : (v0 >> v1)";
    return s;
  }
  if (op == "Shrink") {
    auto lambd = Attr(node, "lambd", 0.5f);
    auto bias = Attr(node, "bias", 0.f);
    if (!lambd.ok()) return lambd.status();
    if (!bias.ok()) return bias.status();
    const std::string l = FloatLit(*lambd), b = FloatLit(*bias);
    s.inputs = {In(node, 0, d0)};
    s.result_domain = d0;
    s.result = fl ? absl::StrCat("v0 < -", l, " ? v0 + ", b, " : (v0 > ", l, " ? v0 - ", b, " : 0.f)")
                  : absl::StrCat("(kiln_i64)((double)v0 < -(double)", l, " ? (double)v0 + (double)", b,
                                 " : ((double)v0 > (double)", l, " ? (double)v0 - (double)", b, " : 0.0))");
    return s;
  }
  if (op == "Not" || op == "Cast" || op == "CastLike") {
    s.inputs = {In(node, 0, d0)};
    s.result = op == "Not" ? "v0 == 0" : "v0";
    s.result_domain = op == "Not" ? Domain::kBool : d0;
    return s;
  }
  if (op == "Where") {
    const Domain d = DomainOf(node.input(1)->dtype());
    s.inputs = {In(node, 0, Domain::kInt), In(node, 1, d), In(node, 2, d)};
    s.result = "v0 != 0 ? v1 : v2";
    s.result_domain = d;
    return s;
  }
  if (op == "Clip") return ClipSpec(node, std::move(s));
  if (!fl) return NoKernel(node, absl::StrCat("dtype ", DTypeName(t0)));
  return FloatOnlySpec(node, std::move(s));
}

}  // namespace

bool IsPointwiseOp(absl::string_view op) {
  static const char* const kOthers[] = {"Pow",  "Max",  "Min",   "Sum",       "Mean", "Not",
                                        "Cast", "Where", "Clip", "LeakyRelu", "Elu",  "Selu",
                                        "HardSigmoid", "Gelu", "BatchNormalization", "Mod", "IsNaN",
                                        "IsInf", "Shrink", "ThresholdedRelu", "CastLike", "BitShift"};
  const std::string o(op);
  if (UnaryOps().count(o) || BinaryOps().count(o)) return true;
  for (const char* k : kOthers) {
    if (op == k) return true;
  }
  return false;
}

bool PointwiseUsesSpecialFunction(absl::string_view op) {
  static const char* const kSpecial[] = {"Exp",  "Log",  "Sqrt", "Tanh", "Erf",  "Sigmoid", "Softplus",
                                         "Pow",  "Elu",  "Selu", "Gelu", "Sin",  "Cos",     "Tan",
                                         "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh",   "Acosh",
                                         "Atanh"};
  for (const char* k : kSpecial) {
    if (op == k) return true;
  }
  return false;
}

absl::StatusOr<std::vector<KernelLaunch>> GeneratePointwise(const Node& node) {
  absl::StatusOr<PwSpec> spec = Spec(node);
  if (!spec.ok()) return spec.status();
  return Emit(node, *spec);
}

namespace {

// Whether `a` and `b` hold as many elements in the same last two dims: one is a
// regrouping of the other's leading (batch) dims, element order unchanged.
bool SameRowsRegrouped(const Shape& a, const Shape& b) {
  return a.size() >= 2 && b.size() >= 2 && a[a.size() - 1] == b[b.size() - 1] && a[a.size() - 2] == b[b.size() - 2] &&
         NumElements(a) == NumElements(b);
}

// A Reshape between two batch regroupings of `shape`.
bool IsBatchRegroupOf(const Node& n, const Shape& shape) {
  return n.op_type() == "Reshape" && n.num_outputs() == 1 && n.input(0)->has_type() && n.output(0)->has_type() &&
         SameRowsRegrouped(n.input(0)->shape(), shape) && SameRowsRegrouped(n.output(0)->shape(), shape);
}

}  // namespace

absl::Status ComposeElementwise(const Node& group, const Graph& body, const Node* skip, const Shape& shape,
                                ComposedElementwise& out) {
  std::vector<const Node*> members;
  for (const Node* member : body.nodes()) {
    if (member != skip) members.push_back(member);
  }
  return ComposeElementwise(group, body, members, shape, out);
}

absl::Status ComposeElementwise(const Node& group, const Graph& body, const std::vector<const Node*>& members,
                                const Shape& shape, ComposedElementwise& out) {
  absl::flat_hash_map<const Value*, int> input_index;
  for (size_t i = 0; i < body.inputs().size(); ++i) input_index[body.inputs()[i]] = static_cast<int>(i);
  // Values that are strided views of a group input: (input, strides over the value's
  // own shape, first element).
  struct View {
    int input;
    std::vector<int64_t> strides;
    int64_t offset;
    std::vector<DimExpr> dim_strides;  // dynamic_views
  };
  absl::flat_hash_map<const Value*, View> views;
  int temp = 0;
  for (const Node* member : members) {
    if (out.allow_views && IsMovementOp(member->op_type()) && member->num_outputs() == 1) {
      // A view of a group input, or of another view member (composed).
      const Value* in = member->input(0);
      absl::StatusOr<MovementView> view;
      int source = -1;
      if (out.dynamic_views) {
        // A Transpose of a group input: its strides are the input's dense ones permuted.
        auto gi = input_index.find(in);
        if (member->op_type() != "Transpose" || gi == input_index.end()) {
          return NoKernel(group, absl::StrCat("member ", member->Describe(), " views a value with sizes that vary"));
        }
        const std::vector<DimExpr> dense = DenseDimStrides(ValueDims(*in));
        std::vector<DimExpr> dim_strides;
        for (int64_t p : PermOf(*member)) dim_strides.push_back(dense[p]);
        views[member->output(0)] = {gi->second, {}, 0, std::move(dim_strides)};
        continue;
      }
      if (auto gi = input_index.find(in); gi != input_index.end()) {
        view = ViewOf(*member);
        source = gi->second;
      } else if (auto vw = views.find(in); vw != views.end()) {
        view = ViewOf(*member, vw->second.strides, vw->second.offset);
        source = vw->second.input;
      } else {
        return NoKernel(group, absl::StrCat("member ", member->Describe(), " views a value computed in the group"));
      }
      if (!view.ok()) return view.status();
      views[member->output(0)] = {source, std::move(view->strides), view->offset};
      continue;
    }
    if (out.regroup_batch && IsBatchRegroupOf(*member, shape) && out.computed.contains(member->input(0))) {
      out.computed[member->output(0)] = out.computed[member->input(0)];
      continue;
    }
    const bool regrouped = out.regroup_batch && member->num_outputs() == 1 &&
                           member->output(0)->shape() != shape && SameRowsRegrouped(member->output(0)->shape(), shape);
    if (!IsPointwiseOp(member->op_type()) || member->num_outputs() != 1 ||
        (member->output(0)->shape() != shape && !regrouped)) {
      return NoKernel(group, absl::StrCat("member ", member->Describe(), " is not element-wise over ",
                                          ShapeToString(shape)));
    }
    absl::StatusOr<PwSpec> spec = Spec(*member);
    if (!spec.ok()) return spec.status();
    std::string block = "{\n";
    for (size_t k = 0; k < spec->inputs.size(); ++k) {
      const PwSpec::Input& in = spec->inputs[k];
      const Value* v = member->input(in.input);
      std::string expr;
      if (v->is_constant()) {
        if (v->numel() != 1) return NoKernel(group, absl::StrCat("constant '", v->name(), "' is not a scalar"));
        // A dynamic group's scalar computed from the sizes: its expression over kiln_dims.
        if (v->has_symbolic_data()) {
          expr = absl::StrCat("(", DomainType(in.domain), ")", DimCode(v->symbolic_data()[0]));
        } else {
          expr = in.domain == Domain::kFloat ? FloatLit(v->constant().ScalarFloat())
                                             : IntLit(v->constant().ScalarInt64());
        }
      } else if (auto c = out.computed.find(v); c != out.computed.end()) {
        expr = c->second.second == in.domain ? c->second.first
                                             : absl::StrCat("(", DomainType(in.domain), ")(", c->second.first, ")");
      } else if (auto gi = input_index.find(v);
                 gi != input_index.end() || views.contains(v) || out.row_views.contains(v)) {
        ElementwiseLoad load{0, in.domain, in.view, {}, 0, regrouped ? member->output(0)->shape() : Shape{}};
        if (auto rv = out.row_views.find(v); rv != out.row_views.end()) {
          if (in.view != shape || v->shape() != shape) {
            return NoKernel(group,
                            absl::StrCat("rows moved into '", v->name(), "' are not read at ", ShapeToString(shape)));
          }
          load.input = rv->second.first;
          load.row_map = rv->second.second;
        } else if (auto vw = views.find(v); vw != views.end()) {
          // The view's strides over its shape, broadcast like `in.view` into `shape`.
          const Shape& vs = v->shape();
          if (in.view != vs || vs.size() > shape.size()) {
            return NoKernel(group, absl::StrCat("view '", v->name(), "' is not read at its own shape"));
          }
          load.input = vw->second.input;
          load.offset = vw->second.offset;
          const size_t lead = shape.size() - vs.size();
          if (out.dynamic_views) {
            load.dim_strides.assign(shape.size(), DimExpr::Constant(0));
            for (size_t d = 0; d < vs.size(); ++d) {
              if (vs[d] != 1) load.dim_strides[lead + d] = vw->second.dim_strides[d];
            }
          } else {
            load.strides.assign(shape.size(), 0);
            for (size_t d = 0; d < vs.size(); ++d) load.strides[lead + d] = vs[d] == 1 ? 0 : vw->second.strides[d];
          }
        } else {
          load.input = gi->second;
        }
        size_t l = 0;
        while (l < out.loads.size() &&
               !(out.loads[l].input == load.input && out.loads[l].domain == load.domain &&
                 out.loads[l].view == load.view && out.loads[l].strides == load.strides &&
                 out.loads[l].offset == load.offset && out.loads[l].into == load.into &&
                 out.loads[l].dim_strides == load.dim_strides && out.loads[l].row_map == load.row_map)) {
          ++l;
        }
        if (l == out.loads.size()) out.loads.push_back(std::move(load));
        expr = absl::StrCat("g", l);
      } else {
        return NoKernel(group, absl::StrCat("value '", v->name(), "' has no source in the group"));
      }
      absl::StrAppend(&block, "const ", DomainType(in.domain), " v", k, " = ", expr, ";\n");
    }
    const std::string t = absl::StrCat("t", temp++);
    absl::StrAppend(&out.code, DomainType(spec->result_domain), " ", t, ";\n", block, spec->body, t, " = ",
                    spec->result, ";\n}\n");
    out.computed[member->output(0)] = {t, spec->result_domain};
  }
  return absl::OkStatus();
}

// A group of element-wise nodes, all writing the group's shape S: one kernel whose
// loop body computes every member in fp32/int64 registers in body order (each
// member's spec in a block of its own, its operands bound to v0, v1, ...), loads
// each (group input, domain, view) once and stores only the group's outputs.
// Intermediates are never rounded to the storage dtype, unlike the unfused kernels.
absl::StatusOr<std::vector<KernelLaunch>> GeneratePointwiseGroup(const Node& group) {
  auto body_or = FusedGroupBody(group);
  if (!body_or.ok()) return NoKernel(group, std::string(body_or.status().message()));
  const Graph& body = **body_or;
  const Shape& shape = group.output(0)->shape();
  for (const Value* y : group.outputs()) {
    if (y->shape() != shape) return NoKernel(group, "pointwise group with outputs of different shapes");
  }
  // A dynamic graph's group (issue 34): every member writes the group's dims and each
  // input is read whole at strides over the dims, or through a Transpose member at its
  // permuted strides (ComposedElementwise::dynamic_views).
  const bool dynamic = HasDynamicValues(group);
  if (dynamic) {
    for (const Node* member : body.nodes()) {
      if (member->num_outputs() == 1 && ValueDims(*member->output(0)) != ValueDims(*group.output(0))) {
        return NoKernel(group, absl::StrCat("member ", member->Describe(),
                                            " does not write the group's dims for every size in the dim ranges"));
      }
    }
  }
  ComposedElementwise composed;
  composed.allow_views = true;
  composed.dynamic_views = dynamic;
  if (absl::Status st = ComposeElementwise(group, body, nullptr, shape, composed); !st.ok()) return st;
  const std::vector<ElementwiseLoad>& loads = composed.loads;

  EwKernel k;
  k.comment = absl::StrCat("fused pointwise group: ", body.num_nodes(), " ops over ", ShapeToString(shape));
  k.shape = shape;
  if (dynamic) k.dims = ValueDims(*group.output(0));
  std::vector<int> args;
  for (int o = 0; o < group.num_outputs(); ++o) {
    auto c = composed.computed.find(body.outputs()[o]);
    if (c == composed.computed.end()) return NoKernel(group, "a group output is not computed by a member");
    const auto& [var, domain] = c->second;
    k.outputs.push_back({absl::StrCat("out", o), group.output(o)->dtype(), domain, var});
    args.push_back(o);
  }
  for (size_t l = 0; l < loads.size(); ++l) {
    EwOperand op{absl::StrCat("in", l), group.input(loads[l].input)->dtype(), loads[l].domain, absl::StrCat("g", l),
                 loads[l].strides, loads[l].offset};
    if (op.strides.empty()) {
      if (loads[l].view.size() > shape.size()) return NoKernel(group, "input of higher rank than the output");
      if (!BroadcastStrides(loads[l].view, shape, &op.strides)) {
        return NoKernel(group, "input does not broadcast to the output");
      }
    }
    if (dynamic) {
      const Value* v = group.input(loads[l].input);
      if (v->has_symbolic_data()) return NoKernel(group, "it reads a tensor computed from the sizes");
      if (!loads[l].dim_strides.empty()) {  // through a Transpose member
        op.dim_strides = loads[l].dim_strides;
      } else if (loads[l].view != v->shape() || !DynamicBroadcastStrides(ValueDims(*v), k.dims, &op.dim_strides)) {
        return NoKernel(group, "an input that does not broadcast to the output for every size in the dim ranges");
      }
    }
    k.operands.push_back(std::move(op));
    args.push_back(InputArg(group, loads[l].input));
  }
  k.code = composed.code;
  KernelLaunch launch = EmitElementwiseKernel(k);
  launch.args = std::move(args);
  return std::vector<KernelLaunch>{std::move(launch)};
}

absl::StatusOr<ElementwiseExpr> ElementwiseSpec(const Node& node) {
  absl::StatusOr<PwSpec> spec = Spec(node);
  if (!spec.ok()) return spec.status();
  ElementwiseExpr e;
  for (const PwSpec::Input& in : spec->inputs) e.inputs.push_back({in.input, in.view, in.domain});
  e.body = std::move(spec->body);
  e.result = std::move(spec->result);
  e.result_domain = spec->result_domain;
  return e;
}

}  // namespace kiln::codegen::ops
