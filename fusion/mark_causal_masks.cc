#include "fusion/mark_causal_masks.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/causal_mask.h"
#include "graph/fused_group.h"
#include "graph/specialize.h"
#include "graph/symbolic_shapes.h"

namespace kiln {
namespace {

struct Candidate {
  Node* group;
  int input;
  bool additive = false;
  std::optional<float> fill;
  bool causal = true;
  bool seen = false;  // additive holds the first sample's kind
};

// The samples' masks are evaluated on the host: at most this many elements each (a
// [1, 1, 4096, 4096] mask).
constexpr int64_t kMaxSampledMaskElements = int64_t{1} << 24;

// The sampled sizes (mark_causal_masks.h).
std::vector<std::vector<int64_t>> SampleSizes(const std::vector<DimSymbol>& symbols) {
  std::vector<int64_t> least, inside;
  for (const DimSymbol& s : symbols) {
    least.push_back(s.min);
    inside.push_back(std::min(s.max, std::max(s.min, (s.min + s.max) / 2 | 1)));
  }
  std::vector<std::vector<int64_t>> samples = {least, inside};
  for (size_t k = 0; k < symbols.size(); ++k) {
    std::vector<int64_t> one = least;
    one[k] = symbols[k].max;
    samples.push_back(one);
  }
  return samples;
}

}  // namespace

absl::StatusOr<bool> MarkCausalMasks::Run(Graph& graph) {
  if (!graph.is_dynamic()) return false;
  const std::vector<Node*> nodes = graph.nodes();
  const std::vector<bool> size_only = SizeOnlyNodes(graph);
  absl::flat_hash_map<const Node*, bool> by_size;
  for (size_t i = 0; i < nodes.size(); ++i) by_size[nodes[i]] = size_only[i];
  std::vector<Candidate> candidates;
  for (Node* n : nodes) {
    if (!IsFusedGroup(*n) || n->GetString("pattern", "").value_or("") != "attention" || n->has_attr("causal_inputs")) {
      continue;
    }
    for (int i = 0; i < n->num_inputs(); ++i) {
      const Value* v = n->input(i);
      if (v == nullptr || v->is_constant() || v->producer() == nullptr || !v->has_type() || v->rank() < 2) continue;
      auto made = by_size.find(v->producer());
      if (made == by_size.end() || !made->second) continue;
      candidates.push_back(Candidate{n, i});
    }
  }
  if (candidates.empty()) return false;
  const std::vector<std::vector<int64_t>> samples = SampleSizes(graph.dim_symbols());
  // A mask too large to evaluate on the host at a sample is not marked (nor is one
  // whose evaluation fails): the samples are all or nothing.
  for (const std::vector<int64_t>& values : samples) {
    for (const Candidate& c : candidates) {
      absl::StatusOr<Shape> shape = EvaluateDims(SymbolicShape(*c.group->input(c.input)), values);
      if (!shape.ok() || NumElements(*shape) > kMaxSampledMaskElements) return false;
    }
  }
  for (const std::vector<int64_t>& values : samples) {
    const std::string where = absl::StrCat("mark-causal-masks at ", BindingToString(graph, values));
    absl::StatusOr<std::unique_ptr<Graph>> g = Specialize(graph, values);
    if (!g.ok()) return false;
    absl::StatusOr<absl::flat_hash_map<const Value*, Tensor>> computed = EvaluateSizeOnlyNodes(**g, size_only, where);
    if (!computed.ok()) return false;
    for (Candidate& c : candidates) {
      if (!c.causal) continue;
      const Value* v = (*g)->FindValue(c.group->input(c.input)->name());
      auto it = v != nullptr ? computed->find(v) : computed->end();
      bool additive = false;
      c.causal = it != computed->end() && MatchesCausalMask(it->second, &additive, &c.fill) &&
                 (!c.seen || additive == c.additive);
      c.additive = additive;
      c.seen = true;
    }
  }
  bool changed = false;
  absl::flat_hash_map<Node*, std::pair<std::vector<int64_t>, std::vector<float>>> marks;
  for (const Candidate& c : candidates) {
    if (!c.causal || (c.additive && !c.fill)) continue;
    auto& [inputs, fills] = marks[c.group];
    inputs.push_back(c.input);
    fills.push_back(c.additive ? *c.fill : 0.f);
  }
  for (auto& [group, mark] : marks) {
    group->SetAttr("causal_inputs", Attribute(mark.first));
    group->SetAttr("causal_fills", Attribute(mark.second));
    changed = true;
  }
  return changed;
}

}  // namespace kiln
