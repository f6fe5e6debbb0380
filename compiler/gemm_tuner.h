// Autotuning of the generated tensor-core GEMM (`kiln compile --tune`): for every
// distinct GEMM problem among a graph's MatMul groups (codegen::TuningKey: arch,
// dtype, shape, layout, group signature), compile the candidate tile configs of the
// family that runs it (codegen::UsesSm90Gemm: on sm_90a the sm90 family's
// ops::Sm90CandidateConfigs, else the sm_80 template's ops::GemmCandidateConfigs) with
// NVRTC in parallel, time each on the local GPU and store the fastest in the tuning
// database (codegen/tuning_db.h), which every later compile reads, on any machine.
//
// Measuring: one buffer per group input and output in device memory, inputs filled
// with uniform random values in [-1, 1) (a fixed seed; integer inputs zero), and one
// kernel workspace as large as the split-K candidates ask (runtime/tensor_map.h). Per
// candidate: one launch to warm up, then `samples` timed batches (CUDA events around
// back-to-back launches, each batch at least `min_sample_ms` long); the time is the
// median batch's per-launch time. Inputs stay in L2 across launches, as weights and
// activations of this size would in a model run; the ranking is what matters.
// Checking: every candidate's output is compared with the heuristic config's (max
// |got - want| / max |want| <= 1e-2 for fp16/fp32 outputs, 5e-2 for bf16; NaN where
// the heuristic has none fails); one that fails, does not compile or does not launch
// is left out and named in the row's note.
// Deciding: a candidate replaces the heuristic only when at least 1% faster (below
// that, timing noise). The problems run largest first (FLOPs); before each problem
// and each candidate the budget is checked: once it is spent, the problem in progress
// keeps the best config measured so far and the rest keep their earlier entries or
// the heuristic, and the report says so.
// cuBLASLt (GemmTuneOptions::library: auto mode on sm_90a): for a group cuBLASLt can
// run in one call (codegen::LibraryKernelName), its call is timed the same way, on
// the same buffers, and checked against the heuristic's output with the same
// tolerance; the entry stores its time (TuningEntry::library_ms), and auto mode gives
// the group to cuBLASLt when that is at least 1% under the family's best
// (codegen::LibraryMeasuredFaster).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/kernel_cache.h"
#include "codegen/tuning_db.h"
#include "graph/graph.h"
#include "runtime/bundle.h"

namespace kiln {

struct GemmTuneOptions {
  std::string arch;             // the bundle's; must be the local GPU's
  double budget_seconds = 60;   // compiles and measurements of all problems
  const codegen::KernelCache* cache = nullptr;  // for the candidates' modules
  int samples = 9;              // timed batches per candidate
  double min_sample_ms = 0.3;   // launches per batch: enough for this long
  bool library = false;         // also time cuBLASLt where it takes a group whole
  // ... except for these groups: a dynamic graph's run-time-row GEMMs specialised at the
  // opt sizes, which run on the family at every size (and whose stacked products keep
  // the largest sizes' stride, which cuBLASLt's call would write at).
  std::vector<const Node*> without_library;
};

struct GemmTuneRow {
  codegen::TuningKey key;
  std::vector<std::string> groups;  // the graph nodes with this problem
  codegen::GemmTileConfig heuristic, best;  // the family's configs (sm90 on sm_90a where it runs the group)
  double heuristic_ms = 0, best_ms = 0;  // 0: not measured
  double library_ms = 0;                 // cuBLASLt's call for the group; 0: not measured
  bool library_faster = false;           // ... and stored as faster (auto mode takes it)
  int candidates = 0;  // configs compiled (the heuristic's included)
  int timed = 0;       // ... measured within the budget
  double max_rel_error = 0;  // the winner's output against the heuristic's
  bool stored = false;       // written to the database
  std::string note;          // rejected candidates, the budget, ...
};

// What tuning did (and, for every compile, which database it read).
struct GemmTuneReport {
  std::string db_path;                // "" when no database is used
  std::vector<std::string> warnings;  // the database's skipped lines, ...
  bool tuned = false;                 // --tune ran
  std::string device;                 // the GPU measured on
  std::vector<GemmTuneRow> rows;      // largest problem first
  bool budget_exhausted = false;
  double budget_seconds = 0, seconds = 0;
  std::string note;  // e.g. why there was nothing to tune
};

// OK when the local GPU can run `arch` code for measuring; FailedPrecondition
// otherwise: "--tune needs a GPU; no CUDA GPU (...)" or an arch mismatch that names
// the --arch to use.
absl::Status CheckTuningDevice(const std::string& arch);

// Tunes the MatMul groups among `nodes` (others are ignored) and stores the results
// in `db` (Put, then Save). Errors: no usable GPU, the database cannot be written.
// Candidates that fail are notes, not errors.
absl::StatusOr<GemmTuneReport> TuneGemmGroups(const std::vector<Node*>& nodes, codegen::TuningDb& db,
                                              const GemmTuneOptions& options);

// How many of a bundle's MatMul groups the tuning database sent to cuBLASLt (auto mode
// on sm_90a), from the fusion report's notes (codegen::kTunedToLibraryReason).
int GroupsTunedToLibrary(const bundle::Manifest& manifest);

// The table `kiln compile --tune` prints: per problem the heuristic's and the best
// config with their times and the speed-up, cuBLASLt's time where measured (and
// whether auto mode takes it), then the budget line.
std::string GemmTuneTable(const GemmTuneReport& report);

}  // namespace kiln
