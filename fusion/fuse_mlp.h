// FuseMlp ("fuse-mlp"): two chained matmul+epilogue groups over a handful of rows
// become one FusedGroup (pattern "mlp") that codegen runs as one kernel
// (codegen/ops/mlp.cc): the squeeze-excitation gate of EfficientNet and MobileNetV3,
// fc1 + activation then fc2 + sigmoid on the pooled [N, 1, 1, C] map, which is two
// tensor-core GEMMs of N rows each, two launches of a few microseconds, otherwise.
//
// Pattern: G2 = FusedGroup "matmul+epilogue" whose MatMul reads as A the only output
// of G1 = FusedGroup "matmul+epilogue", read by G2 alone and not a graph output. G1's
// A is a pooled map, [N, 1, ..., 1, K] (one row per image; a short sequence's FFN,
// [B, S, H], stays on the tensor-core GEMMs whatever its size). Both
// MatMuls are plain (no layout flags) with constant 2-D weights [K, N]; the rows
// M = numel(A) / K1 are at most kMaxRows, K1 at most kMaxK, the hidden width N1 at
// most kMaxHidden, each weight at most kMaxWeightElements elements, all floats.
// Every CTA of the kernel reads W1 whole and the tensor-core GEMMs get no work from
// it, so the rows stay few: a gate at
// batch 1 to 8, not a 7x7 map's projection and next expansion (49 rows at batch 1).
// Math: unchanged (the body is both groups' members); the kernel keeps G1's result
// in fp32 between the two products instead of rounding it to the storage dtype.
//
// Runs after fuse-epilogue (which forms both groups) and before fuse-pointwise. The
// new group keeps G2's name; the report lists it once, with G1's members and passes.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fusion/fusion_report.h"
#include "graph/graph.h"

namespace kiln {

class FuseMlp {
 public:
  static constexpr int64_t kMaxRows = 8;
  // The widest hidden layer taken: the kernel gives each column (vector) of W1 a
  // thread of its 512, and the weights' limit bounds it further.
  static constexpr int64_t kMaxHidden = 512;
  static constexpr int64_t kMaxK = 4096;
  static constexpr int64_t kMaxWeightElements = 128 * 1024;

  explicit FuseMlp(FusionReport* report = nullptr) : report_(report) {}
  absl::string_view name() const { return "fuse-mlp"; }
  absl::StatusOr<bool> Run(Graph& graph);

 private:
  FusionReport* report_;
};

}  // namespace kiln
