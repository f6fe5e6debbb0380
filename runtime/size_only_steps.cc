#include "runtime/size_only_steps.h"

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "common/status_macros.h"
#include "graph/specialize.h"

namespace kiln {
namespace {

// Whether `step` reads its input `input` on the device: a library call or view reads
// its bindings; generated kernels only what a launch takes as a pointer or through a
// tensor map (an attention kernel computes a marked causal mask instead of reading it:
// fusion/mark_causal_masks.h).
bool ReadsInput(const bundle::Step& step, int input) {
  if (step.launches_size() == 0) return true;
  const int arg = step.outputs_size() + input;
  for (const bundle::Launch& l : step.launches()) {
    for (int a : l.args()) {
      if (a == arg) return true;
    }
    for (const bundle::TensorMap& t : l.tensor_maps()) {
      if (t.tensor() == arg) return true;
    }
  }
  return false;
}

}  // namespace

SizeOnlySteps FindSizeOnlySteps(const Graph& graph, const bundle::Manifest& m) {
  SizeOnlySteps steps;
  const std::vector<Node*> nodes = graph.nodes();
  if (static_cast<int>(nodes.size()) != m.steps_size()) return steps;  // the executor reports the mismatch
  std::vector<bool> size_only = SizeOnlyNodes(graph);
  bool any = false;
  for (bool b : size_only) any |= b;
  if (!any) return steps;
  steps.size_only = std::move(size_only);
  steps.copies.assign(nodes.size(), {});
  absl::flat_hash_map<const Node*, size_t> step_of;
  for (size_t s = 0; s < nodes.size(); ++s) step_of[nodes[s]] = s;
  // From the last step back: an output is wanted when a step that runs on the device
  // or the caller reads it, or a wanted view of it.
  absl::flat_hash_set<const Value*> wanted;
  for (size_t s = nodes.size(); s-- > 0;) {
    if (!steps.size_only[s]) continue;
    const Node& node = *nodes[s];
    for (int o = 0; o < node.num_outputs(); ++o) {
      const Value* v = node.output(o);
      bool want = graph.IsGraphOutput(v) || wanted.contains(v);
      for (const Use& use : v->uses()) {
        const size_t u = step_of.at(use.node);
        want |= !steps.size_only[u] && ReadsInput(m.steps(static_cast<int>(u)), use.index);
      }
      if (!want) continue;
      if (m.steps(static_cast<int>(s)).kernel() != "view") {
        steps.copies[s].push_back(o);
      } else if (node.num_inputs() > 0 && node.input(0) != nullptr && !node.input(0)->is_constant()) {
        wanted.insert(node.input(0));
      }
    }
  }
  return steps;
}

absl::StatusOr<std::vector<SizeOnlyOutput>> ComputeSizeOnlyOutputs(const SizeOnlySteps& steps,
                                                                   const Graph& specialized, const std::string& where) {
  KILN_ASSIGN_OR_RETURN(const auto values, EvaluateSizeOnlyNodes(specialized, steps.size_only, where));
  const std::vector<Node*> nodes = specialized.nodes();
  std::vector<SizeOnlyOutput> outputs;
  for (size_t s = 0; s < nodes.size(); ++s) {
    for (int o : steps.copies[s]) outputs.push_back({static_cast<int>(s), o, values.at(nodes[s]->output(o))});
  }
  return outputs;
}

}  // namespace kiln
