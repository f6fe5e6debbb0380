// Shared pieces of the quantized ops (QuantizeLinear, DequantizeLinear, MatMulInteger,
// QLinearMatMul, ConvInteger, QLinearConv) for their CPU references and GPU kernels
// (codegen/ops/quantized.cc). Internal to kiln.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace kiln::ops {

// The range an 8-bit quantized dtype saturates to.
inline int64_t QuantMin(DType t) { return t == DType::kInt8 ? -128 : 0; }
inline int64_t QuantMax(DType t) { return t == DType::kInt8 ? 127 : 255; }

// Fails unless input `i` of `node` is int8 or uint8 (`what` names it).
absl::Status RequireQuantized(const Node& node, int i, const char* what);

// How a scale or zero point of a Quantize/DequantizeLinear applies to x: one value,
// or one per index along `axis` (x's dim there). Errors name the node.
struct PerAxis {
  bool per_axis = false;
  int64_t axis = 0;
  int64_t inner = 1;  // elements of x after `axis` (the index along it is (i / inner) % dim)
  int64_t dim = 1;
};
absl::StatusOr<PerAxis> QuantizationAxis(const Node& node, int scale_input);

// An integer matrix product C[b, m, n] = sum_k (A[b, m, k] - za[m]) * (B[b, k, n] -
// zb[n]) with numpy batch broadcasting; zero points are scalars or per row of A /
// per column of B (absent: 0).
struct IntMatMulPlan {
  Shape out;
  int64_t m = 0, n = 0, k = 0;
  int64_t batches = 1;
  std::vector<int64_t> a_batch, b_batch;  // per output batch: the operand's matrix index
  bool a_zp_per_row = false, b_zp_per_col = false;
};
absl::StatusOr<IntMatMulPlan> PlanIntMatMul(const Node& node, int a, int b, int a_zp, int b_zp);
// The int32 products (as int64) of the plan over the inputs' values.
std::vector<int64_t> IntMatMul(const IntMatMulPlan& p, const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                               const std::vector<int64_t>& a_zp, const std::vector<int64_t>& b_zp);

// An integer convolution, y[n, m, ...] = sum over the group's channels and taps of
// (x - x_zp) * (w - w_zp[m]) (w_zp a scalar or one per output channel), with Conv's
// attributes; output shape `out`.
struct IntConvPlan {
  Shape out;
  std::vector<int64_t> strides, dilations, pads_begin;
  int64_t group = 1;
};
absl::StatusOr<IntConvPlan> PlanIntConv(const Node& node, int x, int w);
std::vector<int64_t> IntConv(const IntConvPlan& p, const Shape& xs, const Shape& ws, const std::vector<int64_t>& x,
                             const std::vector<int64_t>& w, int64_t x_zp, const std::vector<int64_t>& w_zp);

// round-half-to-even(v) + zp saturated to `to`'s range (NaN counts as 0).
int64_t Requantize(double v, int64_t zp, DType to);

}  // namespace kiln::ops
