// The size-only steps of a dynamic bundle (issue 34): steps whose outputs depend on the
// run's sizes alone (graph/specialize.h SizeOnlyNodes: the masks and position ids that
// transformers build from the input's shape). The GPU executor computes them once per
// run size, here on the host with the reference evaluators on the graph specialised to
// that size, keeps the outputs that other steps (or the caller) read in a device copy
// with that size's state, and has a run copy them into the arena where their step
// would have run, instead of launching their kernels on every run.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/tensor.h"
#include "runtime/bundle.h"

namespace kiln {

struct SizeOnlySteps {
  std::vector<bool> size_only;           // per step (the graph's nodes, in order)
  std::vector<std::vector<int>> copies;  // per step: the outputs a run copies in
  bool any() const { return !size_only.empty(); }
};

// The size-only steps of `graph` (a bundle's, one node per step of `m`) and the
// outputs of them a run needs: those read by a step that runs on the device (a
// generated kernel's step: through a launch's pointer or tensor map) or by the caller. A view's output lies in its input's memory, so a wanted view makes its input
// wanted instead (the copy goes where the input is made). Empty for a static bundle,
// or when no step is size-only.
SizeOnlySteps FindSizeOnlySteps(const Graph& graph, const bundle::Manifest& m);

struct SizeOnlyOutput {
  int step, output;
  Tensor tensor;
};

// `steps`' outputs to copy (in step order), computed on `specialized` (the bundle's
// graph specialised to one run's sizes). `where` prefixes errors.
absl::StatusOr<std::vector<SizeOnlyOutput>> ComputeSizeOnlyOutputs(const SizeOnlySteps& steps,
                                                                   const Graph& specialized, const std::string& where);

}  // namespace kiln
