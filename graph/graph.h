// The graph IR: values (dtype + static shape, optionally constant data), nodes
// (op type, attributes, inputs, outputs) and the graph that owns them.
//
// Invariants the verifier checks: every value has at most one producer; node
// inputs are produced by an earlier node, are graph inputs or constants; nodes are
// stored in a topological order; names of values are unique.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/attribute.h"
#include "graph/dim_expr.h"
#include "graph/dtype.h"
#include "graph/tensor.h"

namespace kiln {

class Node;
class Graph;

// One use of a value: `node` reads it as input number `index`.
struct Use {
  Node* node;
  int index;
};

class Value {
 public:
  const std::string& name() const { return name_; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return NumElements(shape_); }
  bool has_type() const { return has_type_; }
  void SetType(DType dtype, Shape shape) {
    dtype_ = dtype;
    shape_ = std::move(shape);
    has_type_ = true;
  }
  std::string TypeString() const;  // "f32[1,3]" or "?" before inference

  // Dynamic shapes (graph/dim_expr.h). dims(): each dim as an expression over the
  // graph's dim symbols, when any of them depends on a symbol; empty for a static
  // value. shape() is then the value at every symbol's largest value, the case the
  // memory plan is made for. InferShapes sets it for node outputs, the importer for
  // inputs.
  const std::vector<DimExpr>& dims() const { return dims_; }
  bool is_dynamic() const { return !dims_.empty(); }
  // Stores nothing when every dim is a constant.
  void SetDims(std::vector<DimExpr> dims);
  // A constant integer tensor of rank 0 or 1 whose elements depend on the symbols (the
  // Shape of a dynamic value and arithmetic on it): each element's expression. The
  // constant's data holds their values at the symbols' largest values. Empty for
  // every other value; SetSymbolicData stores nothing when all are constants.
  const std::vector<DimExpr>& symbolic_data() const { return symbolic_data_; }
  bool has_symbolic_data() const { return !symbolic_data_.empty(); }
  void SetSymbolicData(std::vector<DimExpr> data);

  // Constant data: initializers and folded values. A constant has no producer.
  bool is_constant() const { return constant_.has_value(); }
  const Tensor& constant() const { return *constant_; }
  const Tensor* constant_or_null() const { return constant_ ? &*constant_ : nullptr; }

  Node* producer() const { return producer_; }
  int producer_index() const { return producer_index_; }
  const std::vector<Use>& uses() const { return uses_; }

 private:
  friend class Graph;
  friend class Node;
  explicit Value(std::string name) : name_(std::move(name)) {}

  std::string name_;
  DType dtype_ = DType::kFloat32;
  Shape shape_;
  bool has_type_ = false;
  std::vector<DimExpr> dims_;
  std::vector<DimExpr> symbolic_data_;
  std::optional<Tensor> constant_;
  Node* producer_ = nullptr;
  int producer_index_ = -1;
  std::vector<Use> uses_;
};

class Node {
 public:
  const std::string& name() const { return name_; }
  const std::string& op_type() const { return op_type_; }
  const std::string& domain() const { return domain_; }
  void set_name(std::string name) { name_ = std::move(name); }
  void set_domain(std::string domain) { domain_ = std::move(domain); }

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  // nullptr for an absent optional input.
  Value* input(int i) const { return i < num_inputs() ? inputs_[i] : nullptr; }
  bool has_input(int i) const { return input(i) != nullptr; }
  Value* output(int i) const { return outputs_[i]; }
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  // Replaces input i (keeps use lists consistent).
  void SetInput(int i, Value* value);

  // Attributes, sorted by name.
  const std::map<std::string, Attribute>& attributes() const { return attributes_; }
  bool has_attr(const std::string& name) const { return attributes_.count(name) > 0; }
  void SetAttr(const std::string& name, Attribute value) { attributes_[name] = std::move(value); }
  void RemoveAttr(const std::string& name) { attributes_.erase(name); }

  // Typed attribute access. The defaulted forms return `dflt` when absent; all
  // return InvalidArgument naming the node when present with another kind.
  absl::StatusOr<int64_t> GetInt(const std::string& name) const;
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t dflt) const;
  absl::StatusOr<float> GetFloat(const std::string& name) const;
  absl::StatusOr<float> GetFloat(const std::string& name, float dflt) const;
  absl::StatusOr<std::string> GetString(const std::string& name) const;
  absl::StatusOr<std::string> GetString(const std::string& name, const std::string& dflt) const;
  absl::StatusOr<std::vector<int64_t>> GetInts(const std::string& name) const;
  absl::StatusOr<std::vector<int64_t>> GetInts(const std::string& name,
                                               std::vector<int64_t> dflt) const;
  absl::StatusOr<std::vector<float>> GetFloats(const std::string& name) const;
  absl::StatusOr<std::vector<float>> GetFloats(const std::string& name, std::vector<float> dflt) const;
  absl::StatusOr<std::vector<std::string>> GetStrings(const std::string& name) const;
  absl::StatusOr<Tensor> GetTensor(const std::string& name) const;
  absl::StatusOr<std::shared_ptr<const Graph>> GetGraph(const std::string& name) const;

  // "node 'conv1' (Conv)": the prefix every message about this node starts with.
  std::string Describe() const;
  // InvalidArgument("node 'conv1' (Conv): <message>").
  absl::Status Error(absl::string_view message) const;
  // UnimplementedError with the same prefix: valid ONNX that kiln does not support
  // (reported as "unsupported", not as a bad model).
  absl::Status Unsupported(absl::string_view message) const;

 private:
  friend class Graph;
  Node() = default;
  absl::StatusOr<const Attribute*> FindAttr(const std::string& name, AttrKind kind) const;

  std::string name_;
  std::string op_type_;
  std::string domain_;
  std::map<std::string, Attribute> attributes_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  Graph* graph_ = nullptr;
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Deep copy (values, nodes, constants share tensor storage).
  std::unique_ptr<Graph> Clone() const;

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // The named dims of a graph compiled for ranges of input sizes (--dim seq=1..512);
  // DimExpr symbol ids index this list. Empty for a static graph.
  const std::vector<DimSymbol>& dim_symbols() const { return dim_symbols_; }
  void set_dim_symbols(std::vector<DimSymbol> symbols) { dim_symbols_ = std::move(symbols); }
  bool is_dynamic() const { return !dim_symbols_.empty(); }

  // Creates a value with a unique name (a suffix is added if `name` is taken).
  Value* AddValue(const std::string& name);
  // A new value typed `dtype` `shape` (a rewrite's intermediate result).
  Value* AddValue(const std::string& name, DType dtype, Shape shape);
  Value* AddConstant(const std::string& name, Tensor data);
  // Makes an existing value constant (it must have no producer).
  void SetConstant(Value* value, Tensor data);
  Value* FindValue(const std::string& name) const;

  void AddInput(Value* value) { inputs_.push_back(value); }
  void AddOutput(Value* value) { outputs_.push_back(value); }
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  void SetOutput(int i, Value* value) { outputs_[i] = value; }
  bool IsGraphOutput(const Value* value) const;
  bool IsGraphInput(const Value* value) const;

  // Appends a node; `outputs` must not have producers yet. Inputs may be nullptr
  // (absent optional inputs).
  Node* AddNode(const std::string& op_type, const std::vector<Value*>& inputs,
                const std::vector<Value*>& outputs, const std::string& name = "");
  // Removes a node; its outputs stay as values without a producer.
  void RemoveNode(Node* node);
  // Points every use of `from` (graph outputs too) at `to`.
  void ReplaceAllUsesWith(Value* from, Value* to);
  // Drops values that nothing refers to.
  void RemoveUnusedValues();

  // Nodes in the stored order (topological once TopologicalSort() has run).
  std::vector<Node*> nodes() const;
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  std::vector<Value*> values() const;
  // Values that are constants (initializers and folded results), in creation order.
  std::vector<Value*> constants() const;

  // Reorders nodes topologically (stable: keeps the current order where legal);
  // fails with the names of the nodes on a cycle.
  absl::Status TopologicalSort();
  // What a pass does after rewriting nodes: TopologicalSort, then RemoveUnusedValues.
  absl::Status FinishRewrites();

 private:
  std::string UniqueValueName(const std::string& name);

  std::string name_ = "main";
  std::vector<DimSymbol> dim_symbols_;
  std::vector<std::unique_ptr<Value>> values_;
  absl::flat_hash_map<std::string, Value*> value_by_name_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  int next_node_id_ = 0;
};

}  // namespace kiln
