// The pass pipeline of `kiln compile`: every transform between the imported graph
// and the graph the bundle carries, in one ordered list (Pipeline()), each pass with
// a line on why it sits where it does and when it runs. `kiln compile --dump-after
// help` prints the list; --dump-after PASS, --time-passes and the verification after
// every pass (CompileOptions::verify_passes) come from it.
//
// Stages, in order: canonicalisation (one round of passes repeated to a fixed point),
// layout, precision, fusion, and the expansion of groups no GPU kernel takes.
// Preconditions: the graph is typed and topologically sorted (the importer's
// output). Postconditions: the same, with storage dtypes and fused groups.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "codegen/op_kernels.h"
#include "compiler/compile_options.h"
#include "fusion/fusion_report.h"
#include "graph/graph.h"

namespace kiln {

// What passes read besides the graph, and what they leave for the driver.
struct PassContext {
  explicit PassContext(const CompileOptions& options, const codegen::KernelOptions& kernel_options)
      : options(options), kernel_options(kernel_options) {}
  const CompileOptions& options;
  const codegen::KernelOptions& kernel_options;
  // Filled by the fusion passes and the expansion.
  FusionReport report;
  // calibrate-fp16's result, lower-precision's input: nodes that stay in f32.
  absl::flat_hash_set<std::string> float32_nodes;
  // Whether to-channels-last ran (pad-conv-channels runs only then).
  bool channels_last = false;
  // How many groups expand-groups-without-kernels expanded.
  int expanded = 0;
  // Whether a fusion pass ran (the report's nodes_before is counted before the first).
  bool fusion_started = false;
};

enum class PassStage { kCanonicalize, kLayout, kPrecision, kFusion, kExpansion };

struct Pass {
  std::string name;  // "fold-batch-norm", "fuse-epilogue", ...
  PassStage stage;
  std::string why;   // why it sits where it does
  std::string when;  // when it runs, in the user's words; "" = always
  // Whether it runs on this graph with these options (and what earlier passes
  // found); nullptr: always.
  std::function<bool(const Graph&, const PassContext&)> enabled;
  // Runs it; returns whether it changed the graph.
  std::function<absl::StatusOr<bool>(Graph&, PassContext&)> run;
};

// Every pass, in order.
const std::vector<Pass>& Pipeline();

// The list as `kiln compile --dump-after help` prints it: by stage, each pass with
// why it sits there and, for conditional passes, when it runs.
std::string PipelineHelp();

// InvalidArgument naming the passes when `name` is not one of them.
absl::Status CheckPassName(const std::string& name);

// One line of --time-passes: a pass (its runs summed over canonicalisation rounds)
// or a later stage of the driver ("tune-gemms", "plan-memory", "assign-kernels").
struct PassTiming {
  std::string pass;
  int runs = 0;
  bool changed = false;  // any run changed the graph
  double seconds = 0;
  int nodes_after = 0;
};

// The --time-passes table.
std::string PassTimingTable(const std::vector<PassTiming>& timings);

// Runs the passes of Pipeline() that are enabled for `context`, in order:
// canonicalisation to a fixed point, then each later pass once. Calls
// context.options.after_pass after every pass run, verifies the graph after each
// when options.verify_passes, and appends to *options.pass_timings when set.
// Errors start with the pass's name.
absl::Status RunPipeline(Graph& graph, PassContext& context);

// Subsets of the pipeline with default options, for tests and tools.
// Canonicalisation to a fixed point; returns whether anything changed.
absl::StatusOr<bool> RunCanonicalization(Graph& graph);
// The fusion passes (no expansion); returns what they formed and rejected.
absl::StatusOr<FusionReport> RunFusion(Graph& graph);

}  // namespace kiln
