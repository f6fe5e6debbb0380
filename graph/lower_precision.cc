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
#include "graph/verifier.h"

namespace kiln {
namespace {

// ONNX TensorProto.DataType numbers.
constexpr int64_t kOnnxFloat = 1;
constexpr int64_t kOnnxFloat16 = 10;
constexpr int64_t kOnnxBFloat16 = 16;

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
  const DType s = storage_;
  const std::string suffix = absl::StrCat("_", DTypeName(s));
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
  if (!any_f32) return false;

  auto island = [&](const Node* n) { return float32_nodes_.contains(n->name()); };
  auto kept_use = [&](const Use& u) { return KeepsFloat32(u.node->op_type(), u.index) || island(u.node); };
  auto has_kept_use = [&](const Value* v) {
    for (const Use& u : v->uses()) {
      if (kept_use(u)) return true;
    }
    return false;
  };
  auto has_other_use = [&](const Value* v) {
    for (const Use& u : v->uses()) {
      if (!kept_use(u)) return true;
    }
    return false;
  };

  // For each f32 value: the value storage-typed readers use (lowered) and the one
  // kept-f32 readers and the graph outputs use (f32). Either may be absent when
  // nothing needs it.
  absl::flat_hash_map<const Value*, Value*> lowered, full;
  absl::flat_hash_set<const Value*> allowed_f32;  // f32 values the result may keep
  // Cast nodes to insert after the producer of a value (or at the start for inputs):
  // (source, destination, onnx dtype).
  struct CastToInsert {
    Value* from;
    Value* to;
    int64_t onnx_to;
  };
  std::vector<CastToInsert> input_casts;

  for (Value* x : graph.inputs()) {
    if (!IsF32(x)) continue;
    full[x] = x;
    allowed_f32.insert(x);
    if (has_other_use(x)) lowered[x] = graph.AddValue(x->name() + suffix);
  }
  for (Value* c : graph.constants()) {
    if (!IsF32(c)) continue;
    const bool keep = has_kept_use(c) || graph.IsGraphOutput(c);
    if (!has_other_use(c)) {
      full[c] = c;
      allowed_f32.insert(c);
    } else if (keep) {
      full[c] = c;
      allowed_f32.insert(c);
      lowered[c] = graph.AddConstant(c->name() + suffix, Convert(c->constant(), s));
    } else {
      graph.SetConstant(c, Convert(c->constant(), s));
      lowered[c] = c;
    }
  }
  // Nodes whose dtype attribute stays FLOAT: every reader keeps f32.
  absl::flat_hash_set<const Node*> keep_node;
  for (const Node* n : nodes) {
    if (!IsFloatTypedByAttribute(*n)) continue;
    const Value* y = n->output(0);
    if ((!y->uses().empty() || graph.IsGraphOutput(y)) && !has_other_use(y)) keep_node.insert(n);
  }
  for (const Node* n : nodes) {
    for (Value* y : n->outputs()) {
      if (!IsF32(y)) continue;
      if (island(n)) {  // written in f32; lowered readers get a Cast(to = S)
        full[y] = y;
        allowed_f32.insert(y);
        if (has_other_use(y)) lowered[y] = graph.AddValue(y->name() + suffix);
        continue;
      }
      if (keep_node.contains(n)) {
        full[y] = y;
        allowed_f32.insert(y);
        continue;
      }
      if (graph.IsGraphOutput(y)) {
        lowered[y] = graph.AddValue(y->name() + suffix);
        full[y] = y;
        allowed_f32.insert(y);
      } else {
        lowered[y] = y;
        if (has_kept_use(y)) {
          full[y] = graph.AddValue(y->name() + "_f32");
          allowed_f32.insert(full[y]);
        }
      }
    }
  }

  // Rebuild the node list in order, with the new wiring and the Casts.
  std::vector<SavedNode> saved;
  saved.reserve(nodes.size());
  for (const Node* n : nodes) {
    saved.push_back({n, n->op_type(), n->domain(), n->name(), n->attributes(), n->inputs(), n->outputs(),
                     n->outputs(), keep_node.contains(n)});
    SavedNode& sn = saved.back();
    sn.island = island(n);
    if (!keep_node.contains(n) && !sn.island &&
        (IsFloatTypedByAttribute(*n) ||
         (n->op_type() == "LayerNormalization" && n->num_outputs() > 1 && n->GetInt("stash_type", 1).ok() &&
          *n->GetInt("stash_type", 1) == kOnnxFloat))) {
      RewriteAttributes(*n, s, sn.attrs);
    }
  }
  // Which inputs read which value: decided while the old use lists still exist.
  for (SavedNode& sn : saved) {
    for (size_t i = 0; i < sn.inputs.size(); ++i) {
      Value* v = sn.inputs[i];
      if (!IsF32(v)) continue;
      const bool keep = sn.island || KeepsFloat32(sn.op_type, static_cast<int>(i));
      auto& table = keep ? full : lowered;
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
      auto it = lowered.find(y);
      if (it != lowered.end()) y = it->second;
    }
  }
  for (Node* n : nodes) graph.RemoveNode(n);

  auto add_cast = [&](Value* from, Value* to, int64_t onnx_to) {
    Node* cast = graph.AddNode("Cast", {from}, {to}, to->name());
    cast->SetAttr("to", Attribute(onnx_to));
  };
  for (Value* x : graph.inputs()) {
    if (!IsF32(x)) continue;
    if (auto it = lowered.find(x); it != lowered.end()) add_cast(x, it->second, OnnxCode(s));
  }
  for (const SavedNode& sn : saved) {
    Node* n = graph.AddNode(sn.op_type, sn.inputs, sn.outputs, sn.name);
    n->set_domain(sn.domain);
    for (const auto& [name, attr] : sn.attrs) n->SetAttr(name, attr);
    for (Value* y : sn.original_outputs) {
      if (sn.island && IsF32(y)) {
        if (auto lo = lowered.find(y); lo != lowered.end()) add_cast(y, lo->second, OnnxCode(s));
        continue;
      }
      if (!IsF32(y) || sn.kept_f32) continue;
      auto lo = lowered.find(y);
      auto fu = full.find(y);
      if (lo == lowered.end() || fu == full.end() || fu->second == nullptr) continue;
      add_cast(lo->second, fu->second, kOnnxFloat);
    }
  }

  InferShapesOptions infer_options;
  infer_options.fold_constants = false;
  if (absl::Status st = InferShapes(graph, infer_options); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("lower-precision: type inference of the lowered graph failed: ",
                                                st.message()));
  }
  // The contract: no f32 left inside.
  for (const Node* n : graph.nodes()) {
    for (const Value* y : n->outputs()) {
      if (IsF32(y) && !allowed_f32.contains(y)) {
        return absl::InternalError(absl::StrCat("lower-precision: ", n->Describe(), " still writes f32 value '",
                                                y->name(), "' after lowering to ", DTypeName(s)));
      }
    }
  }
  VerifyOptions verify;
  verify.require_types = true;
  if (absl::Status st = VerifyGraph(graph, verify); !st.ok()) {
    return absl::InternalError(absl::StrCat("lower-precision: the lowered graph is malformed: ", st.message()));
  }
  return true;
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
