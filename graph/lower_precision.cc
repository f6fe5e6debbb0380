// Precision lowering: f32 storage -> f16/bf16, f32 at the boundary.
#include "graph/lower_precision.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/infer_shapes.h"
#include "graph/op_registry.h"
#include "graph/verifier.h"

namespace kiln {
namespace {

// ONNX TensorProto.DataType numbers.
constexpr int64_t kOnnxFloat = 1;
constexpr int64_t kOnnxFloat16 = 10;
constexpr int64_t kOnnxBFloat16 = 16;
constexpr int64_t kOnnxDouble = 11;

int64_t OnnxCode(DType dtype) { return dtype == DType::kFloat16 ? kOnnxFloat16 : kOnnxBFloat16; }

Tensor Convert(const Tensor& t, DType to) { return Tensor::FromFloat(to, t.shape(), t.ToFloat()); }

bool IsF32(const Value* v) { return v != nullptr && v->dtype() == DType::kFloat32; }

// Nodes whose (first) output dtype comes from an attribute that says FLOAT.
bool IsFloatTypedByAttribute(const Node& node) {
  const std::string& op = node.op_type();
  if (!node.domain().empty() && node.domain() != "ai.onnx") return false;
  if (op == "Cast") {
    auto to = node.GetInt("to");
    return to.ok() && *to == kOnnxFloat;
  }
  if (op == "ConstantOfShape") {
    if (!node.has_attr("value")) return true;
    auto value = node.GetTensor("value");
    return value.ok() && value->dtype() == DType::kFloat32;
  }
  if (op == "Constant") {
    if (node.has_attr("value_float") || node.has_attr("value_floats")) return true;
    if (!node.has_attr("value")) return false;
    auto value = node.GetTensor("value");
    return value.ok() && value->dtype() == DType::kFloat32;
  }
  return false;
}

// Rewrites FLOAT in the dtype-giving attributes of `attrs` (a copy of node's) to `s`.
void RewriteAttributes(const Node& node, DType s, std::map<std::string, Attribute>& attrs) {
  const std::string& op = node.op_type();
  if (op == "Cast") {
    attrs["to"] = Attribute(OnnxCode(s));
  } else if (op == "ConstantOfShape") {
    auto it = attrs.find("value");
    attrs["value"] = it == attrs.end() ? Attribute(Tensor(s, {1})) : Attribute(Convert(it->second.t(), s));
  } else if (op == "Constant") {
    if (auto it = attrs.find("value_float"); it != attrs.end()) {
      const float v = it->second.f();
      attrs.erase(it);
      attrs["value"] = Attribute(Tensor::FromFloat(s, {}, {v}));
    } else if (auto it2 = attrs.find("value_floats"); it2 != attrs.end()) {
      const std::vector<float> v = it2->second.floats();
      attrs.erase(it2);
      attrs["value"] = Attribute(Tensor::FromFloat(s, {static_cast<int64_t>(v.size())}, v));
    } else {
      attrs["value"] = Attribute(Convert(attrs.at("value").t(), s));
    }
  } else if (op == "LayerNormalization") {
    attrs["stash_type"] = Attribute(OnnxCode(s));
  }
}

// A node's contents, kept while the node list is rebuilt (`original` dangles then).
struct SavedNode {
  const Node* original;
  std::string op_type, domain, name;
  std::map<std::string, Attribute> attrs;
  std::vector<Value*> inputs, outputs;
  std::vector<Value*> original_outputs;
  bool kept_f32 = false;  // a dtype-attribute node left in FLOAT
  bool island = false;    // a node kept in f32 (float32_nodes)
};

// Whether the graph has an f32 value; FailedPrecondition when a value is untyped.
absl::StatusOr<bool> HasFloat32(const Graph& graph) {
  const std::vector<Node*> nodes = graph.nodes();
  // Every value the graph refers to must be typed; find the f32 ones.
  std::vector<Value*> referenced(graph.inputs().begin(), graph.inputs().end());
  for (Value* c : graph.constants()) referenced.push_back(c);
  for (const Node* n : nodes) {
    for (Value* v : n->inputs()) {
      if (v) referenced.push_back(v);
    }
    for (Value* v : n->outputs()) referenced.push_back(v);
  }
  for (Value* v : graph.outputs()) referenced.push_back(v);
  bool any_f32 = false;
  for (const Value* v : referenced) {
    if (!v->has_type()) {
      return absl::FailedPreconditionError(
          absl::StrCat("lower-precision: value '", v->name(), "' has no type (run shape inference first)"));
    }
    any_f32 |= IsF32(v);
  }
  return any_f32;
}

// One lowering of a graph to storage dtype `s`: which form (lowered, f32) each f32
// value takes for which readers, the node list rebuilt with that wiring and the
// Casts between the forms, and the checks of the result.
class Lowering {
 public:
  Lowering(Graph& graph, DType s, const absl::flat_hash_set<std::string>& islands)
      : graph_(graph), s_(s), suffix_(absl::StrCat("_", DTypeName(s))), islands_(islands), nodes_(graph.nodes()) {}

  // For each f32 value: the value storage-typed readers use (lowered) and the one
  // kept-f32 readers and the graph outputs use (f32). Either may be absent when
  // nothing needs it.
  void PlanForms() {
    for (Value* x : graph_.inputs()) {
      if (!IsF32(x)) continue;
      full_[x] = x;
      allowed_f32_.insert(x);
      if (HasOtherUse(x)) lowered_[x] = graph_.AddValue(x->name() + suffix_);
    }
    for (Value* c : graph_.constants()) {
      if (!IsF32(c)) continue;
      const bool keep = HasKeptUse(c) || graph_.IsGraphOutput(c);
      if (!HasOtherUse(c)) {
        full_[c] = c;
        allowed_f32_.insert(c);
      } else if (keep) {
        full_[c] = c;
        allowed_f32_.insert(c);
        lowered_[c] = graph_.AddConstant(c->name() + suffix_, Convert(c->constant(), s_));
      } else {
        graph_.SetConstant(c, Convert(c->constant(), s_));
        lowered_[c] = c;
      }
    }
    // Nodes whose dtype attribute stays FLOAT: every reader keeps f32.
    for (const Node* n : nodes_) {
      if (!IsFloatTypedByAttribute(*n)) continue;
      const Value* y = n->output(0);
      if ((!y->uses().empty() || graph_.IsGraphOutput(y)) && !HasOtherUse(y)) keep_node_.insert(n);
    }
    for (const Node* n : nodes_) {
      for (Value* y : n->outputs()) {
        if (!IsF32(y)) continue;
        if (Island(n)) {  // written in f32; lowered readers get a Cast(to = S)
          full_[y] = y;
          allowed_f32_.insert(y);
          if (HasOtherUse(y)) lowered_[y] = graph_.AddValue(y->name() + suffix_);
          continue;
        }
        if (keep_node_.contains(n)) {
          full_[y] = y;
          allowed_f32_.insert(y);
          continue;
        }
        if (graph_.IsGraphOutput(y)) {
          lowered_[y] = graph_.AddValue(y->name() + suffix_);
          full_[y] = y;
          allowed_f32_.insert(y);
        } else {
          lowered_[y] = y;
          if (HasKeptUse(y)) {
            full_[y] = graph_.AddValue(y->name() + "_f32");
            allowed_f32_.insert(full_[y]);
          }
        }
      }
    }
  }

  // Saves every node with its new wiring (decided while the old use lists exist).
  absl::Status Rewire() {
    saved_.reserve(nodes_.size());
    for (const Node* n : nodes_) {
      saved_.push_back({n, n->op_type(), n->domain(), n->name(), n->attributes(), n->inputs(), n->outputs(),
                       n->outputs(), keep_node_.contains(n)});
      SavedNode& sn = saved_.back();
      sn.island = Island(n);
      if (!keep_node_.contains(n) && !sn.island &&
          (IsFloatTypedByAttribute(*n) ||
           (n->op_type() == "LayerNormalization" && n->num_outputs() > 1 && n->GetInt("stash_type", 1).ok() &&
            *n->GetInt("stash_type", 1) == kOnnxFloat))) {
        RewriteAttributes(*n, s_, sn.attrs);
      }
    }
    // Which inputs read which value: decided while the old use lists still exist.
    for (SavedNode& sn : saved_) {
      for (size_t i = 0; i < sn.inputs.size(); ++i) {
        Value* v = sn.inputs[i];
        if (!IsF32(v)) continue;
        const bool keep = sn.island || LowerPrecision::KeepsFloat32(sn.op_type, static_cast<int>(i));
        auto& table = keep ? full_ : lowered_;
        auto it = table.find(v);
        if (it == table.end() || it->second == nullptr) {
          return absl::InternalError(absl::StrCat("lower-precision: no ", keep ? "f32" : "lowered",
                                                  " form of value '", v->name(), "' for ",
                                                  sn.original->Describe()));
        }
        sn.inputs[i] = it->second;
      }
      for (Value*& y : sn.outputs) {
        if (!IsF32(y) || sn.island) continue;
        auto it = lowered_.find(y);
        if (it != lowered_.end()) y = it->second;
      }
    }
    return absl::OkStatus();
  }

  // Rebuilds the node list in order, with the Casts.
  void Rebuild() {
    for (Node* n : nodes_) graph_.RemoveNode(n);

    auto add_cast = [&](Value* from, Value* to, int64_t onnx_to) {
      Node* cast = graph_.AddNode("Cast", {from}, {to}, to->name());
      cast->SetAttr("to", Attribute(onnx_to));
    };
    for (Value* x : graph_.inputs()) {
      if (!IsF32(x)) continue;
      if (auto it = lowered_.find(x); it != lowered_.end()) add_cast(x, it->second, OnnxCode(s_));
    }
    for (const SavedNode& sn : saved_) {
      Node* n = graph_.AddNode(sn.op_type, sn.inputs, sn.outputs, sn.name);
      n->set_domain(sn.domain);
      for (const auto& [name, attr] : sn.attrs) n->SetAttr(name, attr);
      for (Value* y : sn.original_outputs) {
        if (sn.island && IsF32(y)) {
          if (auto lo = lowered_.find(y); lo != lowered_.end()) add_cast(y, lo->second, OnnxCode(s_));
          continue;
        }
        if (!IsF32(y) || sn.kept_f32) continue;
        auto lo = lowered_.find(y);
        auto fu = full_.find(y);
        if (lo == lowered_.end() || fu == full_.end() || fu->second == nullptr) continue;
        add_cast(lo->second, fu->second, kOnnxFloat);
      }
    }
  }

  // Types the result and checks the contract: no f32 left inside.
  absl::Status Check() {
    InferShapesOptions infer_options;
    infer_options.fold_constants = false;
    if (absl::Status st = InferShapes(graph_, infer_options); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat("lower-precision: type inference of the lowered graph failed: ",
                                                  st.message()));
    }
    // The contract: no f32 left inside.
    for (const Node* n : graph_.nodes()) {
      for (const Value* y : n->outputs()) {
        if (IsF32(y) && !allowed_f32_.contains(y)) {
          return absl::InternalError(absl::StrCat("lower-precision: ", n->Describe(), " still writes f32 value '",
                                                  y->name(), "' after lowering to ", DTypeName(s_)));
        }
      }
    }
    VerifyOptions verify;
    verify.require_types = true;
    if (absl::Status st = VerifyGraph(graph_, verify); !st.ok()) {
      return absl::InternalError(absl::StrCat("lower-precision: the lowered graph is malformed: ", st.message()));
    }
    return absl::OkStatus();
  }

 private:
  bool Island(const Node* n) const { return islands_.contains(n->name()); }
  bool KeptUse(const Use& u) const {
    return LowerPrecision::KeepsFloat32(u.node->op_type(), u.index) || Island(u.node);
  }
  bool HasKeptUse(const Value* v) const {
    for (const Use& u : v->uses()) {
      if (KeptUse(u)) return true;
    }
    return false;
  }
  bool HasOtherUse(const Value* v) const {
    for (const Use& u : v->uses()) {
      if (!KeptUse(u)) return true;
    }
    return false;
  }

  Graph& graph_;
  const DType s_;
  const std::string suffix_;
  const absl::flat_hash_set<std::string>& islands_;
  const std::vector<Node*> nodes_;
  absl::flat_hash_map<const Value*, Value*> lowered_, full_;
  absl::flat_hash_set<const Value*> allowed_f32_;  // f32 values the result may keep
  absl::flat_hash_set<const Node*> keep_node_;      // dtype-attribute nodes left FLOAT
  std::vector<SavedNode> saved_;
};

}  // namespace

bool LowerPrecision::KeepsFloat32(absl::string_view op_type, int index) {
  if (op_type == "Resize") return index == 1 || index == 2;
  if (op_type == "Pow") return index == 1;
  if (op_type == "OneHot") return index == 0 || index == 1;
  if (op_type == "Dropout") return index == 1;
  return false;
}

absl::StatusOr<bool> LowerPrecision::Run(Graph& graph) {
  if (storage_ == DType::kFloat32) return false;
  if (storage_ != DType::kFloat16 && storage_ != DType::kBFloat16) {
    return absl::InvalidArgumentError(absl::StrCat("lower-precision: storage dtype must be f16, bf16 or f32, got ",
                                                   DTypeName(storage_)));
  }
  KILN_ASSIGN_OR_RETURN(const bool any_f32, HasFloat32(graph));
  if (!any_f32) return false;
  absl::flat_hash_set<std::string> islands = float32_nodes_;
  for (const std::string& n : IndexArithmeticNodes(graph)) islands.insert(n);
  Lowering lowering(graph, storage_, islands);
  lowering.PlanForms();
  KILN_RETURN_IF_ERROR(lowering.Rewire());
  lowering.Rebuild();
  KILN_RETURN_IF_ERROR(lowering.Check());
  return true;
}

absl::flat_hash_set<std::string> IndexArithmeticNodes(const Graph& graph) {
  absl::flat_hash_set<std::string> out;
  std::vector<const Value*> stack;
  for (const Node* n : graph.nodes()) {
    if (n->op_type() != "Cast" || !n->domain().empty() || n->num_inputs() != 1 || !IsF32(n->input(0))) continue;
    const absl::StatusOr<int64_t> to = n->GetInt("to");
    if (!to.ok() || *to == kOnnxFloat || *to == kOnnxFloat16 || *to == kOnnxBFloat16 || *to == kOnnxDouble) {
      continue;
    }
    stack.push_back(n->input(0));
  }
  while (!stack.empty()) {
    const Value* v = stack.back();
    stack.pop_back();
    const Node* p = v->producer();
    if (p == nullptr || !p->domain().empty() || out.contains(p->name())) continue;
    const OpDef* def = OpRegistry::Global().Find(p->op_type());
    if (p->op_type() != "Cast" && (def == nullptr || !def->is_elementwise)) continue;
    out.insert(p->name());
    for (const Value* in : p->inputs()) {
      if (IsF32(in) && !in->is_constant()) stack.push_back(in);
    }
  }
  return out;
}

absl::StatusOr<absl::flat_hash_set<std::string>> NodesOutsideRange(const Graph& graph, const TensorMap& feeds,
                                                                   float limit) {
  absl::flat_hash_map<const Value*, float> max_abs;
  auto record = [&](const Value* v, const Tensor& t) {
    if (!IsFloating(t.dtype())) return;
    float m = 0;
    for (float x : t.ToFloat()) m = std::max(m, std::isfinite(x) ? std::fabs(x) : INFINITY);
    max_abs[v] = m;
  };
  for (const Value* x : graph.inputs()) {
    if (auto it = feeds.find(x->name()); it != feeds.end()) record(x, it->second);
  }
  for (const Value* c : graph.constants()) record(c, c->constant());
  KILN_RETURN_IF_ERROR(EvaluateGraph(graph, feeds, [&](const Node& node, absl::Span<const Tensor> outputs) {
                         for (int i = 0; i < node.num_outputs() && i < static_cast<int>(outputs.size()); ++i) {
                           record(node.output(i), outputs[i]);
                         }
                       }).status());
  absl::flat_hash_set<std::string> out;
  for (const Node* n : graph.nodes()) {
    bool outside = false;
    for (const Value* v : n->inputs()) {
      if (v == nullptr) continue;
      auto it = max_abs.find(v);
      outside |= it != max_abs.end() && !(it->second <= limit);
    }
    for (const Value* v : n->outputs()) {
      auto it = max_abs.find(v);
      outside |= it != max_abs.end() && !(it->second <= limit);
    }
    if (outside) out.insert(n->name());
  }
  return out;
}

}  // namespace kiln
