// Folding of inference BatchNormalization into Conv weights or a Mul + Add.
#include "graph/fold_batch_norm.h"

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

// Per-channel y = x * s + t of an inference BatchNormalization, or nullopt when the
// node does not qualify (training mode, extra outputs, non-constant parameters).
struct Affine {
  std::vector<double> s, t, mean, beta;
};

std::optional<Affine> ConstantAffine(const Node& bn) {
  if (!bn.domain().empty() || bn.op_type() != "BatchNormalization") return std::nullopt;
  if (bn.num_inputs() != 5 || bn.num_outputs() != 1) return std::nullopt;
  const absl::StatusOr<int64_t> training = bn.GetInt("training_mode", 0);
  if (!training.ok() || *training != 0) return std::nullopt;
  const absl::StatusOr<float> epsilon = bn.GetFloat("epsilon", 1e-5f);
  if (!epsilon.ok()) return std::nullopt;
  const Value* x = bn.input(0);
  if (!x || !x->has_type() || x->rank() < 2 || !IsFloating(x->dtype())) return std::nullopt;
  const int64_t c = x->shape()[1];
  std::vector<float> p[4];
  for (int i = 1; i < 5; ++i) {
    const Value* v = bn.input(i);
    if (!v || !v->is_constant() || v->numel() != c || !IsFloating(v->dtype())) return std::nullopt;
    p[i - 1] = v->constant().ToFloat();
  }
  Affine a;
  a.s.resize(c);
  a.t.resize(c);
  a.mean.resize(c);
  a.beta.resize(c);
  for (int64_t i = 0; i < c; ++i) {
    a.s[i] = static_cast<double>(p[0][i]) / std::sqrt(static_cast<double>(p[3][i]) + *epsilon);
    a.mean[i] = p[2][i];
    a.beta[i] = p[1][i];
    a.t[i] = a.beta[i] - a.mean[i] * a.s[i];
  }
  return a;
}

// The Conv producing `x` when the BN can be folded into it.
Node* FoldableConv(const Graph& graph, const Value* x) {
  Node* conv = x->producer();
  if (conv == nullptr || conv->op_type() != "Conv" || !conv->domain().empty()) return nullptr;
  if (x->uses().size() != 1 || graph.IsGraphOutput(x)) return nullptr;
  const Value* w = conv->input(1);
  if (w == nullptr || !w->is_constant() || w->rank() < 1 || !IsFloating(w->dtype())) return nullptr;
  if (w->shape()[0] != x->shape()[1]) return nullptr;
  if (conv->has_input(2) && !conv->input(2)->is_constant()) return nullptr;
  return conv;
}

void FoldIntoConv(Graph& graph, Node* conv, Node* bn, const Affine& a) {
  Value* w = conv->input(1);
  const int64_t m = w->shape()[0];
  const int64_t per = m == 0 ? 0 : w->numel() / m;
  std::vector<float> wv = w->constant().ToFloat();
  for (int64_t o = 0; o < m; ++o) {
    for (int64_t k = 0; k < per; ++k) wv[o * per + k] = static_cast<float>(wv[o * per + k] * a.s[o]);
  }
  std::vector<float> bias(m, 0.f);
  if (conv->has_input(2)) bias = conv->input(2)->constant().ToFloat();
  for (int64_t o = 0; o < m; ++o) {
    bias[o] = static_cast<float>((bias[o] - a.mean[o]) * a.s[o] + a.beta[o]);
  }
  Value* new_w =
      graph.AddConstant(absl::StrCat(w->name(), "/bn_folded"), Tensor::FromFloat(w->dtype(), w->shape(), wv));
  const std::string bias_name = conv->has_input(2) ? absl::StrCat(conv->input(2)->name(), "/bn_folded")
                                                   : absl::StrCat(conv->name(), "/bias_bn_folded");
  Value* new_b = graph.AddConstant(bias_name, Tensor::FromFloat(w->dtype(), {m}, bias));
  // Rebuild the Conv so that it produces the BN's output value (name and graph
  // output kept) under the Conv's own name.
  const std::string name = conv->name();
  const std::string domain = conv->domain();
  const std::map<std::string, Attribute> attrs = conv->attributes();
  Value* x = conv->input(0);
  Value* y = bn->output(0);
  graph.RemoveNode(bn);
  graph.RemoveNode(conv);
  Node* folded = graph.AddNode("Conv", {x, new_w, new_b}, {y}, name);
  folded->set_domain(domain);
  for (const auto& [key, value] : attrs) folded->SetAttr(key, value);
}

void RewriteAsMulAdd(Graph& graph, Node* bn, const Affine& a) {
  Value* x = bn->input(0);
  Value* y = bn->output(0);
  const int64_t c = x->shape()[1];
  Shape shape(x->rank() - 1, 1);
  shape[0] = c;
  std::vector<float> s(a.s.begin(), a.s.end()), t(a.t.begin(), a.t.end());
  const std::string name = bn->name();
  Value* scale = graph.AddConstant(absl::StrCat(name, "/scale"), Tensor::FromFloat(x->dtype(), shape, s));
  Value* shift = graph.AddConstant(absl::StrCat(name, "/shift"), Tensor::FromFloat(x->dtype(), shape, t));
  Value* scaled = graph.AddValue(absl::StrCat(y->name(), "/scaled"));
  scaled->SetType(x->dtype(), x->shape());
  graph.RemoveNode(bn);
  graph.AddNode("Mul", {x, scale}, {scaled}, name);
  graph.AddNode("Add", {scaled, shift}, {y}, absl::StrCat(name, "/bias"));
}

}  // namespace

absl::StatusOr<bool> FoldBatchNorm::Run(Graph& graph) {
  bool changed = false;
  for (Node* bn : graph.nodes()) {
    const std::optional<Affine> affine = ConstantAffine(*bn);
    if (!affine) continue;
    if (Node* conv = FoldableConv(graph, bn->input(0))) {
      FoldIntoConv(graph, conv, bn, *affine);
    } else {
      RewriteAsMulAdd(graph, bn, *affine);
    }
    changed = true;
  }
  if (changed) KILN_RETURN_IF_ERROR(graph.FinishRewrites());
  return changed;
}

}  // namespace kiln
