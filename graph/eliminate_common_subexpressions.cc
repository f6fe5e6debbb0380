// Common-subexpression elimination: one key per node, the first node of each key kept.
#include "graph/eliminate_common_subexpressions.h"

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {
namespace {

// dtype, shape and bytes of a small tensor; nullopt for a large one.
std::optional<std::string> TensorKey(const Tensor& t) {
  if (t.nbytes() > EliminateCommonSubexpressions::kMaxComparedConstantBytes) return std::nullopt;
  std::string key = t.TypeString();
  key.push_back(':');
  if (t.nbytes() > 0) key.append(static_cast<const char*>(t.raw_data()), t.nbytes());
  return key;
}

std::string Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return absl::StrCat(u);
}

std::optional<std::string> AttributeKey(const Attribute& a) {
  switch (a.kind()) {
    case AttrKind::kInt: return absl::StrCat("i", a.i());
    case AttrKind::kFloat: return absl::StrCat("f", Bits(a.f()));
    case AttrKind::kString: return absl::StrCat("s", a.s().size(), ":", a.s());
    case AttrKind::kInts: return absl::StrCat("I", absl::StrJoin(a.ints(), ","));
    case AttrKind::kFloats: {
      std::string key = "F";
      for (float f : a.floats()) absl::StrAppend(&key, Bits(f), ",");
      return key;
    }
    case AttrKind::kStrings: {
      std::string key = "S";
      for (const std::string& s : a.strings()) absl::StrAppend(&key, s.size(), ":", s);
      return key;
    }
    case AttrKind::kTensor: {
      std::optional<std::string> t = TensorKey(a.t());
      if (!t) return std::nullopt;
      return absl::StrCat("T", *t);
    }
    case AttrKind::kGraph: return std::nullopt;
  }
  return std::nullopt;
}

// Everything the node's outputs depend on; nullopt when the node is not merged.
std::optional<std::string> NodeKey(const Node& node, absl::Span<const DimSymbol> symbols) {
  std::string key = absl::StrCat(node.domain(), "|", node.op_type(), "|", node.num_outputs(), "|");
  for (const auto& [name, attr] : node.attributes()) {
    std::optional<std::string> a = AttributeKey(attr);
    if (!a) return std::nullopt;
    absl::StrAppend(&key, name, "=", a->size(), ":", *a, ";");
  }
  key.push_back('|');
  for (const Value* in : node.inputs()) {
    std::optional<std::string> c;
    if (in != nullptr && in->is_constant()) c = TensorKey(in->constant());
    // A dynamic graph's shape constant: its data is only the largest case of its
    // expressions, which must match too.
    if (c && in->has_symbolic_data()) {
      absl::StrAppend(&*c, "|", absl::StrJoin(in->symbolic_data(), ",", [&](std::string* o, const DimExpr& e) {
                        o->append(e.ToString(symbols));
                      }));
    }
    if (c) {
      absl::StrAppend(&key, "c", c->size(), ":", *c, ";");
    } else {
      absl::StrAppend(&key, "v", reinterpret_cast<uintptr_t>(in), ";");
    }
  }
  return key;
}

bool SameTypes(const Node& a, const Node& b) {
  for (int i = 0; i < a.num_outputs(); ++i) {
    const Value* x = a.output(i);
    const Value* y = b.output(i);
    if (!x->has_type() || !y->has_type() || x->dtype() != y->dtype() || x->shape() != y->shape() ||
        x->dims() != y->dims()) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<bool> EliminateCommonSubexpressions::Run(Graph& graph) {
  absl::flat_hash_map<std::string, Node*> first;
  bool changed = false;
  for (Node* node : graph.nodes()) {
    std::optional<std::string> key = NodeKey(*node, graph.dim_symbols());
    if (!key) continue;
    auto [it, inserted] = first.try_emplace(*key, node);
    if (inserted) continue;
    Node* kept = it->second;
    bool output_named = false;
    for (const Value* out : node->outputs()) output_named |= graph.IsGraphOutput(out);
    if (output_named || !SameTypes(*kept, *node)) continue;
    for (int i = 0; i < node->num_outputs(); ++i) graph.ReplaceAllUsesWith(node->output(i), kept->output(i));
    graph.RemoveNode(node);
    changed = true;
  }
  if (changed) graph.RemoveUnusedValues();
  return changed;
}

}  // namespace kiln
