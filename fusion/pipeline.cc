// The pass pipeline: canonicalisation (its passes are listed, in order, in
// graph/canonicalize.cc) and then the fusion passes, listed here in order.
#include "fusion/pipeline.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "fusion/fuse_attention.h"
#include "fusion/fuse_epilogue.h"
#include "fusion/fuse_pointwise.h"
#include "fusion/fuse_prologue.h"
#include "fusion/fuse_siblings.h"
#include "graph/canonicalize.h"

namespace kiln {
namespace {

struct Step {
  PassInfo info;
  std::function<absl::StatusOr<bool>(Graph&)> run;
};

std::vector<Step> FusionSteps(FusionReport* report) {
  return {
      {{"fuse-siblings", "first: merging Q/K/V (gate/up) weights changes which MatMuls exist, and the merged "
                         "MatMul should get the epilogue", true},
       [report](Graph& g) { return FuseSiblings(report).Run(g); }},
      {{"fuse-attention", "before the prologue and epilogue passes: they would give the scores MatMul the scale "
                          "and mask as its epilogue (and a Q scale as its prologue), splitting the attention pattern",
        true},
       [report](Graph& g) { return FuseAttention(report).Run(g); }},
      {{"fuse-prologue", "before the epilogue: it forms the matmul's group, which FuseEpilogue then extends",
        true},
       [report](Graph& g) { return FusePrologue(report).Run(g); }},
      {{"fuse-epilogue", "before pointwise fusion: element-wise ops after a matmul/conv belong in its epilogue "
                         "(no extra kernel), not in a pointwise group of their own", true},
       [report](Graph& g) { return FuseEpilogue(report).Run(g); }},
      {{"fuse-pointwise", "last: whatever element-wise work is left becomes one kernel per chain; LayerNorm and "
                          "Softmax take their residual add / scale and mask", true},
       [report](Graph& g) { return FusePointwise(report).Run(g); }},
  };
}

absl::Status RunStep(const Step& step, Graph& graph, const PipelineOptions& options, bool* changed) {
  absl::StatusOr<bool> r = step.run(graph);
  if (!r.ok()) return absl::Status(r.status().code(), absl::StrCat(step.info.name, ": ", r.status().message()));
  if (changed != nullptr) *changed |= *r;
  if (options.after_pass) options.after_pass(step.info.name, graph);
  return absl::OkStatus();
}

}  // namespace

std::vector<FusionReport::Group> FinalGroups(const std::vector<FusionReport::Group>& formed) {
  // A group that a later pass extended under the same name (prologue, then
  // epilogue) is listed once, in its final form.
  std::vector<FusionReport::Group> groups;
  for (auto it = formed.rbegin(); it != formed.rend(); ++it) {
    bool later = false;
    for (const FusionReport::Group& g : groups) later |= g.name == it->name;
    if (!later) groups.push_back(*it);
  }
  std::reverse(groups.begin(), groups.end());
  // A group whose member is an earlier group's node (the merged sibling MatMul that
  // FuseEpilogue then took as its anchor) absorbs it: the user sees one group with
  // the original ONNX node names and every pass that shaped it.
  std::vector<bool> absorbed(groups.size(), false);
  for (size_t i = 0; i < groups.size(); ++i) {
    std::vector<std::string> members;
    for (const std::string& m : groups[i].members) {
      size_t j = 0;
      while (j < i && (absorbed[j] || groups[j].name != m)) ++j;
      if (j == i) {
        members.push_back(m);
        continue;
      }
      absorbed[j] = true;
      members.insert(members.end(), groups[j].members.begin(), groups[j].members.end());
      groups[i].pass = absl::StrCat(groups[j].pass, "+", groups[i].pass);
    }
    groups[i].members = std::move(members);
  }
  std::vector<FusionReport::Group> result;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (!absorbed[i]) result.push_back(std::move(groups[i]));
  }
  return result;
}

const std::vector<PassInfo>& PipelinePasses() {
  static const auto* passes = [] {
    auto* v = new std::vector<PassInfo>();
    for (const CanonicalPass& p : CanonicalPasses()) v->push_back({p.name, p.why, false});
    for (const Step& s : FusionSteps(nullptr)) v->push_back(s.info);
    return v;
  }();
  return *passes;
}

absl::Status CheckPassName(const std::string& name) {
  std::vector<std::string> names;
  for (const PassInfo& p : PipelinePasses()) {
    if (p.name == name) return absl::OkStatus();
    names.push_back(p.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown pass '", name, "'; the passes, in order: ", absl::StrJoin(names, ", ")));
}

absl::Status RunCanonicalization(Graph& graph, const PipelineOptions& options) {
  return Canonicalize(graph, options.after_pass).status();
}

absl::StatusOr<FusionReport> RunFusion(Graph& graph, const PipelineOptions& options) {
  FusionReport report;
  for (const Step& step : FusionSteps(&report)) KILN_RETURN_IF_ERROR(RunStep(step, graph, options, nullptr));
  report.groups = FinalGroups(report.groups);
  return report;
}

}  // namespace kiln
