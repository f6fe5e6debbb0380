// Graph verifier: collects every structural problem of a graph into one status.
#include "graph/verifier.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/op_registry.h"

namespace kiln {
namespace {

constexpr size_t kMaxProblems = 50;

std::string Val(const Value* v) { return absl::StrCat("value '", v->name(), "'"); }

std::string ArityRange(int lo, int hi) {
  if (hi >= OpDef::kVariadic) return absl::StrCat("at least ", lo);
  if (lo == hi) return absl::StrCat(lo);
  return absl::StrCat(lo, " to ", hi);
}

std::string Count(int n, absl::string_view noun) { return absl::StrCat(n, " ", noun, n == 1 ? "" : "s"); }

class Verifier {
 public:
  Verifier(const Graph& graph, const VerifyOptions& options) : graph_(graph), options_(options) {}

  absl::Status Run() {
    values_ = graph_.values();
    nodes_ = graph_.nodes();
    owned_.insert(values_.begin(), values_.end());
    for (size_t i = 0; i < nodes_.size(); ++i) {
      position_[nodes_[i]] = static_cast<int>(i);
      for (const Value* out : nodes_[i]->outputs()) {
        if (out && !first_producer_.emplace(out, nodes_[i]).second) produced_twice_.insert(out);
      }
    }
    CheckNames();
    CheckGraphInputs();
    CheckConstants();
    CheckNodes();
    CheckUseLists();
    CheckGraphOutputs();
    if (options_.require_types) CheckTypes();
    if (options_.require_types || options_.require_known_ops) CheckOps();

    if (problems_.empty()) return absl::OkStatus();
    std::string message = absl::StrJoin(problems_.begin(),
                                         problems_.begin() + std::min(problems_.size(), kMaxProblems), "\n");
    if (problems_.size() > kMaxProblems) {
      absl::StrAppend(&message, "\n... and ", problems_.size() - kMaxProblems, " more problems");
    }
    return absl::InvalidArgumentError(message);
  }

 private:
  template <typename... Parts>
  void Problem(const Parts&... parts) {
    problems_.push_back(absl::StrCat(parts...));
  }

  // Reports a value that is referenced from `where` but not owned by the graph.
  bool Owned(const Value* v, absl::string_view where) {
    if (owned_.contains(v)) return true;
    Problem(where, Val(v), " does not belong to graph '", graph_.name(), "'");
    return false;
  }

  void CheckNames() {
    absl::flat_hash_map<std::string, const Value*> by_name;
    for (const Value* v : values_) {
      if (!by_name.emplace(v->name(), v).second) {
        Problem("two values are named '", v->name(), "'");
      }
    }
  }

  void CheckGraphInputs() {
    const auto& inputs = graph_.inputs();
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Value* v = inputs[i];
      if (v == nullptr) {
        Problem("graph input ", i, " is null");
        continue;
      }
      if (!Owned(v, "graph input ")) continue;
      if (!graph_inputs_.insert(v).second) Problem("graph input ", Val(v), " is listed twice");
      if (v->is_constant()) Problem("graph input ", Val(v), " is a constant");
      if (v->producer()) Problem("graph input ", Val(v), " is produced by ", v->producer()->Describe());
    }
  }

  void CheckConstants() {
    for (const Value* v : values_) {
      if (!v->is_constant()) continue;
      if (v->producer()) Problem("constant ", Val(v), " is produced by ", v->producer()->Describe());
      const Tensor& t = v->constant();
      if (!v->has_type() || v->dtype() != t.dtype() || v->shape() != t.shape()) {
        Problem("constant ", Val(v), " has type ", v->TypeString(), " but its data is ", t.TypeString());
      }
    }
  }

  bool Available(const Value* v) const {
    return graph_inputs_.contains(v) || v->is_constant() || produced_.contains(v);
  }

  void CheckNodes() {
    for (size_t pos = 0; pos < nodes_.size(); ++pos) {
      const Node* node = nodes_[pos];
      const std::string d = node->Describe();
      for (int i = 0; i < node->num_inputs(); ++i) {
        const Value* in = node->input(i);
        if (in == nullptr) continue;
        if (!Owned(in, absl::StrCat(d, ": input ", i, " "))) continue;
        if (Available(in)) continue;
        auto it = first_producer_.find(in);
        if (it == first_producer_.end()) {
          Problem(d, ": input ", i, " ", Val(in),
                  " is not a graph input, a constant, or produced by a node");
        } else if (it->second == node) {
          Problem(d, ": input ", i, " ", Val(in), " is the node's own output");
        } else {
          Problem(d, ": input ", i, " ", Val(in), " is produced by later ", it->second->Describe(),
                  " (nodes are not in topological order)");
        }
      }
      for (int i = 0; i < node->num_outputs(); ++i) {
        const Value* out = node->output(i);
        if (out == nullptr) {
          Problem(d, ": output ", i, " is null");
          continue;
        }
        if (!Owned(out, absl::StrCat(d, ": output ", i, " "))) continue;
        const Node* first = first_producer_.at(out);
        if (first != node) {
          Problem(Val(out), " is produced twice: by ", first->Describe(), " and by ", d);
        } else if (!produced_twice_.contains(out) &&
                   (out->producer() != node || out->producer_index() != i)) {
          std::string recorded =
              out->producer() ? absl::StrCat(out->producer()->Describe(), " output ", out->producer_index())
                              : std::string("no producer");
          Problem(d, ": output ", i, " ", Val(out), " records ", recorded);
        }
        produced_.insert(out);
      }
    }
  }

  void CheckUseLists() {
    using UseKey = std::pair<const Node*, int>;
    absl::flat_hash_map<const Value*, absl::flat_hash_set<UseKey>> uses_of;
    for (const Value* v : values_) {
      auto& set = uses_of[v];
      for (const Use& use : v->uses()) {
        if (!position_.contains(use.node)) {
          // The node is not ours: do not dereference it.
          Problem(Val(v), " lists a use (as input ", use.index, ") by a node that is not in graph '",
                  graph_.name(), "'");
          continue;
        }
        if (use.node->input(use.index) != v) {
          Problem(Val(v), " lists a use as input ", use.index, " of ", use.node->Describe(),
                  ", which reads ",
                  use.node->input(use.index) ? Val(use.node->input(use.index)) : std::string("nothing"),
                  " there");
          continue;
        }
        if (!set.insert({use.node, use.index}).second) {
          Problem(Val(v), " lists its use as input ", use.index, " of ", use.node->Describe(), " twice");
        }
      }
    }
    for (const Node* node : nodes_) {
      for (int i = 0; i < node->num_inputs(); ++i) {
        const Value* in = node->input(i);
        if (in == nullptr || !owned_.contains(in)) continue;
        if (!uses_of[in].contains(UseKey{node, i})) {
          Problem(node->Describe(), ": input ", i, " ", Val(in), " is missing from the value's use list");
        }
      }
    }
  }

  void CheckGraphOutputs() {
    const auto& outputs = graph_.outputs();
    for (size_t i = 0; i < outputs.size(); ++i) {
      const Value* v = outputs[i];
      if (v == nullptr) {
        Problem("graph output ", i, " is null");
        continue;
      }
      if (!Owned(v, "graph output ")) continue;
      if (!graph_inputs_.contains(v) && !v->is_constant() && !first_producer_.contains(v)) {
        Problem("graph output ", Val(v), " is not produced by a node, a graph input or a constant");
      }
    }
  }

  void CheckTypes() {
    for (const Value* v : graph_.inputs()) {
      if (v && !v->has_type()) Problem("graph input ", Val(v), " has no type");
    }
    for (const Node* node : nodes_) {
      for (int i = 0; i < node->num_outputs(); ++i) {
        const Value* out = node->output(i);
        if (out && !out->has_type()) {
          Problem(node->Describe(), ": output ", i, " ", Val(out), " has no type");
        }
      }
    }
  }

  void CheckOps() {
    const OpRegistry& registry = OpRegistry::Global();
    for (const Node* node : nodes_) {
      const OpDef* def = registry.Find(node->op_type());
      if (def == nullptr) {
        if (options_.require_known_ops) {
          Problem(node->Describe(), ": op '", node->op_type(), "' is not registered");
        }
        continue;
      }
      const std::string d = node->Describe();
      if (node->num_inputs() < def->min_inputs || node->num_inputs() > def->max_inputs) {
        Problem(d, ": has ", Count(node->num_inputs(), "input"), ", but ", def->name, " takes ",
                ArityRange(def->min_inputs, def->max_inputs));
      } else {
        for (int i = 0; i < def->min_inputs; ++i) {
          if (!node->has_input(i)) Problem(d, ": required input ", i, " is absent");
        }
      }
      if (node->num_outputs() < def->min_outputs || node->num_outputs() > def->max_outputs) {
        Problem(d, ": has ", Count(node->num_outputs(), "output"), ", but ", def->name, " produces ",
                ArityRange(def->min_outputs, def->max_outputs));
      }
    }
  }

  const Graph& graph_;
  const VerifyOptions& options_;
  std::vector<Value*> values_;
  std::vector<Node*> nodes_;
  absl::flat_hash_set<const Value*> owned_;
  absl::flat_hash_map<const Node*, int> position_;
  absl::flat_hash_map<const Value*, const Node*> first_producer_;
  absl::flat_hash_set<const Value*> graph_inputs_;
  absl::flat_hash_set<const Value*> produced_;
  absl::flat_hash_set<const Value*> produced_twice_;
  std::vector<std::string> problems_;
};

}  // namespace

absl::Status VerifyGraph(const Graph& graph, const VerifyOptions& options) {
  return Verifier(graph, options).Run();
}

}  // namespace kiln
