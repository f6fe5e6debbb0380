// CPU backend: runs a loaded bundle's steps on the reference evaluators inside one
// host arena of the planned size (so a wrong memory plan gives wrong numbers).
//
// Semantics. Each step copies its inputs out of the arena slices (or takes the weight
// tensors) that its bindings name, runs EvaluateNode on the bundle graph's node, and
// copies each output into the arena at its planned offset. Math is the reference's:
// fp32 for floating-point ops in the graph's own dtypes. The bundle's precision
// (fp16/bf16/fp32) is the GPU's storage precision and does not affect the CPU backend.
// Weights are copied once out of the mapping into Tensors at Create().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/evaluate.h"
#include "graph/graph.h"
#include "graph/tensor.h"
#include "runtime/bundle.h"

namespace kiln {

class CpuExecutor {
 public:
  // Checks the bundle's steps against its graph and allocates the arena. `bundle`
  // must outlive the executor.
  static absl::StatusOr<std::unique_ptr<CpuExecutor>> Create(const Bundle& bundle);

  // Runs every step. `feeds` maps each input name to a tensor of exactly its dtype and
  // shape. Returns the outputs in signature order. Errors name the bundle and step.
  absl::StatusOr<std::vector<Tensor>> Run(const TensorMap& feeds);

  int64_t arena_bytes() const { return static_cast<int64_t>(arena_size_); }

 private:
  CpuExecutor() = default;
  absl::StatusOr<Tensor> Read(const bundle::Binding& b) const;
  absl::Status Write(const bundle::Binding& b, const Tensor& t, const std::string& what);

  const Bundle* bundle_ = nullptr;
  std::unique_ptr<Graph> graph_;
  std::vector<const Node*> step_nodes_;
  std::vector<Tensor> weights_;
  struct FreeDeleter {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, FreeDeleter> arena_;
  size_t arena_size_ = 0;
};

}  // namespace kiln
