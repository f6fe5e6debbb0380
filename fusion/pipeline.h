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
// Fusion passes, in order; returns what they formed and rejected.
absl::StatusOr<FusionReport> RunFusion(Graph& graph, const PipelineOptions& options = {});

// InvalidArgument naming the passes when `name` is not one of them.
absl::Status CheckPassName(const std::string& name);

}  // namespace kiln
