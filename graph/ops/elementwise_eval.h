// Element-wise reference evaluation of op files: unary and binary maps and
// variadic folds with broadcasting, fp32 for floating dtypes and int64 for
// integer and bool dtypes. Internal to graph/ops.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace kiln::ops {

// Element-wise evaluation. Floating inputs are computed as float with `ff`;
// integer and bool inputs as int64 with `fi` (pass nullptr when the op is only
// defined on floating types). The result is stored in out's dtype.
absl::Status EvalUnary(const Node& node, const Tensor& in, Tensor& out,
                       const std::function<float(float)>& ff,
                       const std::function<int64_t(int64_t)>& fi = nullptr);
absl::Status EvalBinary(const Node& node, const Tensor& a, const Tensor& b, Tensor& out,
                        const std::function<float(float, float)>& ff,
                        const std::function<int64_t(int64_t, int64_t)>& fi = nullptr);

// Element-wise fold over all present inputs broadcast together to out's shape:
// acc = in[0], then acc = f(acc, in[k]). Floating inputs fold in fp32 with `ff`
// (then `finish` maps each result, when given); integer and bool inputs fold in
// int64 with `fi` (nullptr when only defined on floating types). Inputs share a dtype.
absl::Status EvalVariadic(const Node& node, absl::Span<const Tensor* const> in, Tensor& out,
                          const std::function<float(float, float)>& ff,
                          const std::function<int64_t(int64_t, int64_t)>& fi = nullptr,
                          const std::function<float(float)>& finish = nullptr);

}  // namespace kiln::ops
