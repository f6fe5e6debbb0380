// Tests for ArgMax, ArgMin, CumSum, the trigonometric and hyperbolic unary ops,
// ReduceL1, ReduceLogSum, ReduceLogSumExp, Hardmax, ThresholdedRelu, Shrink, TopK,
// ConvTranspose and Resize.
#include <gtest/gtest.h>

#include "graph/ops/op_test_util.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/evaluate.h"
#include "graph/graph.h"
#include "graph/infer_shapes.h"

namespace kiln {
namespace {

using namespace op_test;  // NOLINT: test helpers

void ExpectInts(const Tensor& t, DType dtype, Shape shape, const std::vector<int64_t>& want) {
  ASSERT_EQ(t.dtype(), dtype) << t.TypeString();
  ASSERT_EQ(t.shape(), shape) << t.TypeString();
  EXPECT_EQ(t.ToInt64(), want);
}

// ---- ArgMax / ArgMin ------------------------------------------------------------

TEST(ExtraOpsArgTest, ArgMaxKeepdimsAndNegativeAxis) {
  const Tensor x = F32({2, 3}, {1, 5, 5, 7, 2, 7});
  ExpectInts(Run1("ArgMax", {X(x)}, {{"axis", 1}}), DType::kInt64, {2, 1}, {1, 0});
  ExpectInts(Run1("ArgMax", {X(x)}, {{"axis", -1}, {"select_last_index", 1}}), DType::kInt64, {2, 1}, {2, 2});
  ExpectInts(Run1("ArgMax", {X(x)}, {{"axis", 0}, {"keepdims", 0}}), DType::kInt64, {3}, {1, 0, 1});
}

TEST(ExtraOpsArgTest, ArgMinIntegerAndF16) {
  ExpectInts(Run1("ArgMin", {X(I32({3, 2}, {4, -1, 2, -1, 2, 9}))}, {{"keepdims", 0}}), DType::kInt64, {2},
             {1, 0});
  ExpectInts(Run1("ArgMin", {X(I32({3, 2}, {4, -1, 2, -1, 2, 9}))}, {{"select_last_index", 1}}),
             DType::kInt64, {1, 2}, {2, 1});
  ExpectInts(Run1("ArgMin", {X(F16({4}, {0.5f, -2.f, 3.f, -2.f}))}), DType::kInt64, {1}, {1});
}

TEST(ExtraOpsArgTest, Errors) {
  EXPECT_NE(ErrorOf("ArgMax", {X(F32({2, 3}, {1, 2, 3, 4, 5, 6}))}, {{"axis", 2}}).find("axis 2 is out of range"),
            std::string::npos);
  EXPECT_NE(ErrorOf("ArgMin", {X(F32({}, {1}))}).find("scalar"), std::string::npos);
}

// ---- CumSum -----------------------------------------------------------------------

TEST(ExtraOpsCumSumTest, ModesAndAxes) {
  const Tensor x = F32({5}, {1, 2, 3, 4, 5});
  ExpectNear(Run1("CumSum", {X(x), C(Ints({0}))}), {5}, {1, 3, 6, 10, 15});
  ExpectNear(Run1("CumSum", {X(x), C(Ints({0}))}, {{"exclusive", 1}}), {5}, {0, 1, 3, 6, 10});
  ExpectNear(Run1("CumSum", {X(x), C(Ints({0}))}, {{"reverse", 1}}), {5}, {15, 14, 12, 9, 5});
  ExpectNear(Run1("CumSum", {X(x), C(Ints({0}))}, {{"reverse", 1}, {"exclusive", 1}}), {5},
             {14, 12, 9, 5, 0});
  const Tensor m = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  ExpectNear(Run1("CumSum", {X(m), C(I32({}, {-1}))}), {2, 3}, {1, 3, 6, 4, 9, 15});
  ExpectNear(Run1("CumSum", {X(m), C(Ints({0}))}), {2, 3}, {1, 2, 3, 5, 7, 9});
  ExpectInts(Run1("CumSum", {X(I64({4}, {1, -2, 3, 10})), C(Ints({0}))}), DType::kInt64, {4}, {1, -1, 2, 12});
  ExpectNear(Run1("CumSum", {X(BF16({3}, {0.5f, 1.5f, 2.f})), C(Ints({0}))}), {3}, {0.5f, 2.f, 4.f}, 1e-2f);
}

TEST(ExtraOpsCumSumTest, Errors) {
  EXPECT_NE(ErrorOf("CumSum", {X(F32({2}, {1, 2})), C(Ints({1}))}).find("out of range"), std::string::npos);
  auto r = RunOp("CumSum", {X(F32({2}, {1, 2})), X(Ints({0}))});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(r.status().message()).find("compile-time constant"), std::string::npos);
}

// ---- Trigonometric / hyperbolic -------------------------------------------------------

TEST(ExtraOpsTrigTest, Values) {
  const std::vector<float> v = {-0.5f, 0.f, 0.25f, 0.9f};
  const Tensor x = F32({2, 2}, v);
  struct Case {
    const char* op;
    double (*fn)(double);
  };
  const Case cases[] = {{"Cos", std::cos},   {"Sin", std::sin},   {"Tan", std::tan},   {"Acos", std::acos},
                        {"Asin", std::asin}, {"Atan", std::atan}, {"Cosh", std::cosh}, {"Sinh", std::sinh},
                        {"Asinh", std::asinh}, {"Atanh", std::atanh}};
  for (const Case& c : cases) {
    std::vector<float> want;
    for (float f : v) want.push_back(static_cast<float>(c.fn(f)));
    SCOPED_TRACE(c.op);
    ExpectNear(Run1(c.op, {X(x)}), {2, 2}, want);
  }
  ExpectNear(Run1("Acosh", {X(F32({3}, {1.f, 2.f, 10.f}))}), {3},
             {0.f, static_cast<float>(std::acosh(2.0)), static_cast<float>(std::acosh(10.0))});
  EXPECT_TRUE(std::isnan(Run1("Acos", {X(F32({1}, {2.f}))}).ToFloat()[0]));
}

TEST(ExtraOpsTrigTest, HalfPrecisionAndErrors) {
  const Tensor h = Run1("Sin", {X(F16({2}, {1.f, -2.f}))});
  EXPECT_EQ(h.dtype(), DType::kFloat16);
  ExpectNear(h, {2}, {std::sin(1.f), std::sin(-2.f)}, 2e-3f);
  EXPECT_FALSE(ErrorOf("Cos", {X(I64({1}, {1}))}).empty());
}

// ---- ReduceL1 / ReduceLogSum / ReduceLogSumExp -------------------------------------

TEST(ExtraOpsReduceTest, L1AndLogSum) {
  const Tensor x = F32({2, 3}, {1, -2, 3, -4, 5, -6});
  ExpectNear(Run1("ReduceL1", {X(x), C(Ints({1}))}), {2, 1}, {6, 15});
  ExpectNear(Run1("ReduceL1", {X(x)}, {{"keepdims", 0}}), {}, {21});
  ExpectInts(Run1("ReduceL1", {X(I64({3}, {-1, 2, -3})), C(Ints({0}))}, {{"keepdims", 0}}), DType::kInt64, {},
             {6});
  const Tensor p = F32({2, 2}, {1, 2, 3, 4});
  ExpectNear(Run1("ReduceLogSum", {X(p), C(Ints({-2}))}), {1, 2}, {std::log(4.f), std::log(6.f)});
  ExpectNear(Run1("ReduceLogSum", {X(F16({2, 2}, {1, 2, 3, 4}))}, {{"keepdims", 0}}), {}, {std::log(10.f)},
             1e-2f);
}

TEST(ExtraOpsReduceTest, LogSumExpIsStable) {
  const Tensor x = F32({2, 3}, {1, 2, 3, 1000, 1000, 1000});
  const float l123 = static_cast<float>(std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)));
  ExpectNear(Run1("ReduceLogSumExp", {X(x), C(Ints({1}))}, {{"keepdims", 0}}), {2},
             {l123, 1000.f + std::log(3.f)});
  ExpectNear(Run1("ReduceLogSumExp", {X(F32({2, 2}, {0, 0, 0, 0})), C(Ints({0}))}), {1, 2},
             {std::log(2.f), std::log(2.f)});
  const float ninf = -INFINITY;
  const std::vector<float> r = Run1("ReduceLogSumExp", {X(F32({2}, {ninf, ninf}))}).ToFloat();
  EXPECT_TRUE(std::isinf(r[0]) && r[0] < 0);
  EXPECT_NE(ErrorOf("ReduceLogSumExp", {X(x), C(Ints({0, 0}))}).find("more than once"), std::string::npos);
}

// ---- Hardmax / ThresholdedRelu / Shrink ----------------------------------------------

TEST(ExtraOpsActivationTest, Hardmax) {
  const Tensor x = F32({2, 3}, {1, 3, 3, -1, -2, -5});
  ExpectNear(Run1("Hardmax", {X(x)}), {2, 3}, {0, 1, 0, 1, 0, 0});
  ExpectNear(Run1("Hardmax", {X(x)}, {{"axis", 0}}), {2, 3}, {1, 1, 1, 0, 0, 0});
  EXPECT_NE(ErrorOf("Hardmax", {X(x)}, {{"axis", 3}}).find("out of range"), std::string::npos);
}

TEST(ExtraOpsActivationTest, ThresholdedReluAndShrink) {
  const Tensor x = F32({5}, {-2, -0.5f, 0.5f, 1.f, 2.f});
  ExpectNear(Run1("ThresholdedRelu", {X(x)}), {5}, {0, 0, 0, 0, 2});
  ExpectNear(Run1("ThresholdedRelu", {X(x)}, {{"alpha", 0.4f}}), {5}, {0, 0, 0.5f, 1, 2});
  ExpectNear(Run1("Shrink", {X(x)}), {5}, {-2, 0, 0, 1, 2});
  ExpectNear(Run1("Shrink", {X(x)}, {{"lambd", 0.75f}, {"bias", 0.5f}}), {5}, {-1.5f, 0, 0, 0.5f, 1.5f});
  ExpectInts(Run1("Shrink", {X(I64({3}, {-3, 0, 4}))}, {{"lambd", 1.f}, {"bias", 1.f}}), DType::kInt64, {3},
             {-2, 0, 3});
  ExpectNear(Run1("ThresholdedRelu", {X(BF16({2}, {0.5f, 3.f}))}), {2}, {0, 3}, 1e-2f);
  EXPECT_NE(ErrorOf("Shrink", {X(x)}, {{"lambd", "x"}}).find("lambd"), std::string::npos);
}

// ---- TopK -------------------------------------------------------------------------

TEST(ExtraOpsTopKTest, LargestSmallestAndTies) {
  const Tensor x = F32({2, 4}, {1, 4, 4, 2, 0, -1, 3, 3});
  auto r = RunOp("TopK", {X(x), C(Ints({2}))}, {}, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear((*r)[0], {2, 2}, {4, 4, 3, 3});
  ExpectInts((*r)[1], DType::kInt64, {2, 2}, {1, 2, 2, 3});
  r = RunOp("TopK", {X(x), C(Ints({3}))}, {{"largest", 0}, {"axis", 1}}, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear((*r)[0], {2, 3}, {1, 2, 4, -1, 0, 3});
  ExpectInts((*r)[1], DType::kInt64, {2, 3}, {0, 3, 1, 1, 0, 2});
  r = RunOp("TopK", {X(I32({3, 2}, {5, 1, 7, 1, 6, 2})), C(Ints({1}))}, {{"axis", 0}}, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectInts((*r)[0], DType::kInt32, {1, 2}, {7, 2});
  ExpectInts((*r)[1], DType::kInt64, {1, 2}, {1, 2});
}

TEST(ExtraOpsTopKTest, Errors) {
  EXPECT_NE(ErrorOf("TopK", {X(F32({3}, {1, 2, 3})), C(Ints({4}))}, {}, 2).find("exceeds"), std::string::npos);
}

// ---- ConvTranspose ----------------------------------------------------------------------

// Scatter-form transposed conv, 1 spatial dim, from the definition.
std::vector<float> NaiveConvT1D(const std::vector<float>& x, const std::vector<float>& w, int64_t c, int64_t l,
                                int64_t mg, int64_t k, int64_t group, int64_t s, int64_t d, int64_t pad,
                                int64_t out_len) {
  const int64_t m = mg * group, cg = c / group;
  std::vector<float> y(m * out_len, 0.f);
  for (int64_t ic = 0; ic < c; ++ic) {
    const int64_t g = ic / cg;
    for (int64_t oc = 0; oc < mg; ++oc) {
      for (int64_t i = 0; i < l; ++i) {
        for (int64_t t = 0; t < k; ++t) {
          const int64_t o = i * s + t * d - pad;
          if (o >= 0 && o < out_len) y[(g * mg + oc) * out_len + o] += x[ic * l + i] * w[(ic * mg + oc) * k + t];
        }
      }
    }
  }
  return y;
}

TEST(ExtraOpsConvTransposeTest, Simple2D) {
  // 1x1x2x2 input, 1x1x2x2 ones kernel, stride 1: each output sums overlapping inputs.
  const Tensor x = F32({1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor w = F32({1, 1, 2, 2}, {1, 1, 1, 1});
  ExpectNear(Run1("ConvTranspose", {X(x), X(w)}), {1, 1, 3, 3}, {1, 3, 2, 4, 10, 6, 3, 7, 4});
  // Stride 2 places the kernel copies side by side; bias adds.
  ExpectNear(Run1("ConvTranspose", {X(x), X(w), X(Floats({0.5f}))}, {{"strides", std::vector<int64_t>{2, 2}}}),
             {1, 1, 4, 4}, {1.5, 1.5, 2.5, 2.5, 1.5, 1.5, 2.5, 2.5, 3.5, 3.5, 4.5, 4.5, 3.5, 3.5, 4.5, 4.5});
}

TEST(ExtraOpsConvTransposeTest, Grouped1DMatchesNaive) {
  const int64_t c = 4, l = 5, mg = 3, k = 3, group = 2, s = 2, d = 2, pad = 1;
  std::vector<float> x(c * l), w(c * mg * k);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 11) - 5.f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 5) % 7) * 0.25f - 0.75f;
  const int64_t out_len = s * (l - 1) + 1 + (k - 1) * d + 1 - 2 * pad;  // output_padding 1
  const std::vector<float> want = NaiveConvT1D(x, w, c, l, mg, k, group, s, d, pad, out_len);
  ExpectNear(Run1("ConvTranspose", {X(F32({1, c, l}, x)), X(F32({c, mg, k}, w))},
                  {{"group", group},
                   {"strides", std::vector<int64_t>{s}},
                   {"dilations", std::vector<int64_t>{d}},
                   {"pads", std::vector<int64_t>{pad, pad}},
                   {"output_padding", std::vector<int64_t>{1}}}),
             {1, group * mg, out_len}, want);
}

TEST(ExtraOpsConvTransposeTest, OutputShapeAndAutoPad) {
  const Tensor x = F32({1, 1, 3}, {1, 2, 3});
  const Tensor w = F32({1, 1, 3}, {1, 1, 1});
  // Full output (stride 2) is 7 long: 1 1 3 2 5 3 3; output_shape 6 trims one at the start (Else branch).
  ExpectNear(Run1("ConvTranspose", {X(x), X(w)},
                  {{"strides", std::vector<int64_t>{2}}, {"output_shape", std::vector<int64_t>{6}}}),
             {1, 1, 6}, {1, 3, 2, 5, 3, 3});
  // SAME_UPPER: output 3*2 = 6, total padding 1 goes to the end.
  ExpectNear(Run1("ConvTranspose", {X(x), X(w)}, {{"strides", std::vector<int64_t>{2}}, {"auto_pad", "SAME_UPPER"}}),
             {1, 1, 6}, {1, 1, 3, 2, 5, 3});
  ExpectNear(Run1("ConvTranspose", {X(F16({1, 1, 3}, {1, 2, 3})), X(F16({1, 1, 3}, {1, 1, 1}))}), {1, 1, 5},
             {1, 3, 6, 5, 3}, 1e-2f);
}

TEST(ExtraOpsConvTransposeTest, Errors) {
  const Tensor x = F32({1, 2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_NE(ErrorOf("ConvTranspose", {X(x), X(F32({3, 1, 2}, {1, 1, 1, 1, 1, 1}))}).find("expects 3"),
            std::string::npos);
  EXPECT_NE(ErrorOf("ConvTranspose", {X(x), X(F32({2, 1, 2}, {1, 1, 1, 1}))}, {{"strides", std::vector<int64_t>{1, 1}}})
                .find("strides has 2 values"),
            std::string::npos);
}

// ---- Resize ------------------------------------------------------------------------------

TEST(ExtraOpsResizeTest, NearestModes) {
  const Tensor x = F32({1, 1, 2, 2}, {1, 2, 3, 4});
  ExpectNear(Run1("Resize", {X(x), None(), C(Floats({1, 1, 2, 3}))}), {1, 1, 4, 6},
             {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
  // 1-D: 4 -> 3 with asymmetric coords: x_orig = o * 4/3 = 0, 1.33, 2.67.
  const Tensor v = F32({4}, {10, 20, 30, 40});
  ExpectNear(Run1("Resize", {X(v), None(), None(), C(Ints({3}))},
                  {{"coordinate_transformation_mode", "asymmetric"}, {"nearest_mode", "floor"}}),
             {3}, {10, 20, 30});
  ExpectNear(Run1("Resize", {X(v), None(), None(), C(Ints({3}))},
                  {{"coordinate_transformation_mode", "asymmetric"}, {"nearest_mode", "ceil"}}),
             {3}, {10, 30, 40});
  // 2 -> 4 asymmetric: x_orig = 0, 0.5, 1, 1.5; ties go down or up.
  const Tensor t = F32({2}, {1, 2});
  ExpectNear(Run1("Resize", {X(t), None(), C(Floats({2}))}, {{"coordinate_transformation_mode", "asymmetric"}}),
             {4}, {1, 1, 2, 2});
  ExpectNear(Run1("Resize", {X(t), None(), C(Floats({2}))},
                  {{"coordinate_transformation_mode", "asymmetric"}, {"nearest_mode", "round_prefer_ceil"}}),
             {4}, {1, 2, 2, 2});
}

TEST(ExtraOpsResizeTest, Linear) {
  const Tensor x = F32({1, 1, 2, 2}, {1, 2, 3, 4});
  // align_corners 2x2 -> 3x3: the midpoints average.
  ExpectNear(Run1("Resize", {X(x), None(), None(), C(Ints({1, 1, 3, 3}))},
                  {{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}}),
             {1, 1, 3, 3}, {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
  // half_pixel 2 -> 4: x_orig = -0.25, 0.25, 0.75, 1.25 (clamped at the edges).
  ExpectNear(Run1("Resize", {X(F32({2}, {0, 4})), None(), C(Floats({2}))}, {{"mode", "linear"}}), {4},
             {0, 1, 3, 4});
  ExpectNear(Run1("Resize", {X(F16({2}, {0, 4})), None(), C(Floats({2}))}, {{"mode", "linear"}}), {4},
             {0, 1, 3, 4}, 1e-2f);
  // axes + not_larger keeps the aspect ratio: scale min(4/2, 6/2) = 2.
  const Tensor r = Run1("Resize", {X(x), None(), None(), C(Ints({4, 6}))},
                        {{"axes", std::vector<int64_t>{2, 3}}, {"keep_aspect_ratio_policy", "not_larger"}});
  EXPECT_EQ(r.shape(), (Shape{1, 1, 4, 4}));
}

TEST(ExtraOpsResizeTest, Errors) {
  const Tensor x = F32({2, 2}, {1, 2, 3, 4});
  EXPECT_NE(ErrorOf("Resize", {X(x), None(), C(Floats({2}))}).find("scales has 1 values, expected 2"),
            std::string::npos);
  EXPECT_NE(ErrorOf("Resize", {X(x), None(), C(Floats({1, 1})), C(Ints({2, 2}))}).find("exactly one"),
            std::string::npos);
  EXPECT_NE(ErrorOf("Resize", {X(x), None(), C(Floats({1, 1}))}, {{"mode", "area"}}).find("unknown mode"),
            std::string::npos);
  auto r = RunOp("Resize", {X(x), None(), C(Floats({2, 2}))}, {{"mode", "linear"}, {"antialias", 1}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace kiln
