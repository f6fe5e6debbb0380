// Element-wise kernels with multidirectional broadcasting: one generated
// expression per op over fp32 (floating inputs) or int64 (integer/bool inputs)
// registers; each input is indexed through broadcast strides baked as constants,
// or by the output index itself when it has the output's shape.
#include <cctype>
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
#include "graph/ops/op_util.h"

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
  const Shape& oshape = out->shape();
  const int64_t n = out->numel();
  StridedSpace space;
  space.shape = oshape;
  space.strides.push_back(DenseStrides(oshape));
  for (const PwSpec::Input& in : spec.inputs) {
    const Shape& v = in.view;
    if (v.size() > oshape.size()) return NoKernel(node, "input of higher rank than the output");
    std::vector<int64_t> s(oshape.size(), 0);
    const std::vector<int64_t> dense = DenseStrides(v);
    const size_t lead = oshape.size() - v.size();
    for (size_t d = 0; d < v.size(); ++d) {
      if (v[d] != 1 && v[d] != oshape[lead + d]) return NoKernel(node, "input does not broadcast to the output");
      s[lead + d] = v[d] == 1 ? 0 : dense[d];
    }
    space.strides.push_back(s);
  }
  space.Collapse();
  const char* it = IndexType(n);
  KernelLaunch launch;
  std::string params = Param(out->dtype(), false, "out0");
  launch.args.push_back(0);
  std::vector<int> operands;
  for (size_t k = 0; k < spec.inputs.size(); ++k) {
    const Value* v = node.input(spec.inputs[k].input);
    absl::StrAppend(&params, ", ", Param(v->dtype(), true, absl::StrCat("in", k)));
    launch.args.push_back(InputArg(node, spec.inputs[k].input));
    operands.push_back(static_cast<int>(k) + 1);
  }
  std::string src = absl::StrCat(TemplateSource("pointwise.cuh"), "\n// ", node.op_type(), " ",
                                 out->TypeString(), "\nextern \"C\" __global__ void KILN_KERNEL(", params, ") {\n",
                                 GridStrideLoop(n));
  absl::StrAppend(&src, OffsetCode(space, operands, "i", it, "o"));
  for (size_t k = 0; k < spec.inputs.size(); ++k) {
    const Value* v = node.input(spec.inputs[k].input);
    absl::StrAppend(&src, "const ", DomainType(spec.inputs[k].domain), " v", k, " = ",
                    LoadAs(v->dtype(), spec.inputs[k].domain, absl::StrCat("in", k), absl::StrCat("o", k + 1)),
                    ";\n");
  }
  absl::StrAppend(&src, spec.body, StoreFrom(out->dtype(), spec.result_domain, "out0", "i", spec.result), "\n}\n}\n");
  launch.source = std::move(src);
  SetGrid1D(launch, n);
  return std::vector<KernelLaunch>{std::move(launch)};
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

absl::StatusOr<PwSpec> Spec(const Node& node) {
  const std::string& op = node.op_type();
  PwSpec s;
  const DType t0 = node.input(0)->dtype();
  const Domain d0 = DomainOf(t0);
  const bool fl = d0 == Domain::kFloat;
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
  if (op == "Max" || op == "Min" || op == "Sum" || op == "Mean") {
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
  if (op == "Not" || op == "Cast") {
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
  if (op == "Clip") {
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
  if (!fl) return NoKernel(node, absl::StrCat("dtype ", DTypeName(t0)));
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
  } else if (op == "Gelu") {
    auto approx = node.GetString("approximate", "none");
    if (!approx.ok()) return approx.status();
    if (*approx == "none") {
      s.result = "kiln_gelu_erf(v0)";
    } else if (*approx == "tanh") {
      s.result = "kiln_gelu_tanh(v0)";
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

}  // namespace

bool IsPointwiseOp(absl::string_view op) {
  static const char* const kOthers[] = {"Pow",  "Max",  "Min",   "Sum",       "Mean", "Not",
                                        "Cast", "Where", "Clip", "LeakyRelu", "Elu",  "Selu",
                                        "HardSigmoid", "Gelu", "BatchNormalization"};
  const std::string o(op);
  if (UnaryOps().count(o) || BinaryOps().count(o)) return true;
  for (const char* k : kOthers) {
    if (op == k) return true;
  }
  return false;
}

absl::StatusOr<std::vector<KernelLaunch>> GeneratePointwise(const Node& node) {
  absl::StatusOr<PwSpec> spec = Spec(node);
  if (!spec.ok()) return spec.status();
  return Emit(node, *spec);
}

absl::Status ComposeElementwise(const Node& group, const Graph& body, const Node* skip, const Shape& shape,
                                ComposedElementwise& out) {
  absl::flat_hash_map<const Value*, int> input_index;
  for (size_t i = 0; i < body.inputs().size(); ++i) input_index[body.inputs()[i]] = static_cast<int>(i);
  int temp = 0;
  for (const Node* member : body.nodes()) {
    if (member == skip) continue;
    if (!IsPointwiseOp(member->op_type()) || member->num_outputs() != 1 || member->output(0)->shape() != shape) {
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
        expr = in.domain == Domain::kFloat ? FloatLit(v->constant().ScalarFloat())
                                           : IntLit(v->constant().ScalarInt64());
      } else if (auto c = out.computed.find(v); c != out.computed.end()) {
        expr = c->second.second == in.domain ? c->second.first
                                             : absl::StrCat("(", DomainType(in.domain), ")(", c->second.first, ")");
      } else if (auto gi = input_index.find(v); gi != input_index.end()) {
        size_t l = 0;
        while (l < out.loads.size() && !(out.loads[l].input == gi->second && out.loads[l].domain == in.domain &&
                                         out.loads[l].view == in.view)) {
          ++l;
        }
        if (l == out.loads.size()) out.loads.push_back({gi->second, in.domain, in.view});
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
  const int64_t n = NumElements(shape);
  ComposedElementwise composed;
  if (absl::Status st = ComposeElementwise(group, body, nullptr, shape, composed); !st.ok()) return st;
  const std::vector<ElementwiseLoad>& loads = composed.loads;

  KernelLaunch launch;
  std::string params;
  StridedSpace space;
  space.shape = shape;
  std::vector<int> operands;
  for (int o = 0; o < group.num_outputs(); ++o) {
    absl::StrAppend(&params, o ? ", " : "", Param(group.output(o)->dtype(), false, absl::StrCat("out", o)));
    launch.args.push_back(o);
  }
  space.strides.push_back(DenseStrides(shape));
  for (size_t l = 0; l < loads.size(); ++l) {
    const Shape& v = loads[l].view;
    if (v.size() > shape.size()) return NoKernel(group, "input of higher rank than the output");
    std::vector<int64_t> st(shape.size(), 0);
    const std::vector<int64_t> dense = DenseStrides(v);
    const size_t lead = shape.size() - v.size();
    for (size_t d = 0; d < v.size(); ++d) {
      if (v[d] != 1 && v[d] != shape[lead + d]) return NoKernel(group, "input does not broadcast to the output");
      st[lead + d] = v[d] == 1 ? 0 : dense[d];
    }
    space.strides.push_back(st);
    operands.push_back(static_cast<int>(l) + 1);
    absl::StrAppend(&params, ", ", Param(group.input(loads[l].input)->dtype(), true, absl::StrCat("in", l)));
    launch.args.push_back(InputArg(group, loads[l].input));
  }
  space.Collapse();
  const char* it = IndexType(n);
  std::string src = absl::StrCat(TemplateSource("pointwise.cuh"), "\n// fused pointwise group ", group.name(), ": ",
                                 body.num_nodes(), " ops over ", ShapeToString(shape),
                                 "\nextern \"C\" __global__ void KILN_KERNEL(", params, ") {\n", GridStrideLoop(n),
                                 OffsetCode(space, operands, "i", it, "o"));
  for (size_t l = 0; l < loads.size(); ++l) {
    absl::StrAppend(&src, "const ", DomainType(loads[l].domain), " g", l, " = ",
                    LoadAs(group.input(loads[l].input)->dtype(), loads[l].domain, absl::StrCat("in", l),
                           absl::StrCat("o", l + 1)),
                    ";\n");
  }
  absl::StrAppend(&src, composed.code);
  for (int o = 0; o < group.num_outputs(); ++o) {
    auto c = composed.computed.find(body.outputs()[o]);
    if (c == composed.computed.end()) return NoKernel(group, "a group output is not computed by a member");
    const auto& [var, domain] = c->second;
    absl::StrAppend(&src, StoreFrom(group.output(o)->dtype(), domain, absl::StrCat("out", o), "i", var), "\n");
  }
  absl::StrAppend(&src, "}\n}\n");
  launch.source = std::move(src);
  SetGrid1D(launch, n);
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
