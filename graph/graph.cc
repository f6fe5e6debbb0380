// Graph IR: ownership, def-use bookkeeping, typed attribute access, ordering.
#include "graph/graph.h"

#include <algorithm>
#include <deque>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace kiln {

absl::string_view AttrKindName(AttrKind kind) {
  switch (kind) {
    case AttrKind::kInt: return "int";
    case AttrKind::kFloat: return "float";
    case AttrKind::kString: return "string";
    case AttrKind::kInts: return "ints";
    case AttrKind::kFloats: return "floats";
    case AttrKind::kStrings: return "strings";
    case AttrKind::kTensor: return "tensor";
    case AttrKind::kGraph: return "graph";
  }
  return "?";
}

std::string Value::TypeString() const {
  if (!has_type_) return "?";
  return absl::StrCat(DTypeName(dtype_), ShapeToString(shape_));
}

namespace {

bool AllConstant(const std::vector<DimExpr>& dims) {
  for (const DimExpr& d : dims) {
    if (!d.IsConstant()) return false;
  }
  return true;
}

}  // namespace

void Value::SetDims(std::vector<DimExpr> dims) {
  if (AllConstant(dims)) dims.clear();
  dims_ = std::move(dims);
}

void Value::SetSymbolicData(std::vector<DimExpr> data) {
  if (AllConstant(data)) data.clear();
  symbolic_data_ = std::move(data);
}

// ---- Node -------------------------------------------------------------------

void Node::SetInput(int i, Value* value) {
  if (i >= num_inputs()) inputs_.resize(i + 1, nullptr);
  if (Value* old = inputs_[i]) {
    auto& uses = old->uses_;
    for (auto it = uses.begin(); it != uses.end(); ++it) {
      if (it->node == this && it->index == i) {
        uses.erase(it);
        break;
      }
    }
  }
  inputs_[i] = value;
  if (value) value->uses_.push_back({this, i});
}

std::string Node::Describe() const { return absl::StrCat("node '", name_, "' (", op_type_, ")"); }

absl::Status Node::Error(absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(Describe(), ": ", message));
}

absl::Status Node::Unsupported(absl::string_view message) const {
  return absl::UnimplementedError(absl::StrCat(Describe(), ": ", message));
}

absl::StatusOr<const Attribute*> Node::FindAttr(const std::string& name, AttrKind kind) const {
  auto it = attributes_.find(name);
  if (it == attributes_.end()) return nullptr;
  if (it->second.kind() != kind) {
    return Error(absl::StrCat("attribute '", name, "' must be of type ", AttrKindName(kind),
                              ", got ", AttrKindName(it->second.kind())));
  }
  return &it->second;
}

#define KILN_DEFINE_ATTR_GETTERS(Type, Method, Kind, Accessor)                          \
  absl::StatusOr<Type> Node::Method(const std::string& name) const {                    \
    auto attr = FindAttr(name, Kind);                                                    \
    if (!attr.ok()) return attr.status();                                                \
    if (*attr == nullptr) return Error(absl::StrCat("missing required attribute '", name, "'")); \
    return (*attr)->Accessor();                                                          \
  }                                                                                      \
  absl::StatusOr<Type> Node::Method(const std::string& name, Type dflt) const {          \
    auto attr = FindAttr(name, Kind);                                                    \
    if (!attr.ok()) return attr.status();                                                \
    if (*attr == nullptr) return dflt;                                                   \
    return (*attr)->Accessor();                                                          \
  }

KILN_DEFINE_ATTR_GETTERS(int64_t, GetInt, AttrKind::kInt, i)
KILN_DEFINE_ATTR_GETTERS(float, GetFloat, AttrKind::kFloat, f)
KILN_DEFINE_ATTR_GETTERS(std::vector<int64_t>, GetInts, AttrKind::kInts, ints)
KILN_DEFINE_ATTR_GETTERS(std::vector<float>, GetFloats, AttrKind::kFloats, floats)
#undef KILN_DEFINE_ATTR_GETTERS

absl::StatusOr<std::vector<std::string>> Node::GetStrings(const std::string& name) const {
  auto attr = FindAttr(name, AttrKind::kStrings);
  if (!attr.ok()) return attr.status();
  if (*attr == nullptr) return Error(absl::StrCat("missing required attribute '", name, "'"));
  return (*attr)->strings();
}

absl::StatusOr<std::string> Node::GetString(const std::string& name) const {
  auto attr = FindAttr(name, AttrKind::kString);
  if (!attr.ok()) return attr.status();
  if (*attr == nullptr) return Error(absl::StrCat("missing required attribute '", name, "'"));
  return (*attr)->s();
}

absl::StatusOr<std::string> Node::GetString(const std::string& name, const std::string& dflt) const {
  auto attr = FindAttr(name, AttrKind::kString);
  if (!attr.ok()) return attr.status();
  if (*attr == nullptr) return dflt;
  return (*attr)->s();
}

absl::StatusOr<Tensor> Node::GetTensor(const std::string& name) const {
  auto attr = FindAttr(name, AttrKind::kTensor);
  if (!attr.ok()) return attr.status();
  if (*attr == nullptr) return Error(absl::StrCat("missing required attribute '", name, "'"));
  return (*attr)->t();
}

absl::StatusOr<std::shared_ptr<const Graph>> Node::GetGraph(const std::string& name) const {
  auto attr = FindAttr(name, AttrKind::kGraph);
  if (!attr.ok()) return attr.status();
  if (*attr == nullptr) return Error(absl::StrCat("missing required attribute '", name, "'"));
  return (*attr)->g();
}

// ---- Graph ------------------------------------------------------------------

std::string Graph::UniqueValueName(const std::string& name) {
  std::string base = name.empty() ? "v" : name;
  if (!value_by_name_.contains(base)) return base;
  for (int i = 1;; ++i) {
    std::string candidate = absl::StrCat(base, "_", i);
    if (!value_by_name_.contains(candidate)) return candidate;
  }
}

Value* Graph::AddValue(const std::string& name) {
  auto value = std::unique_ptr<Value>(new Value(UniqueValueName(name)));
  Value* raw = value.get();
  value_by_name_[raw->name_] = raw;
  values_.push_back(std::move(value));
  return raw;
}

Value* Graph::AddValue(const std::string& name, DType dtype, Shape shape) {
  Value* v = AddValue(name);
  v->SetType(dtype, std::move(shape));
  return v;
}

Value* Graph::AddConstant(const std::string& name, Tensor data) {
  Value* v = AddValue(name);
  SetConstant(v, std::move(data));
  return v;
}

void Graph::SetConstant(Value* value, Tensor data) {
  value->SetType(data.dtype(), data.shape());
  value->dims_.clear();
  value->symbolic_data_.clear();
  value->constant_ = std::move(data);
}

Value* Graph::FindValue(const std::string& name) const {
  auto it = value_by_name_.find(name);
  return it == value_by_name_.end() ? nullptr : it->second;
}

bool Graph::IsGraphOutput(const Value* value) const {
  return std::find(outputs_.begin(), outputs_.end(), value) != outputs_.end();
}

bool Graph::IsGraphInput(const Value* value) const {
  return std::find(inputs_.begin(), inputs_.end(), value) != inputs_.end();
}

Node* Graph::AddNode(const std::string& op_type, const std::vector<Value*>& inputs,
                     const std::vector<Value*>& outputs, const std::string& name) {
  auto node = std::unique_ptr<Node>(new Node());
  Node* raw = node.get();
  raw->graph_ = this;
  raw->op_type_ = op_type;
  raw->name_ = name.empty() ? absl::StrCat(op_type, "_", next_node_id_) : name;
  ++next_node_id_;
  for (size_t i = 0; i < inputs.size(); ++i) raw->SetInput(static_cast<int>(i), inputs[i]);
  raw->inputs_.resize(inputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i]->producer_ = raw;
    outputs[i]->producer_index_ = static_cast<int>(i);
  }
  raw->outputs_ = outputs;
  nodes_.push_back(std::move(node));
  return raw;
}

void Graph::RemoveNode(Node* node) {
  for (int i = 0; i < node->num_inputs(); ++i) node->SetInput(i, nullptr);
  for (Value* out : node->outputs_) {
    if (out->producer_ == node) {
      out->producer_ = nullptr;
      out->producer_index_ = -1;
    }
  }
  nodes_.erase(std::find_if(nodes_.begin(), nodes_.end(),
                            [node](const std::unique_ptr<Node>& n) { return n.get() == node; }));
}

void Graph::ReplaceAllUsesWith(Value* from, Value* to) {
  std::vector<Use> uses = from->uses_;
  for (const Use& use : uses) use.node->SetInput(use.index, to);
  for (Value*& out : outputs_) {
    if (out == from) out = to;
  }
}

void Graph::RemoveUnusedValues() {
  absl::flat_hash_set<const Value*> keep(inputs_.begin(), inputs_.end());
  keep.insert(outputs_.begin(), outputs_.end());
  for (const auto& n : nodes_) {
    keep.insert(n->inputs_.begin(), n->inputs_.end());
    keep.insert(n->outputs_.begin(), n->outputs_.end());
  }
  std::vector<std::unique_ptr<Value>> kept;
  for (auto& v : values_) {
    if (keep.contains(v.get())) {
      kept.push_back(std::move(v));
    } else {
      value_by_name_.erase(v->name_);
    }
  }
  values_ = std::move(kept);
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

std::vector<Value*> Graph::values() const {
  std::vector<Value*> out;
  out.reserve(values_.size());
  for (const auto& v : values_) out.push_back(v.get());
  return out;
}

std::vector<Value*> Graph::constants() const {
  std::vector<Value*> out;
  for (const auto& v : values_) {
    if (v->is_constant()) out.push_back(v.get());
  }
  return out;
}

absl::Status Graph::FinishRewrites() {
  KILN_RETURN_IF_ERROR(TopologicalSort());
  RemoveUnusedValues();
  return absl::OkStatus();
}

absl::Status Graph::TopologicalSort() {
  // Kahn's algorithm, taking ready nodes in their current order.
  absl::flat_hash_map<const Node*, int> pending;
  absl::flat_hash_map<const Node*, size_t> position;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node* n = nodes_[i].get();
    position[n] = i;
    int count = 0;
    for (const Value* in : n->inputs_) {
      if (in && in->producer_) ++count;
    }
    pending[n] = count;
  }
  std::vector<size_t> ready;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (pending[nodes_[i].get()] == 0) ready.push_back(i);
  }
  std::vector<std::unique_ptr<Node>> sorted;
  sorted.reserve(nodes_.size());
  // Min-heap on original position keeps the order stable.
  std::make_heap(ready.begin(), ready.end(), std::greater<>());
  while (!ready.empty()) {
    std::pop_heap(ready.begin(), ready.end(), std::greater<>());
    size_t idx = ready.back();
    ready.pop_back();
    Node* n = nodes_[idx].get();
    for (Value* out : n->outputs_) {
      for (const Use& use : out->uses_) {
        if (--pending[use.node] == 0) {
          ready.push_back(position[use.node]);
          std::push_heap(ready.begin(), ready.end(), std::greater<>());
        }
      }
    }
    sorted.push_back(std::move(nodes_[idx]));
  }
  if (sorted.size() != nodes_.size()) {
    std::vector<std::string> stuck;
    for (auto& n : nodes_) {
      if (n) stuck.push_back(n->name_);
    }
    for (auto& n : sorted) nodes_[position[n.get()]] = std::move(n);  // restore
    return absl::InvalidArgumentError(
        absl::StrCat("graph '", name_, "' has a cycle through nodes: ", absl::StrJoin(stuck, ", ")));
  }
  nodes_ = std::move(sorted);
  return absl::OkStatus();
}

std::unique_ptr<Graph> Graph::Clone() const {
  auto g = std::make_unique<Graph>();
  g->name_ = name_;
  g->dim_symbols_ = dim_symbols_;
  absl::flat_hash_map<const Value*, Value*> map;
  for (const auto& v : values_) {
    Value* nv = g->AddValue(v->name_);
    nv->dtype_ = v->dtype_;
    nv->shape_ = v->shape_;
    nv->has_type_ = v->has_type_;
    nv->dims_ = v->dims_;
    nv->symbolic_data_ = v->symbolic_data_;
    nv->constant_ = v->constant_;
    map[v.get()] = nv;
  }
  auto lookup = [&](Value* v) { return v ? map.at(v) : nullptr; };
  for (const auto& n : nodes_) {
    std::vector<Value*> ins, outs;
    for (Value* v : n->inputs_) ins.push_back(lookup(v));
    for (Value* v : n->outputs_) outs.push_back(lookup(v));
    Node* nn = g->AddNode(n->op_type_, ins, outs, n->name_);
    nn->domain_ = n->domain_;
    nn->attributes_ = n->attributes_;
  }
  g->next_node_id_ = next_node_id_;
  for (Value* v : inputs_) g->inputs_.push_back(lookup(v));
  for (Value* v : outputs_) g->outputs_.push_back(lookup(v));
  return g;
}

}  // namespace kiln
