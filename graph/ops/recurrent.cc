// RNN, GRU and LSTM: one recurrence with 1, 3 or 4 gates, so one op file registers
// all three (graph/ops/recurrent.h has the plan and semantics).
#include "graph/ops/recurrent.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

// Input and output positions.
constexpr int kX = 0, kW = 1, kR = 2, kB = 3, kLens = 4, kH0 = 5, kC0 = 6, kP = 7;

bool UsesAlpha(const std::string& n) {
  return n == "HardSigmoid" || n == "LeakyRelu" || n == "ThresholdedRelu" || n == "ScaledTanh" || n == "Affine" ||
         n == "Elu";
}
bool UsesBeta(const std::string& n) { return n == "HardSigmoid" || n == "ScaledTanh" || n == "Affine"; }

float DefaultAlpha(const std::string& n) {
  if (n == "HardSigmoid") return 0.2f;
  if (n == "LeakyRelu") return 0.01f;
  return 1.f;
}
float DefaultBeta(const std::string& n) { return n == "HardSigmoid" ? 0.5f : (n == "Affine" ? 0.f : 1.f); }

absl::Status CheckShape(const Node& node, int i, const Shape& want, const char* what) {
  if (!node.has_input(i)) return absl::OkStatus();
  if (node.input(i)->shape() != want) {
    return node.Error(absl::StrCat(what, " must be ", ShapeToString(want), ", got ", node.input(i)->TypeString()));
  }
  return absl::OkStatus();
}

}  // namespace

float ApplyRnnActivation(const RnnActivation& a, float x) {
  const std::string& n = a.name;
  if (n == "Sigmoid") return 1.f / (1.f + std::exp(-x));
  if (n == "Tanh") return std::tanh(x);
  if (n == "Relu") return std::max(0.f, x);
  if (n == "HardSigmoid") return std::max(0.f, std::min(1.f, a.alpha * x + a.beta));
  if (n == "LeakyRelu") return x >= 0 ? x : a.alpha * x;
  if (n == "ThresholdedRelu") return x > a.alpha ? x : 0.f;
  if (n == "ScaledTanh") return a.alpha * std::tanh(a.beta * x);
  if (n == "Affine") return a.alpha * x + a.beta;
  if (n == "Elu") return x >= 0 ? x : a.alpha * (std::exp(x) - 1.f);
  if (n == "Softsign") return x / (1.f + std::fabs(x));
  return std::log1p(std::exp(x));  // Softplus
}

absl::StatusOr<RnnPlan> PlanRnn(const Node& node, RnnKind kind) {
  RnnPlan p;
  p.kind = kind;
  p.gates = kind == RnnKind::kRnn ? 1 : (kind == RnnKind::kGru ? 3 : 4);
  KILN_ASSIGN_OR_RETURN(p.hidden, node.GetInt("hidden_size"));
  KILN_ASSIGN_OR_RETURN(std::string direction, node.GetString("direction", "forward"));
  KILN_ASSIGN_OR_RETURN(int64_t layout, node.GetInt("layout", 0));
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    return node.Error(absl::StrCat("direction must be forward, reverse or bidirectional, got '", direction, "'"));
  }
  if (layout != 0 && layout != 1) return node.Error(absl::StrCat("layout must be 0 or 1, got ", layout));
  p.dirs = direction == "bidirectional" ? 2 : 1;
  p.reverse = direction == "reverse";
  p.batch_first = layout == 1;
  if (node.has_attr("clip")) {
    KILN_ASSIGN_OR_RETURN(p.clip, node.GetFloat("clip"));
    p.has_clip = true;
  }
  if (kind == RnnKind::kGru) {
    KILN_ASSIGN_OR_RETURN(int64_t lbr, node.GetInt("linear_before_reset", 0));
    p.linear_before_reset = lbr != 0;
  }
  if (kind == RnnKind::kLstm) {
    KILN_ASSIGN_OR_RETURN(int64_t f, node.GetInt("input_forget", 0));
    p.input_forget = f != 0;
  }
  // Activations: the attribute's (per direction), else the kind's defaults.
  const std::vector<std::string> defaults = kind == RnnKind::kRnn   ? std::vector<std::string>{"Tanh"}
                                            : kind == RnnKind::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                                    : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  const size_t per_dir = defaults.size();
  std::vector<std::string> names;
  if (node.has_attr("activations")) {
    KILN_ASSIGN_OR_RETURN(names, node.GetStrings("activations"));
  } else {
    for (int64_t d = 0; d < p.dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  }
  if (names.size() != per_dir * p.dirs) {
    return node.Error(absl::StrCat("activations has ", names.size(), " entries, expected ", per_dir * p.dirs));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<float> alphas, node.GetFloats("activation_alpha", {}));
  KILN_ASSIGN_OR_RETURN(std::vector<float> betas, node.GetFloats("activation_beta", {}));
  size_t next_alpha = 0, next_beta = 0;
  p.acts.assign(p.dirs, {});
  for (size_t k = 0; k < names.size(); ++k) {
    RnnActivation a;
    a.name = names[k];
    static const char* const kKnown[] = {"Sigmoid", "Tanh",   "Relu", "HardSigmoid", "LeakyRelu", "ThresholdedRelu",
                                         "ScaledTanh", "Affine", "Elu", "Softsign", "Softplus"};
    if (std::find(std::begin(kKnown), std::end(kKnown), a.name) == std::end(kKnown)) {
      return node.Error(absl::StrCat("unknown activation '", a.name, "'"));
    }
    a.alpha = UsesAlpha(a.name) && next_alpha < alphas.size() ? alphas[next_alpha++] : DefaultAlpha(a.name);
    a.beta = UsesBeta(a.name) && next_beta < betas.size() ? betas[next_beta++] : DefaultBeta(a.name);
    p.acts[k / per_dir].push_back(a);
  }

  const Shape& x = node.input(kX)->shape();
  if (x.size() != 3) return node.Error(absl::StrCat("X must be 3-D, got ", node.input(kX)->TypeString()));
  p.seq = p.batch_first ? x[1] : x[0];
  p.batch = p.batch_first ? x[0] : x[1];
  p.input = x[2];
  const int64_t gh = p.gates * p.hidden;
  KILN_RETURN_IF_ERROR(CheckShape(node, kW, {p.dirs, gh, p.input}, "W"));
  KILN_RETURN_IF_ERROR(CheckShape(node, kR, {p.dirs, gh, p.hidden}, "R"));
  KILN_RETURN_IF_ERROR(CheckShape(node, kB, {p.dirs, 2 * gh}, "B"));
  KILN_RETURN_IF_ERROR(CheckShape(node, kLens, {p.batch}, "sequence_lens"));
  const Shape state = p.batch_first ? Shape{p.batch, p.dirs, p.hidden} : Shape{p.dirs, p.batch, p.hidden};
  KILN_RETURN_IF_ERROR(CheckShape(node, kH0, state, "initial_h"));
  if (kind == RnnKind::kLstm) {
    KILN_RETURN_IF_ERROR(CheckShape(node, kC0, state, "initial_c"));
    KILN_RETURN_IF_ERROR(CheckShape(node, kP, {p.dirs, 3 * p.hidden}, "P"));
  }
  return p;
}

absl::Status InferRnn(Node& node, RnnKind kind) {
  for (int i : {kX, kW, kR}) KILN_RETURN_IF_ERROR(RequireFloat(node, i));
  KILN_ASSIGN_OR_RETURN(RnnPlan p, PlanRnn(node, kind));
  if (node.has_input(kLens) && node.input(kLens)->dtype() != DType::kInt32 &&
      node.input(kLens)->dtype() != DType::kInt64) {
    return node.Error("sequence_lens must be i32 or i64");
  }
  const DType dt = node.input(kX)->dtype();
  const Shape y = p.batch_first ? Shape{p.batch, p.seq, p.dirs, p.hidden} : Shape{p.seq, p.dirs, p.batch, p.hidden};
  const Shape state = p.batch_first ? Shape{p.batch, p.dirs, p.hidden} : Shape{p.dirs, p.batch, p.hidden};
  for (int o = 0; o < node.num_outputs(); ++o) {
    if (node.output(o) != nullptr) node.output(o)->SetType(dt, o == 0 ? y : state);
  }
  return absl::OkStatus();
}

absl::Status EvalRnn(const Node& node, RnnKind kind, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(RnnPlan p, PlanRnn(node, kind));
  auto get = [&](int i) { return static_cast<int>(in.size()) > i && in[i] != nullptr ? in[i]->ToFloat() : std::vector<float>(); };
  const std::vector<float> x = get(kX), w = get(kW), r = get(kR), b = get(kB), h0 = get(kH0), c0 = get(kC0), pp = get(kP);
  const std::vector<int64_t> lens = static_cast<int>(in.size()) > kLens && in[kLens] != nullptr
                                        ? in[kLens]->ToInt64() : std::vector<int64_t>(p.batch, p.seq);
  const int64_t H = p.hidden, G = p.gates, I = p.input;
  std::vector<float> y(p.seq * p.dirs * p.batch * H, 0.f), yh(p.dirs * p.batch * H), yc(p.dirs * p.batch * H);
  auto y_at = [&](int64_t t, int64_t d, int64_t bi) {
    return p.batch_first ? ((bi * p.seq + t) * p.dirs + d) * H : ((t * p.dirs + d) * p.batch + bi) * H;
  };
  auto state_at = [&](int64_t d, int64_t bi) { return p.batch_first ? (bi * p.dirs + d) * H : (d * p.batch + bi) * H; };
  auto x_at = [&](int64_t t, int64_t bi) { return p.batch_first ? (bi * p.seq + t) * I : (t * p.batch + bi) * I; };
  auto clip = [&](float v) { return p.has_clip ? std::max(-p.clip, std::min(p.clip, v)) : v; };
  for (int64_t d = 0; d < p.dirs; ++d) {
    const bool rev = p.reverse || d == 1;
    const std::vector<RnnActivation>& a = p.acts[d];
    for (int64_t bi = 0; bi < p.batch; ++bi) {
      if (lens[bi] < 0 || lens[bi] > p.seq) {
        return node.Error(absl::StrCat("sequence_lens[", bi, "] = ", lens[bi], " is outside [0, ", p.seq, "]"));
      }
      std::vector<float> h(H, 0.f), c(H, 0.f), hn(H), cn(H), gate(G * H), rh(H);
      if (!h0.empty()) std::copy_n(h0.begin() + state_at(d, bi), H, h.begin());
      if (!c0.empty()) std::copy_n(c0.begin() + state_at(d, bi), H, c.begin());
      for (int64_t k = 0; k < lens[bi]; ++k) {
        const int64_t t = rev ? lens[bi] - 1 - k : k;
        const float* xt = x.data() + x_at(t, bi);
        // gate[g, j] = Wb + Rb + x . W[g, j] (+ h . R[g, j], except GRU's h gate).
        for (int64_t g = 0; g < G; ++g) {
          for (int64_t j = 0; j < H; ++j) {
            const int64_t row = g * H + j;
            float s = b.empty() ? 0.f : b[d * 2 * G * H + row] + b[d * 2 * G * H + G * H + row];
            for (int64_t i = 0; i < I; ++i) s += xt[i] * w[(d * G * H + row) * I + i];
            if (!(kind == RnnKind::kGru && g == 2)) {
              for (int64_t q = 0; q < H; ++q) s += h[q] * r[(d * G * H + row) * H + q];
            }
            gate[row] = s;
          }
        }
        if (kind == RnnKind::kGru) {  // the reset gate of every unit, before any h gate reads it
          for (int64_t q = 0; q < H; ++q) rh[q] = ApplyRnnActivation(a[0], clip(gate[H + q]));
        }
        for (int64_t j = 0; j < H; ++j) {
          if (kind == RnnKind::kRnn) {
            hn[j] = ApplyRnnActivation(a[0], clip(gate[j]));
          } else if (kind == RnnKind::kGru) {
            const float z = ApplyRnnActivation(a[0], clip(gate[j]));
            // The h gate: GRU's reset (r . h, elementwise) applies before (or,
            // linear_before_reset, after) the product with R; Rb_h is inside that product.
            const int64_t row = 2 * H + j;
            const float rb = b.empty() ? 0.f : b[d * 2 * G * H + G * H + row];
            float s = gate[row] - rb;  // the biases and x's terms, without Rb_h
            float hr = 0.f;
            for (int64_t q = 0; q < H; ++q) {
              hr += (p.linear_before_reset ? h[q] : rh[q] * h[q]) * r[(d * G * H + row) * H + q];
            }
            s += p.linear_before_reset ? rh[j] * (hr + rb) : hr + rb;
            const float hh = ApplyRnnActivation(a[1], clip(s));
            hn[j] = (1.f - z) * hh + z * h[j];
          } else {
            const float* peep = pp.empty() ? nullptr : pp.data() + d * 3 * H;
            const float ig = ApplyRnnActivation(a[0], clip(gate[j] + (peep ? peep[j] * c[j] : 0.f)));
            const float fg = p.input_forget ? 1.f - ig
                                            : ApplyRnnActivation(a[0], clip(gate[2 * H + j] + (peep ? peep[2 * H + j] * c[j] : 0.f)));
            const float cc = ApplyRnnActivation(a[1], clip(gate[3 * H + j]));
            cn[j] = fg * c[j] + ig * cc;
            const float og = ApplyRnnActivation(a[0], clip(gate[H + j] + (peep ? peep[H + j] * cn[j] : 0.f)));
            hn[j] = og * ApplyRnnActivation(a[2], cn[j]);
          }
        }
        h = hn;
        if (kind == RnnKind::kLstm) c = cn;
        std::copy(h.begin(), h.end(), y.begin() + y_at(t, d, bi));
      }
      std::copy(h.begin(), h.end(), yh.begin() + state_at(d, bi));
      std::copy(c.begin(), c.end(), yc.begin() + state_at(d, bi));
    }
  }
  const std::vector<float>* results[] = {&y, &yh, &yc};
  for (size_t o = 0; o < out.size() && o < 3; ++o) {
    out[o] = Tensor::FromFloat(out[o].dtype(), out[o].shape(), *results[o]);
  }
  return absl::OkStatus();
}

}  // namespace kiln::ops

KILN_OP_FILE(recurrent) {
  struct Kind {
    const char* name;
    int max_inputs, max_outputs;
  };
  static constexpr Kind kKinds[] = {{"RNN", 6, 2}, {"GRU", 6, 2}, {"LSTM", 8, 3}};
  static constexpr InferFn kInfer[] = {[](Node& n) { return ops::InferRnn(n, ops::RnnKind::kRnn); },
                                       [](Node& n) { return ops::InferRnn(n, ops::RnnKind::kGru); },
                                       [](Node& n) { return ops::InferRnn(n, ops::RnnKind::kLstm); }};
  static constexpr EvalFn kEval[] = {
      [](const Node& n, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
        return ops::EvalRnn(n, ops::RnnKind::kRnn, in, out);
      },
      [](const Node& n, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
        return ops::EvalRnn(n, ops::RnnKind::kGru, in, out);
      },
      [](const Node& n, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
        return ops::EvalRnn(n, ops::RnnKind::kLstm, in, out);
      }};
  for (int k = 0; k < 3; ++k) {
    registry.Register({.name = kKinds[k].name, .min_inputs = 3, .max_inputs = kKinds[k].max_inputs,
                       .min_outputs = 0, .max_outputs = kKinds[k].max_outputs, .infer = kInfer[k],
                       .eval = kEval[k]});
  }
}
