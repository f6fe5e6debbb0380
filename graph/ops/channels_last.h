// The kiln-internal channels-last (NHWC) layout of Conv, MaxPool, AveragePool and
// GlobalAveragePool: the `channels_last` attribute, the NCHW <-> NHWC axis
// permutations, and CPU evaluation through the NCHW form. Internal to kiln.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace kiln::ops {

// The kiln-internal int attribute `channels_last` of Conv, MaxPool, AveragePool and
// GlobalAveragePool (default 0; set by the to-channels-last pass). When 1, X is
// [N, H, W, C] and the output is [N, OH, OW, OC]; Conv's W is [OC, KH, KW, C/group]
// (cuDNN's KRSC). Fails unless the value is 0 or 1, and, for 1, unless input 0 has
// rank 4 (channels-last covers 2-D spatial ops only).
absl::StatusOr<bool> ChannelsLast(const Node& node);

// Axis permutations between NCHW and NHWC: out.shape[i] = in.shape[perm[i]]
// (apply with PermuteAxes, graph/ops/data_movement.h).
inline constexpr int64_t kNchwToNhwc[4] = {0, 2, 3, 1};
inline constexpr int64_t kNhwcToNchw[4] = {0, 3, 1, 2};

// The CPU reference of a channels-last node through its NCHW form: the first
// `permuted` inputs go NHWC -> NCHW (the rest as they are), `nchw` computes an
// [N, C, H, W] output from them, which lands in `y` ([N, H, W, C]) permuted back.
using NchwEval = std::function<absl::Status(absl::Span<const Tensor* const> in, Tensor& y)>;
absl::Status EvalThroughNchw(absl::Span<const Tensor* const> in, size_t permuted, Tensor& y, const NchwEval& nchw);

}  // namespace kiln::ops
