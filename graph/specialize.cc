// Binding dynamic graphs to sizes (graph/specialize.h).
#include "graph/specialize.h"

#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "graph/evaluate.h"
#include "graph/fused_group.h"
#include "graph/infer_shapes.h"
#include "graph/symbolic_shapes.h"

namespace kiln {
namespace {

std::string Where(const Value& input, size_t dim, const DimExpr& expr, const std::vector<DimSymbol>& symbols) {
  return absl::StrCat("input '", input.name(), "' dim ", dim, " (", expr.ToString(symbols), ")");
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> BindDims(const Graph& graph, const std::map<std::string, Shape>& input_shapes) {
  const std::vector<DimSymbol>& symbols = graph.dim_symbols();
  std::vector<std::optional<int64_t>> bound(symbols.size());
  std::vector<std::string> bound_by(symbols.size());
  // Inputs whose dim is a symbol bind it; every other dim is checked
  // afterwards.
  for (const Value* in : graph.inputs()) {
    auto it = input_shapes.find(in->name());
    if (it == input_shapes.end())
      return absl::InvalidArgumentError(absl::StrCat("no shape for input '", in->name(), "'"));
    const Shape& shape = it->second;
    if (shape.size() != static_cast<size_t>(in->rank())) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", in->name(), "' has rank ", shape.size(), ", the model's has rank ", in->rank()));
    }
    if (!in->is_dynamic()) continue;
    for (size_t d = 0; d < shape.size(); ++d) {
      std::optional<int> id = in->dims()[d].AsSymbol();
      if (!id) continue;
      const DimSymbol& s = symbols[*id];
      const std::string where = Where(*in, d, in->dims()[d], symbols);
      if (shape[d] < s.min || shape[d] > s.max) {
        return absl::InvalidArgumentError(absl::StrCat(where, " is ", shape[d], ", outside the range ", s.min, "..",
                                                       s.max, " the model was compiled for"));
      }
      if (bound[*id] && *bound[*id] != shape[d]) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, " is ", shape[d], ", but ", bound_by[*id], " is ", *bound[*id], "; both are ", s.name));
      }
      bound[*id] = shape[d];
      bound_by[*id] = where;
    }
  }
  std::vector<int64_t> values;
  for (size_t i = 0; i < symbols.size(); ++i) {
    if (!bound[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("no input dim is '", symbols[i].name, "' alone, so its value cannot be read from the inputs"));
    }
    values.push_back(*bound[i]);
  }
  for (const Value* in : graph.inputs()) {
    const Shape& shape = input_shapes.at(in->name());
    const std::vector<DimExpr> dims = SymbolicShape(*in);
    for (size_t d = 0; d < shape.size(); ++d) {
      KILN_ASSIGN_OR_RETURN(int64_t want, dims[d].Evaluate(values));
      if (shape[d] != want) {
        return absl::InvalidArgumentError(absl::StrCat(Where(*in, d, dims[d], symbols), " is ", shape[d], "; at ",
                                                       BindingToString(graph, values), " it must be ", want));
      }
    }
  }
  return values;
}

std::string BindingToString(const Graph& graph, absl::Span<const int64_t> values) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < graph.dim_symbols().size() && i < values.size(); ++i) {
    parts.push_back(absl::StrCat(graph.dim_symbols()[i].name, "=", values[i]));
  }
  return absl::StrJoin(parts, ", ");
}

absl::StatusOr<std::unique_ptr<Graph>> Specialize(const Graph& graph, absl::Span<const int64_t> values) {
  if (values.size() != graph.dim_symbols().size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Specialize: ", values.size(), " values for ", graph.dim_symbols().size(), " dim symbols"));
  }
  std::unique_ptr<Graph> g = graph.Clone();
  for (Value* v : g->values()) {
    if (v->has_symbolic_data()) {
      KILN_ASSIGN_OR_RETURN(Shape data, EvaluateDims(v->symbolic_data(), values));
      g->SetConstant(v, Tensor::FromInt64(v->dtype(), v->shape(), data));
    }
  }
  for (Value* in : g->inputs()) {
    if (!in->is_dynamic()) continue;
    KILN_ASSIGN_OR_RETURN(Shape shape, EvaluateDims(in->dims(), values));
    in->SetType(in->dtype(), shape);
    in->SetDims({});
  }
  g->set_dim_symbols({});
  // A fused group's body has the graph's symbols (graph/fused_group.h): bound with it.
  for (Node* n : g->nodes()) {
    if (!IsFusedGroup(*n)) continue;
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Graph> body, FusedGroupBody(*n));
    if (!body->is_dynamic()) continue;
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Graph> bound, Specialize(*body, values));
    n->SetAttr("body", Attribute(std::shared_ptr<const Graph>(std::move(bound))));
  }
  absl::Status st = InferShapes(*g, {.fold_constants = false});
  if (!st.ok()) {
    return absl::Status(st.code(), absl::StrCat("at ", BindingToString(graph, values), ": ", st.message()));
  }
  return g;
}

absl::Status CheckSpecializations(const Graph& graph) {
  const std::vector<DimSymbol>& symbols = graph.dim_symbols();
  if (symbols.empty()) return absl::OkStatus();
  std::vector<std::vector<int64_t>> cases(3);
  for (const DimSymbol& s : symbols) {
    cases[0].push_back(s.min);
    cases[1].push_back(s.max);
    cases[2].push_back(std::min(s.max, std::max(s.min, (s.min + s.max) / 2 | 1)));  // odd, inside
  }
  for (const std::vector<int64_t>& values : cases) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, Specialize(graph, values));
    for (const Value* v : graph.values()) {
      const Value* s = g->FindValue(v->name());
      if (s == nullptr || !s->has_type() || !v->has_type()) continue;
      KILN_ASSIGN_OR_RETURN(Shape want, EvaluateDims(SymbolicShape(*v), values));
      if (s->shape() != want) {
        const std::string by = v->producer() ? absl::StrCat(", the output of ", v->producer()->Describe()) : "";
        return absl::InternalError(absl::StrCat("at ", BindingToString(graph, values), " '", v->name(), "'", by, " is ",
                                                ShapeToString(s->shape()), ", but its dims ",
                                                DimsToString(SymbolicShape(*v), symbols), " give ", ShapeToString(want),
                                                ": a rewrite fixed a size that the dynamic dims vary"));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<bool> SizeOnlyNodes(const Graph& graph) {
  const std::vector<Node*> nodes = graph.nodes();
  std::vector<bool> size_only(nodes.size(), false);
  if (!graph.is_dynamic()) return size_only;
  absl::flat_hash_set<const Value*> known;  // outputs of size-only nodes
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = *nodes[i];
    bool only = node.op_type() == "Shape" || node.op_type() == "Size";
    if (!only) {
      only = true;
      for (const Value* in : node.inputs()) {
        if (in != nullptr && !in->is_constant() && !known.contains(in)) only = false;
      }
    }
    if (!only) continue;
    size_only[i] = true;
    for (const Value* out : node.outputs()) known.insert(out);
  }
  return size_only;
}

absl::StatusOr<absl::flat_hash_map<const Value*, Tensor>> EvaluateSizeOnlyNodes(const Graph& specialized,
                                                                                const std::vector<bool>& size_only,
                                                                                const std::string& where) {
  const std::vector<Node*> nodes = specialized.nodes();
  if (nodes.size() != size_only.size()) {
    return absl::InternalError(absl::StrCat(where, ": ", nodes.size(), " nodes for ", size_only.size(), " steps"));
  }
  absl::flat_hash_map<const Value*, Tensor> values;
  for (size_t s = 0; s < nodes.size(); ++s) {
    if (!size_only[s]) continue;
    const Node& node = *nodes[s];
    const bool type_only = node.op_type() == "Shape" || node.op_type() == "Size";
    std::vector<const Tensor*> inputs;
    for (const Value* in : node.inputs()) {
      if (in == nullptr || type_only) {
        inputs.push_back(in != nullptr ? in->constant_or_null() : nullptr);
        continue;
      }
      auto it = values.find(in);
      const Tensor* t = in->is_constant() ? &in->constant() : it != values.end() ? &it->second : nullptr;
      if (t == nullptr) {
        return absl::InternalError(absl::StrCat(where, ": size-only step ", s, " (node '", node.name(), "') reads '",
                                                in->name(), "', which no earlier one made"));
      }
      inputs.push_back(t);
    }
    absl::StatusOr<std::vector<Tensor>> out = EvaluateNode(node, inputs);
    if (!out.ok()) {
      return absl::Status(out.status().code(), absl::StrCat(where, ": step ", s, " (node '", node.name(),
                                                            "') on the host: ", out.status().message()));
    }
    for (int o = 0; o < node.num_outputs(); ++o) values[node.output(o)] = std::move((*out)[o]);
  }
  return values;
}

}  // namespace kiln
