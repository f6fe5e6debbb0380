// The pass pipeline of `kiln compile`: canonicalisation (graph/canonicalize.cc),
// then fusion (pipeline.cc). Each lists its passes in order with a line on why each
// sits where it does; PipelinePasses() returns both lists; `kiln compile --dump-after=PASS` prints the graph
// after any of them and `--no-fuse` stops after canonicalisation (the unfused
// baseline: one op per kernel).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fusion/fusion_report.h"
#include "graph/graph.h"

namespace kiln {

struct PassInfo {
  std::string name;  // "fold-batch-norm", "fuse-epilogue", ...
  std::string why;   // why it sits where it does
  bool fusion = false;
};

// Every pass, in pipeline order.
const std::vector<PassInfo>& PipelinePasses();

struct PipelineOptions {
  bool fuse = true;  // false: canonicalisation only
  // Called after every pass with its name and the graph (for --dump-after).
  std::function<void(const std::string& pass, const Graph& graph)> after_pass;
};

// Canonicalisation passes to a fixed point. Typed graph in, typed graph out.
absl::Status RunCanonicalization(Graph& graph, const PipelineOptions& options = {});
// Fusion passes, in order; returns what they formed and rejected (groups as
// FinalGroups lists them).
absl::StatusOr<FusionReport> RunFusion(Graph& graph, const PipelineOptions& options = {});

// The groups as the user should read them, from the groups in the order the passes
// formed them: a group extended later under the same name is listed once, in its
// final form; a group that became a member of a later group (merged siblings taken
// as an epilogue's anchor) is folded into it, members spliced in place and passes
// joined ("fuse-siblings+fuse-epilogue").
std::vector<FusionReport::Group> FinalGroups(const std::vector<FusionReport::Group>& formed);

// InvalidArgument naming the passes when `name` is not one of them.
absl::Status CheckPassName(const std::string& name);

}  // namespace kiln
