// ToChannelsLast: 2-D convs and pools run NHWC; the layout changes only at the region's boundary.
#include "graph/to_channels_last.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/eliminate_dead_code.h"
#include "graph/op_registry.h"
#include "graph/ops/data_movement.h"

namespace kiln {
namespace {

const std::vector<int64_t> kToNhwc = {0, 2, 3, 1};
const std::vector<int64_t> kToNchw = {0, 3, 1, 2};
// Where NCHW axis a sits in NHWC: N 0, C 3, H 1, W 2.
constexpr int64_t kNhwcAxis[4] = {0, 3, 1, 2};

bool IsTranspose(const Node& n, const std::vector<int64_t>& perm) {
  if (n.op_type() != "Transpose" || !n.domain().empty() || !n.has_input(0) || !n.input(0)->has_type() ||
      n.input(0)->rank() != 4) {
    return false;
  }
  absl::StatusOr<std::vector<int64_t>> p = n.GetInts("perm");
  return p.ok() && *p == perm;
}

// Conv and the pools that have a channels_last form, on a 4-D input.
bool IsSeed(const Node& n) {
  const std::string& op = n.op_type();
  if (op != "Conv" && op != "MaxPool" && op != "AveragePool" && op != "GlobalAveragePool") return false;
  if (!n.domain().empty() || n.num_outputs() != 1 || !n.has_input(0) || !n.input(0)->has_type() ||
      n.input(0)->rank() != 4 || !n.output(0)->has_type()) {
    return false;
  }
  if (n.GetInt("channels_last", 0).value_or(1) != 0) return false;
  if (op == "Conv" && (!n.has_input(1) || !n.input(1)->has_type() || n.input(1)->rank() != 4)) return false;
  return true;
}

Shape ToNhwcShape(const Shape& s) { return {s[0], s[2], s[3], s[1]}; }

class Rewriter {
 public:
  explicit Rewriter(Graph& graph) : g_(graph) {}

  absl::StatusOr<bool> Run() {
    KILN_RETURN_IF_ERROR(g_.TopologicalSort());
    bool changed = false;
    for (Node* n : g_.nodes()) {
      KILN_ASSIGN_OR_RETURN(bool c, Visit(n));
      changed |= c;
    }
    if (!changed) return false;
    // Readers outside the region get the NCHW value back, under its own name.
    for (Value* y : moved_) {
      if (y->uses().empty() && !g_.IsGraphOutput(y)) continue;
      KILN_RETURN_IF_ERROR(AddTranspose(twin_.at(y), y, kToNchw, absl::StrCat(y->name(), "/to_nchw")).status());
    }
    KILN_RETURN_IF_ERROR(EliminateDeadCode().Run(g_).status());
    g_.RemoveUnusedValues();
    KILN_RETURN_IF_ERROR(g_.TopologicalSort());
    return true;
  }

 private:
  // The NHWC twin of a rank-4 value when it already exists: made by this pass, or
  // the input of a Transpose [0,3,1,2] that produced the value.
  Value* Twin(Value* v) const {
    if (v == nullptr) return nullptr;
    auto it = twin_.find(v);
    if (it != twin_.end()) return it->second;
    if (v->producer() != nullptr && IsTranspose(*v->producer(), kToNchw)) return v->producer()->input(0);
    return nullptr;
  }

  absl::StatusOr<Value*> AddTranspose(Value* in, Value* out, const std::vector<int64_t>& perm,
                                      const std::string& node_name) {
    Node* t = g_.AddNode("Transpose", {in}, {out}, node_name);
    t->SetAttr("perm", perm);
    KILN_RETURN_IF_ERROR(InferNode(*t));
    return out;
  }

  // The NHWC form of rank-4 value v: its twin, a permuted constant, or a Transpose.
  absl::StatusOr<Value*> ToNhwc(Value* v) {
    if (Value* t = Twin(v)) return t;
    Value* t;
    if (v->is_constant()) {
      t = g_.AddConstant(absl::StrCat(v->name(), "/nhwc"), ops::PermuteAxes(v->constant(), kToNhwc));
    } else {
      t = g_.AddValue(absl::StrCat(v->name(), "/nhwc"));
      KILN_RETURN_IF_ERROR(AddTranspose(v, t, kToNhwc, absl::StrCat(v->name(), "/to_nhwc")).status());
    }
    twin_[v] = t;
    return t;
  }

  // A constant of rank < 4 broadcast against NCHW values, permuted as if padded to
  // rank 4 ([C,1,1] -> [1,1,1,C]), then with leading unit dims dropped ([C]).
  Value* LowRankConstantToNhwc(Value* v) {
    auto it = twin_.find(v);
    if (it != twin_.end()) return it->second;
    Shape padded(4 - v->rank(), 1);
    padded.insert(padded.end(), v->shape().begin(), v->shape().end());
    const Tensor p = ops::PermuteAxes(v->constant().Reshaped(padded), kToNhwc);
    Shape s = p.shape();
    while (s.size() > 1 && s[0] == 1) s.erase(s.begin());
    Value* t = g_.AddConstant(absl::StrCat(v->name(), "/nhwc"), p.Reshaped(s));
    twin_[v] = t;
    return t;
  }

  // Replaces `old` by the same op on `inputs` with `attrs` set, writing NHWC twins of
  // its outputs; the old outputs are restored from the twins at the end if read.
  absl::Status Replace(Node* old, const std::vector<Value*>& inputs,
                       const std::vector<std::pair<std::string, Attribute>>& attrs) {
    const std::string op = old->op_type(), name = old->name();
    const auto old_attrs = old->attributes();
    const std::vector<Value*> outs = old->outputs();
    std::vector<Shape> want;
    std::vector<Value*> twins;
    for (Value* y : outs) {
      want.push_back(ToNhwcShape(y->shape()));
      twins.push_back(g_.AddValue(absl::StrCat(y->name(), "/nhwc")));
    }
    g_.RemoveNode(old);
    Node* n = g_.AddNode(op, inputs, twins, name);
    for (const auto& [k, v] : old_attrs) n->SetAttr(k, v);
    for (const auto& [k, v] : attrs) n->SetAttr(k, v);
    KILN_RETURN_IF_ERROR(InferNode(*n));
    for (size_t i = 0; i < outs.size(); ++i) {
      if (twins[i]->shape() != want[i]) {
        return absl::InternalError(absl::StrCat("to-channels-last: ", n->Describe(), " gives ",
                                                twins[i]->TypeString(), ", expected ", ShapeToString(want[i])));
      }
      twin_[outs[i]] = twins[i];
      moved_.push_back(outs[i]);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<bool> Visit(Node* n) {
    const std::string& op = n->op_type();
    if (!n->domain().empty()) return false;
    if (IsSeed(*n)) return Seed(n);
    if (n->num_outputs() != 1 || !n->output(0)->has_type()) return false;
    const OpDef* def = OpRegistry::Global().Find(op);
    if (def != nullptr && def->is_elementwise && n->output(0)->rank() == 4) return Elementwise(n);
    if (op == "Concat" && n->output(0)->rank() == 4) return Concat(n);
    if (op == "BatchNormalization") return BatchNorm(n);
    if (op == "Flatten" || op == "Reshape" || op == "Squeeze") return View(n);
    if (IsTranspose(*n, kToNhwc) && Twin(n->input(0)) != nullptr && !g_.IsGraphOutput(n->output(0))) {
      Value* twin = Twin(n->input(0));
      Value* out = n->output(0);
      g_.RemoveNode(n);
      g_.ReplaceAllUsesWith(out, twin);
      return true;
    }
    return false;
  }

  absl::StatusOr<bool> Seed(Node* n) {
    std::vector<Value*> inputs = n->inputs();
    KILN_ASSIGN_OR_RETURN(inputs[0], ToNhwc(inputs[0]));
    if (n->op_type() == "Conv") {
      KILN_ASSIGN_OR_RETURN(inputs[1], ToNhwc(inputs[1]));  // [OC, C/g, KH, KW] -> [OC, KH, KW, C/g]
    }
    KILN_RETURN_IF_ERROR(Replace(n, inputs, {{"channels_last", Attribute(int64_t{1})}}));
    return true;
  }

  absl::StatusOr<bool> Elementwise(Node* n) {
    bool any_twin = false;
    for (Value* in : n->inputs()) {
      if (in == nullptr) continue;
      if (in->rank() == 4) {
        any_twin |= Twin(in) != nullptr;
      } else if (in->numel() != 1 && (!in->is_constant() || in->rank() > 4)) {
        return false;  // a computed operand of lower rank: its broadcast would need a Reshape
      }
    }
    if (!any_twin) return false;
    std::vector<Value*> inputs = n->inputs();
    for (Value*& in : inputs) {
      if (in == nullptr) continue;
      if (in->rank() == 4) {
        KILN_ASSIGN_OR_RETURN(in, ToNhwc(in));
      } else if (in->numel() != 1) {
        in = LowRankConstantToNhwc(in);
      }
    }
    KILN_RETURN_IF_ERROR(Replace(n, inputs, {}));
    return true;
  }

  absl::StatusOr<bool> Concat(Node* n) {
    bool any_twin = false;
    for (Value* in : n->inputs()) {
      if (in == nullptr || in->rank() != 4) return false;
      any_twin |= Twin(in) != nullptr;
    }
    if (!any_twin) return false;
    KILN_ASSIGN_OR_RETURN(int64_t axis, n->GetInt("axis"));
    if (axis < -4 || axis > 3) return false;  // inference reports it
    std::vector<Value*> inputs = n->inputs();
    for (Value*& in : inputs) {
      KILN_ASSIGN_OR_RETURN(in, ToNhwc(in));
    }
    KILN_RETURN_IF_ERROR(Replace(n, inputs, {{"axis", Attribute(kNhwcAxis[axis < 0 ? axis + 4 : axis])}}));
    return true;
  }

  // Inference BatchNormalization with constant parameters on an NHWC value:
  // y = x * s + t with s = scale / sqrt(var + eps), t = B - mean * s, both [C].
  absl::StatusOr<bool> BatchNorm(Node* n) {
    if (n->num_inputs() != 5 || n->output(0)->rank() != 4 || Twin(n->input(0)) == nullptr) return false;
    if (n->GetInt("training_mode", 0).value_or(1) != 0) return false;
    const int64_t c = n->input(0)->shape()[1];
    for (int i = 1; i < 5; ++i) {
      if (!n->has_input(i) || !n->input(i)->is_constant() || n->input(i)->numel() != c) return false;
    }
    KILN_ASSIGN_OR_RETURN(float eps, n->GetFloat("epsilon", 1e-5f));
    const std::vector<float> scale = n->input(1)->constant().ToFloat(), bias = n->input(2)->constant().ToFloat();
    const std::vector<float> mean = n->input(3)->constant().ToFloat(), var = n->input(4)->constant().ToFloat();
    std::vector<float> s(c), t(c);
    for (int64_t i = 0; i < c; ++i) {
      s[i] = scale[i] / std::sqrt(var[i] + eps);
      t[i] = bias[i] - mean[i] * s[i];
    }
    Value* x = Twin(n->input(0));
    Value* y = n->output(0);
    const DType dtype = y->dtype();
    const std::string name = n->name();
    g_.RemoveNode(n);
    Value* sv = g_.AddConstant(absl::StrCat(name, "/scale"), Tensor::FromFloat(dtype, {c}, s));
    Value* tv = g_.AddConstant(absl::StrCat(name, "/shift"), Tensor::FromFloat(dtype, {c}, t));
    Value* m = g_.AddValue(absl::StrCat(y->name(), "/scaled"));
    Node* mul = g_.AddNode("Mul", {x, sv}, {m}, absl::StrCat(name, "/mul"));
    KILN_RETURN_IF_ERROR(InferNode(*mul));
    Value* twin = g_.AddValue(absl::StrCat(y->name(), "/nhwc"));
    Node* add = g_.AddNode("Add", {m, tv}, {twin}, absl::StrCat(name, "/add"));
    KILN_RETURN_IF_ERROR(InferNode(*add));
    twin_[y] = twin;
    moved_.push_back(y);
    return true;
  }

  // A view of an NCHW value with unit spatial dims reads the NHWC twin (same bytes)
  // when the output type comes out unchanged.
  absl::StatusOr<bool> View(Node* n) {
    Value* x = n->input(0);
    Value* twin = Twin(x);
    if (twin == nullptr || x->rank() != 4 || x->shape()[2] != 1 || x->shape()[3] != 1) return false;
    const Shape shape = n->output(0)->shape();
    const DType dtype = n->output(0)->dtype();
    n->SetInput(0, twin);
    if (InferNode(*n).ok() && n->output(0)->shape() == shape && n->output(0)->dtype() == dtype) return true;
    n->SetInput(0, x);
    KILN_RETURN_IF_ERROR(InferNode(*n));
    return false;
  }

  Graph& g_;
  absl::flat_hash_map<Value*, Value*> twin_;  // NCHW value (or low-rank constant) -> NHWC form
  std::vector<Value*> moved_;                 // old outputs of replaced nodes
};

}  // namespace

absl::StatusOr<bool> ToChannelsLast::Run(Graph& graph) { return Rewriter(graph).Run(); }

bool HasConv2D(const Graph& graph) {
  for (const Node* n : graph.nodes()) {
    if (n->op_type() == "Conv" && n->domain().empty() && n->has_input(0) && n->input(0)->has_type() &&
        n->input(0)->rank() == 4) {
      return true;
    }
  }
  return false;
}

}  // namespace kiln
