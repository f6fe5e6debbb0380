// The reduction of ScatterND and ScatterElements: how an update combines with the
// element it lands on. Internal to graph/ops.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace kiln::ops {

enum class ScatterReduction { kNone, kAdd, kMul, kMax, kMin };

// The node's `reduction` attribute ("none" when absent).
inline absl::StatusOr<ScatterReduction> GetScatterReduction(const Node& node) {
  absl::StatusOr<std::string> r = node.GetString("reduction", "none");
  if (!r.ok()) return r.status();
  if (*r == "none") return ScatterReduction::kNone;
  if (*r == "add") return ScatterReduction::kAdd;
  if (*r == "mul") return ScatterReduction::kMul;
  if (*r == "max") return ScatterReduction::kMax;
  if (*r == "min") return ScatterReduction::kMin;
  return node.Error(absl::StrCat("reduction '", *r, "' is not one of none, add, mul, max, min"));
}

template <typename T>
T ScatterCombine(ScatterReduction r, T old, T update) {
  switch (r) {
    case ScatterReduction::kNone: return update;
    case ScatterReduction::kAdd: return old + update;
    case ScatterReduction::kMul: return old * update;
    case ScatterReduction::kMax: return std::max(old, update);
    case ScatterReduction::kMin: return std::min(old, update);
  }
  return update;
}

// Applies `writes` (pairs of output offset, update offset, in order) to `out`, which
// holds a copy of the data: floating dtypes combine in fp32, the others in int64.
inline void ApplyScatter(ScatterReduction r, const Tensor& updates,
                         const std::vector<std::pair<int64_t, int64_t>>& writes, Tensor& out) {
  if (IsFloating(out.dtype())) {
    std::vector<float> o = out.ToFloat();
    const std::vector<float> u = updates.ToFloat();
    for (const auto& [to, from] : writes) o[to] = ScatterCombine(r, o[to], u[from]);
    const Tensor t = Tensor::FromFloat(out.dtype(), out.shape(), o);
    std::memcpy(out.mutable_raw_data(), t.raw_data(), t.nbytes());
  } else {
    std::vector<int64_t> o = out.ToInt64();
    const std::vector<int64_t> u = updates.ToInt64();
    for (const auto& [to, from] : writes) o[to] = ScatterCombine(r, o[to], u[from]);
    const Tensor t = Tensor::FromInt64(out.dtype(), out.shape(), o);
    std::memcpy(out.mutable_raw_data(), t.raw_data(), t.nbytes());
  }
}

}  // namespace kiln::ops
