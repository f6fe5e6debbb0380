// CPU backend: runs a loaded bundle's steps on the reference evaluators inside one
// host arena of the planned size (so a wrong memory plan gives wrong numbers).
//
// Semantics. Each step copies its inputs out of the arena slices (or takes the weight
// tensors) that its bindings name, runs EvaluateNode on the bundle graph's node, and
// copies each output into the arena at its planned offset. The bundle's graph is the
// one lowered to its precision (graph/lower_precision.h): with fp16/bf16 every stored
// value and weight inside is f16/bf16 and only the inputs and outputs stay f32 (Casts
// at the boundary), so the CPU backend runs the same storage types as the GPU one,
// with the reference's fp32 math in between (results rounded to the storage type).
//
// Dynamic bundles (compiled for dim ranges, graph/specialize.h). A run binds the dim
// symbols from the feeds' shapes (an input outside its range is an error naming the
// input, the dim and the range), specialises the graph to them (the last few
// specialisations are kept) and runs the same steps with the specialised node, its
// types and its evaluated shape constants, in the arena planned for the largest sizes.
//
// Sharing. CpuProgram is the immutable part (graph, step nodes, weights: copied once
// out of the mapping, shared with the graph's constants); any number of CpuExecutors,
// one per session, share one program and each own only their arena. A CpuProgram is
// safe to use from several threads; a CpuExecutor runs one Run at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/evaluate.h"
#include "graph/graph.h"
#include "graph/tensor.h"
#include "kiln/profile.h"
#include "runtime/bundle.h"

namespace kiln {

class CpuProgram {
 public:
  // Rebuilds the graph, checks the bundle's steps against it and takes the weights.
  // `bundle` must outlive the program.
  static absl::StatusOr<std::shared_ptr<const CpuProgram>> Create(const Bundle& bundle);

  const Bundle& bundle() const { return *bundle_; }
  const Node& step_node(int s) const { return *step_nodes_[s]; }
  const std::vector<Tensor>& weights() const { return weights_; }
  // The bundle's graph (dynamic when the bundle is).
  const Graph& graph() const { return *graph_; }
  // Bytes of weight data held (once, whatever the number of executors).
  int64_t weight_bytes() const;

 private:
  CpuProgram() = default;
  const Bundle* bundle_ = nullptr;
  std::unique_ptr<Graph> graph_;
  std::vector<const Node*> step_nodes_;
  std::vector<Tensor> weights_;
};

class CpuExecutor {
 public:
  // A program of its own plus an arena. `bundle` must outlive the executor.
  static absl::StatusOr<std::unique_ptr<CpuExecutor>> Create(const Bundle& bundle);
  // An arena for a shared program.
  static absl::StatusOr<std::unique_ptr<CpuExecutor>> Create(std::shared_ptr<const CpuProgram> program);

  // Runs every step. `feeds` maps each input name to a tensor of exactly its dtype and
  // shape (of a shape inside the ranges, for a dynamic bundle). Returns the outputs in
  // signature order. Errors name the bundle and step.
  // When `step_ms` is set, it receives the wall time of each step in milliseconds.
  absl::StatusOr<std::vector<Tensor>> Run(const TensorMap& feeds, std::vector<double>* step_ms = nullptr);

  int64_t arena_bytes() const { return static_cast<int64_t>(arena_size_); }
  const CpuProgram& program() const { return *program_; }
  // Dynamic bundles: how many specialisations are cached (at most kMaxSpecializations).
  int cached_specializations() const { return static_cast<int>(specializations_.size()); }
  static constexpr int kMaxSpecializations = 8;

 private:
  CpuExecutor() = default;
  // `shape`: the value's shape in this run when it differs from the binding's (a
  // dynamic bundle's); the binding then holds at least its bytes.
  absl::StatusOr<Tensor> Read(const bundle::Binding& b, const Shape* shape = nullptr) const;
  absl::Status Write(const bundle::Binding& b, const Tensor& t, const std::string& what);
  // The graph specialised to the feeds' sizes (nullptr for a static bundle).
  absl::StatusOr<const Graph*> Specialization(const TensorMap& feeds);

  std::shared_ptr<const CpuProgram> program_;
  struct FreeDeleter {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, FreeDeleter> arena_;
  size_t arena_size_ = 0;
  // Oldest first.
  std::vector<std::pair<std::vector<int64_t>, std::unique_ptr<Graph>>> specializations_;
};

// Per-step profile (the implementation of `kiln run --profile` and Session::Profile):
// one warm-up Run, then `iterations` timed Runs; per step the median wall time, its
// share of the sum of step medians, kernel, op and ONNX nodes. InvalidArgument when
// iterations < 1; Run's errors otherwise.
absl::StatusOr<ProfileReport> ProfileCpuExecutor(CpuExecutor& executor, const TensorMap& feeds, int iterations);

// The report of `run_ms` (whole runs) and per_step_ms[s] (step s's times, one per
// run): medians and shares; shared by the CPU and GPU profilers.
ProfileReport MakeProfileReport(const Bundle& bundle, const std::string& device, const std::vector<double>& run_ms,
                                const std::vector<std::vector<double>>& per_step_ms);

}  // namespace kiln
