// Tests for the NN ops' pooling, normalization, softmax and reduction: MaxPool,
// AveragePool, GlobalAveragePool, GlobalMaxPool, BatchNormalization, InstanceNormalization,
// LayerNormalization, RMSNormalization, LRN, Softmax, LogSoftmax and the Reduce* family
// (MatMul, Gemm and Conv: nn_ops_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "graph/evaluate.h"
#include "graph/graph.h"
#include "graph/infer_shapes.h"
#include "graph/ops/channels_last.h"
#include "graph/ops/data_movement.h"
#include "graph/ops/op_test_util.h"

namespace kiln {
namespace {

using namespace op_test;  // NOLINT: test helpers

// ---------------------------------------------------------------------------
// Pooling.

TEST(NnPoolTest, MaxPoolCeilModeDilationsAndSame) {
  Tensor x = F32({1, 1, 4, 4}, Iota(16));
  Attrs k3s2 = {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}}};
  ExpectNear(Run1("MaxPool", {X(x)}, k3s2), {1, 1, 1, 1}, {10});
  Attrs ceil = k3s2;
  ceil["ceil_mode"] = 1;
  ExpectNear(Run1("MaxPool", {X(x)}, ceil), {1, 1, 2, 2}, {10, 11, 14, 15});
  ExpectNear(Run1("MaxPool", {X(x)},
                  {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"dilations", std::vector<int64_t>{2, 2}}}),
             {1, 1, 2, 2}, {10, 11, 14, 15});
  ExpectNear(Run1("MaxPool", {X(F32({1, 1, 3, 3}, Iota(9)))},
                  {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"auto_pad", "SAME_UPPER"}}),
             {1, 1, 3, 3}, {4, 5, 5, 7, 8, 8, 7, 8, 8});
  ExpectNear(Run1("MaxPool", {X(F32({1, 1, 3, 3}, Iota(9)))},
                  {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"auto_pad", "SAME_LOWER"}}),
             {1, 1, 3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  // Padding never wins, even against negative values.
  ExpectNear(Run1("MaxPool", {X(F32({1, 1, 2, 2}, {-1, -2, -3, -4}))},
                  {{"kernel_shape", std::vector<int64_t>{2, 2}},
                   {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                   {"strides", std::vector<int64_t>{2, 2}}}),
             {1, 1, 2, 2}, {-1, -2, -3, -4});
}

TEST(NnPoolTest, MaxPoolOneAndThreeDimensionalAndUint8) {
  Tensor x = F32({1, 1, 5}, {1, 3, 2, 5, 4});
  Attrs a = {{"kernel_shape", std::vector<int64_t>{2}}, {"strides", std::vector<int64_t>{2}}};
  ExpectNear(Run1("MaxPool", {X(x)}, a), {1, 1, 2}, {3, 5});
  a["ceil_mode"] = 1;
  ExpectNear(Run1("MaxPool", {X(x)}, a), {1, 1, 3}, {3, 5, 4});
  ExpectNear(Run1("MaxPool", {X(F32({1, 2, 2, 2, 2}, Iota(16)))}, {{"kernel_shape", std::vector<int64_t>{2, 2, 2}}}),
             {1, 2, 1, 1, 1}, {7, 15});
  Tensor u8 = Tensor::FromInt64(DType::kUInt8, {1, 1, 2, 2}, {3, 250, 7, 1});
  Tensor y = Run1("MaxPool", {X(u8)}, {{"kernel_shape", std::vector<int64_t>{2, 2}}});
  EXPECT_EQ(y.dtype(), DType::kUInt8);
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{250}));
}

TEST(NnPoolTest, AveragePoolCountIncludePad) {
  Tensor x = F32({1, 1, 3, 3}, Iota(9, 1));
  Attrs a = {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 0, 0}}};
  ExpectNear(Run1("AveragePool", {X(x)}, a), {1, 1, 3, 3}, {1, 1.5f, 2.5f, 2.5f, 3, 4, 5.5f, 6, 7});
  a["count_include_pad"] = 1;
  ExpectNear(Run1("AveragePool", {X(x)}, a), {1, 1, 3, 3}, {0.25f, 0.75f, 1.25f, 1.25f, 3, 4, 2.75f, 6, 7});
}

TEST(NnPoolTest, AveragePoolCeilModeSameAndRanks) {
  Tensor x = F32({1, 1, 4, 4}, Iota(16));
  Attrs a = {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}}, {"ceil_mode", 1}};
  // Windows past the end are clipped and divide by what they cover.
  ExpectNear(Run1("AveragePool", {X(x)}, a), {1, 1, 2, 2}, {5, 6.5f, 11, 12.5f});
  a["count_include_pad"] = 1;
  ExpectNear(Run1("AveragePool", {X(x)}, a), {1, 1, 2, 2}, {5, 6.5f, 11, 12.5f});
  // SAME_UPPER on 3 with kernel 2: the last window covers one element plus padding.
  ExpectNear(Run1("AveragePool", {X(F32({1, 1, 3}, {1, 2, 4}))},
                  {{"kernel_shape", std::vector<int64_t>{2}}, {"auto_pad", "SAME_UPPER"}}),
             {1, 1, 3}, {1.5f, 3, 4});
  ExpectNear(Run1("AveragePool", {X(F32({1, 1, 3}, {1, 2, 4}))},
                  {{"kernel_shape", std::vector<int64_t>{2}}, {"auto_pad", "SAME_UPPER"}, {"count_include_pad", 1}}),
             {1, 1, 3}, {1.5f, 3, 2});
  ExpectNear(Run1("AveragePool", {X(F32({1, 1, 2, 2, 2}, Iota(8)))}, {{"kernel_shape", std::vector<int64_t>{2, 2, 2}}}),
             {1, 1, 1, 1, 1}, {3.5f});
  Tensor h = Run1("AveragePool", {X(F16({1, 1, 2, 2}, {1, 2, 3, 4}))}, {{"kernel_shape", std::vector<int64_t>{2, 2}}});
  EXPECT_EQ(h.dtype(), DType::kFloat16);
  ExpectNear(h, {1, 1, 1, 1}, {2.5f});
}

TEST(NnPoolTest, GlobalPools) {
  Tensor x = F32({2, 2, 2, 2}, {1, 2, 3, 4, -1, -2, -3, -4, 0, 0, 0, 8, 5, 5, 5, 5});
  ExpectNear(Run1("GlobalAveragePool", {X(x)}), {2, 2, 1, 1}, {2.5f, -2.5f, 2, 5});
  ExpectNear(Run1("GlobalMaxPool", {X(x)}), {2, 2, 1, 1}, {4, -1, 8, 5});
  ExpectNear(Run1("GlobalAveragePool", {X(F32({1, 1, 3}, {1, 2, 6}))}), {1, 1, 1}, {3});
}

TEST(NnPoolTest, Errors) {
  Tensor x = F32({1, 1, 4, 4}, Iota(16));
  // Indices of a 3-D window in column-major order: not supported.
  auto r = RunOp("MaxPool", {X(F32({1, 1, 2, 2, 2}, Iota(8)))},
                 {{"kernel_shape", std::vector<int64_t>{2, 2, 2}}, {"storage_order", int64_t{1}}}, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("storage_order=1"), std::string::npos) << r.status();
  std::string e = ErrorOf("MaxPool", {X(x)});
  EXPECT_NE(e.find("kernel_shape"), std::string::npos) << e;
  e = ErrorOf("AveragePool", {X(x)}, {{"kernel_shape", std::vector<int64_t>{5, 5}}});
  EXPECT_NE(e.find("larger than the padded input"), std::string::npos) << e;
  e = ErrorOf("AveragePool", {X(x)}, {{"kernel_shape", std::vector<int64_t>{2}}});
  EXPECT_NE(e.find("kernel_shape [2] has 1 entries but the input has 2 spatial dims"), std::string::npos) << e;
  e = ErrorOf("MaxPool", {X(x)}, {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1}}});
  EXPECT_NE(e.find("pads [1,1] must have 4 entries"), std::string::npos) << e;
  e = ErrorOf("GlobalMaxPool", {X(F32({4}, Iota(4)))});
  EXPECT_NE(e.find("[N, C, spatial...]"), std::string::npos) << e;
}

// Pools with channels_last=1 equal the NCHW pool permuted to NHWC.
TEST(NnPoolTest, ChannelsLastMatchesNchw) {
  struct Case {
    std::string op;
    Shape x;  // NCHW
    Attrs attrs;
  };
  const std::vector<Case> cases = {
      {"MaxPool",
       {2, 5, 9, 7},
       {{"kernel_shape", std::vector<int64_t>{3, 3}},
        {"strides", std::vector<int64_t>{2, 2}},
        {"pads", std::vector<int64_t>{1, 1, 1, 1}}}},
      {"MaxPool",
       {1, 3, 10, 8},
       {{"kernel_shape", std::vector<int64_t>{3, 2}},
        {"strides", std::vector<int64_t>{2, 3}},
        {"dilations", std::vector<int64_t>{2, 1}},
        {"ceil_mode", 1}}},
      {"AveragePool",
       {2, 3, 7, 7},
       {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 0, 1, 2}}}},
      {"AveragePool",
       {1, 4, 6, 5},
       {{"kernel_shape", std::vector<int64_t>{2, 3}},
        {"strides", std::vector<int64_t>{2, 2}},
        {"pads", std::vector<int64_t>{1, 1, 1, 1}},
        {"count_include_pad", 1},
        {"ceil_mode", 1}}},
      {"AveragePool", {1, 2, 5, 5}, {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"auto_pad", "SAME_UPPER"}}},
      {"GlobalAveragePool", {3, 5, 7, 3}, {}},
      {"GlobalAveragePool", {2, 16, 4, 4}, {}},
  };
  uint32_t seed = 400;
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << c.op << " " << ShapeToString(c.x));
    const Tensor x = F32(c.x, Random(NumElements(c.x), seed++));
    const Tensor want = ops::PermuteAxes(Run1(c.op, {X(x)}, c.attrs), ops::kNchwToNhwc);
    Attrs attrs = c.attrs;
    attrs["channels_last"] = 1;
    const Tensor got = Run1(c.op, {X(ops::PermuteAxes(x, ops::kNchwToNhwc))}, attrs);
    ExpectNear(got, want.shape(), want.ToFloat(), 1e-5f);
  }
  // uint8 MaxPool keeps its dtype.
  Tensor u8 = Tensor::FromInt64(DType::kUInt8, {1, 2, 2, 2}, {3, 9, 250, 1, 7, 2, 1, 4});
  Tensor y = Run1("MaxPool", {X(u8)}, {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"channels_last", 1}});
  EXPECT_EQ(y.dtype(), DType::kUInt8);
  EXPECT_EQ(y.shape(), (Shape{1, 1, 1, 2}));
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{250, 9}));
  // Rank other than 4 is rejected with the layout named.
  for (const char* op : {"MaxPool", "AveragePool", "GlobalAveragePool"}) {
    Attrs a = {{"channels_last", 1}};
    if (std::string(op) != "GlobalAveragePool") a["kernel_shape"] = std::vector<int64_t>{2};
    std::string e = ErrorOf(op, {X(F32({1, 4, 3}, Iota(12)))}, a);
    EXPECT_NE(e.find("channels_last=1 needs a 4-D input X [N, H, W, C]"), std::string::npos) << op << ": " << e;
  }
}

// ---------------------------------------------------------------------------
// Normalisation.

TEST(NnNormTest, BatchNormalization) {
  Tensor x = F32({1, 2, 1, 2}, {1, 2, 3, 4});
  Tensor y = Run1("BatchNormalization",
                  {X(x), C(F32({2}, {1, 2})), C(F32({2}, {0, 1})), C(F32({2}, {1, 2})), C(F32({2}, {4, 0.25f}))},
                  {{"epsilon", 0.f}});
  ExpectNear(y, {1, 2, 1, 2}, {0, 0.5f, 5, 9});
  // Rank 2 input ([N, C]) and f16.
  Tensor h = Run1("BatchNormalization",
                  {X(F16({2, 2}, {1, 2, 3, 4})), C(F16({2}, {1, 1})), C(F16({2}, {0, 0})), C(F16({2}, {0, 0})),
                   C(F16({2}, {1, 1}))},
                  {{"epsilon", 0.f}});
  ExpectNear(h, {2, 2}, {1, 2, 3, 4});
}

TEST(NnNormTest, BatchNormalizationRejectsTraining) {
  std::vector<In> ins = {X(F32({1, 2, 1, 1}, {1, 2})), C(F32({2}, {1, 1})), C(F32({2}, {0, 0})), C(F32({2}, {0, 0})),
                         C(F32({2}, {1, 1}))};
  auto r = RunOp("BatchNormalization", ins, {{"training_mode", 1}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  std::string e = ErrorOf("BatchNormalization", ins, {{"training_mode", 1}});
  EXPECT_NE(e.find("training_mode=1 is not supported"), std::string::npos) << e;
  e = ErrorOf("BatchNormalization", ins, {}, 3);
  EXPECT_NE(e.find("only produced in training mode"), std::string::npos) << e;
  ins[3] = C(F32({3}, {0, 0, 0}));
  e = ErrorOf("BatchNormalization", ins);
  EXPECT_NE(e.find("input_mean must be [2]"), std::string::npos) << e;
}

TEST(NnNormTest, InstanceNormalization) {
  Tensor x = F32({1, 2, 1, 2}, {1, 3, 2, 2});
  ExpectNear(Run1("InstanceNormalization", {X(x), C(F32({2}, {2, 1})), C(F32({2}, {0, 5}))}), {1, 2, 1, 2},
             {-2, 2, 5, 5}, 1e-4f);
  std::string e = ErrorOf("InstanceNormalization", {X(x), C(F32({3}, {1, 1, 1})), C(F32({2}, {0, 0}))});
  EXPECT_NE(e.find("scale must be [2]"), std::string::npos) << e;
}

TEST(NnNormTest, LayerNormalizationAllOutputs) {
  Tensor x = F32({2, 3}, {1, 2, 3, 2, 4, 6});
  auto r = RunOp("LayerNormalization", {X(x), C(F32({3}, {1, 1, 2})), C(F32({3}, {0, 0, 1}))}, {{"epsilon", 0.f}}, 3);
  ASSERT_TRUE(r.ok()) << r.status();
  const float k = 1.2247449f;  // sqrt(3/2)
  ExpectNear((*r)[0], {2, 3}, {-k, 0, 2 * k + 1, -k, 0, 2 * k + 1});
  EXPECT_EQ((*r)[1].dtype(), DType::kFloat32);
  ExpectNear((*r)[1], {2, 1}, {2, 4});
  ExpectNear((*r)[2], {2, 1}, {k, k / 2});
  // axis 0 normalises everything; no bias; one output.
  ExpectNear(
      Run1("LayerNormalization", {X(x), C(F32({2, 3}, std::vector<float>(6, 1.f)))}, {{"axis", 0}, {"epsilon", 0.f}}),
      {2, 3}, {-1.2247449f, -0.6123724f, 0, -0.6123724f, 0.6123724f, 1.8371173f});
}

TEST(NnNormTest, LayerNormalizationBroadcastScaleAndF16) {
  // Scale [1] broadcasts over the normalised [2, 2]; axis -2 of [1, 2, 2].
  Tensor x = F16({1, 2, 2}, {1, 3, 1, 3});
  auto r = RunOp("LayerNormalization", {X(x), C(F16({1}, {2}))}, {{"axis", -2}, {"epsilon", 0.f}}, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].dtype(), DType::kFloat16);
  ExpectNear((*r)[0], {1, 2, 2}, {-2, 2, -2, 2}, 1e-3f);
  ExpectNear((*r)[1], {1, 1, 1}, {2});
  std::string e = ErrorOf("LayerNormalization", {X(F32({2, 3}, Iota(6))), C(F32({2}, {1, 1}))});
  EXPECT_NE(e.find("does not broadcast to the normalised shape [3]"), std::string::npos) << e;
}

TEST(NnNormTest, RmsNormalization) {
  // Row 0: rms = sqrt(14 / 3); row 1 is row 0 doubled, so it normalises the same.
  Tensor x = F32({2, 3}, {1, 2, 3, 2, 4, 6});
  const float r = 1.f / std::sqrt(14.f / 3.f);
  ExpectNear(Run1("RMSNormalization", {X(x), C(F32({3}, {1, 1, 2}))}, {{"epsilon", 0.f}}), {2, 3},
             {r, 2 * r, 6 * r, r, 2 * r, 6 * r});
  // f16 in and out, a scale [1] broadcast over the normalised [2, 2] (axis 1).
  auto h = RunOp("RMSNormalization", {X(F16({1, 2, 2}, {3, 4, 3, 4})), C(F16({1}, {2}))}, {{"axis", 1}}, 1);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ((*h)[0].dtype(), DType::kFloat16);
  const float s = 2.f / std::sqrt(12.5f + 1e-5f);
  ExpectNear((*h)[0], {1, 2, 2}, {3 * s, 4 * s, 3 * s, 4 * s}, 1e-3f);
  std::string e = ErrorOf("RMSNormalization", {X(F32({2, 3}, Iota(6))), C(F32({2}, {1, 1}))});
  EXPECT_NE(e.find("does not broadcast to the normalised shape [3]"), std::string::npos) << e;
}

TEST(NnNormTest, Lrn) {
  Tensor x = F32({1, 3, 1, 1}, {1, 2, 3});
  ExpectNear(Run1("LRN", {X(x)}, {{"size", 3}, {"alpha", 3.f}, {"beta", 1.f}, {"bias", 1.f}}), {1, 3, 1, 1},
             {1.f / 6, 2.f / 15, 3.f / 14});
  // size 2: window [c, c + 1]; beta 0.5.
  ExpectNear(Run1("LRN", {X(x)}, {{"size", 2}, {"alpha", 2.f}, {"beta", 0.5f}, {"bias", 0.f}}), {1, 3, 1, 1},
             {1.f / std::sqrt(5.f), 2.f / std::sqrt(13.f), 1});
  std::string e = ErrorOf("LRN", {X(x)});
  EXPECT_NE(e.find("size"), std::string::npos) << e;
}

// ---------------------------------------------------------------------------
// Softmax.

TEST(NnSoftmaxTest, MiddleAxisAndStability) {
  const float l2 = std::log(2.f), l3 = std::log(3.f), l5 = std::log(5.f);
  // [2, 3, 2], softmax along axis 1.
  Tensor x = F32({2, 3, 2}, {0, 1, l2, 1, l5, 1, l3, 100, 0, 100, 0, 100 + l2});
  const std::vector<float> want = {0.125f, 1.f / 3, 0.25f, 1.f / 3, 0.625f, 1.f / 3,
                                   0.6f,   0.25f,   0.2f,  0.25f,   0.2f,   0.5f};
  ExpectNear(Run1("Softmax", {X(x)}, {{"axis", 1}}), {2, 3, 2}, want);
  std::vector<float> logs(want.size());
  for (size_t i = 0; i < want.size(); ++i) logs[i] = std::log(want[i]);
  ExpectNear(Run1("LogSoftmax", {X(x)}, {{"axis", -2}}), {2, 3, 2}, logs);
}

TEST(NnSoftmaxTest, DefaultLastAxisAndF16) {
  const float e1 = std::exp(1.f), e2 = std::exp(2.f);
  const float s = 1 + e1 + e2;
  ExpectNear(Run1("Softmax", {X(F32({2, 3}, {0, 1, 2, 1000, 1001, 1002}))}), {2, 3},
             {1 / s, e1 / s, e2 / s, 1 / s, e1 / s, e2 / s});
  ExpectNear(Run1("LogSoftmax", {X(F32({1, 3}, {0, 1, 2}))}), {1, 3}, {-std::log(s), 1 - std::log(s), 2 - std::log(s)});
  Tensor h = Run1("Softmax", {X(F16({2, 2}, {0, 0, 1, 1}))}, {{"axis", 0}});
  EXPECT_EQ(h.dtype(), DType::kFloat16);
  ExpectNear(h, {2, 2}, {1 / (1 + e1), 1 / (1 + e1), e1 / (1 + e1), e1 / (1 + e1)}, 1e-3f);
  std::string e = ErrorOf("Softmax", {X(F32({2, 3}, Iota(6)))}, {{"axis", 2}});
  EXPECT_NE(e.find("axis 2 is out of range for rank 2"), std::string::npos) << e;
  e = ErrorOf("LogSoftmax", {X(I64({2}, {1, 2}))});
  EXPECT_NE(e.find("must be f32, f16 or bf16"), std::string::npos) << e;
}

// ---------------------------------------------------------------------------
// Reductions.

TEST(NnReduceTest, AxesKeepdimsAndKinds) {
  Tensor x = F32({2, 3, 2}, Iota(12));
  ExpectNear(Run1("ReduceSum", {X(x), C(Ints({1}))}), {2, 1, 2}, {6, 9, 24, 27});
  ExpectNear(Run1("ReduceMean", {X(x), C(Ints({0, 2}))}, {{"keepdims", 0}}), {3}, {3.5f, 5.5f, 7.5f});
  ExpectNear(Run1("ReduceMax", {X(x)}), {1, 1, 1}, {11});
  ExpectNear(Run1("ReduceMin", {X(x), C(Ints({-1}))}, {{"keepdims", 0}}), {2, 3}, {0, 2, 4, 6, 8, 10});
  ExpectNear(Run1("ReduceProd", {X(F32({2, 3, 2}, Iota(12, 1))), C(Ints({2}))}), {2, 3, 1}, {2, 12, 30, 56, 90, 132});
  ExpectNear(Run1("ReduceL2", {X(x), C(Ints({0}))}, {{"keepdims", 0}}), {3, 2},
             {6, std::sqrt(50.f), std::sqrt(68.f), std::sqrt(90.f), std::sqrt(116.f), std::sqrt(146.f)});
  ExpectNear(Run1("ReduceSumSquare", {X(x), C(Ints({1, 2}))}), {2, 1, 1}, {55, 451});
}

TEST(NnReduceTest, EmptyAxes) {
  Tensor x = F32({2, 3}, {1, -2, 3, -4, 5, -6});
  // Empty axes reduce everything, or nothing with noop_with_empty_axes (the map still applies).
  ExpectNear(Run1("ReduceSum", {X(x), C(I64({0}, {}))}), {1, 1}, {-3});
  ExpectNear(Run1("ReduceSum", {X(x), None()}, {{"keepdims", 0}}), {}, {-3});
  ExpectNear(Run1("ReduceSumSquare", {X(x)}, {{"noop_with_empty_axes", 1}}), {2, 3}, {1, 4, 9, 16, 25, 36});
  ExpectNear(Run1("ReduceL2", {X(x)}, {{"noop_with_empty_axes", 1}}), {2, 3}, {1, 2, 3, 4, 5, 6});
  ExpectNear(Run1("ReduceMean", {X(x), C(I64({0}, {}))}, {{"noop_with_empty_axes", 1}}), {2, 3}, {1, -2, 3, -4, 5, -6});
}

TEST(NnReduceTest, IntegerBoolAndF16) {
  Tensor xi = I64({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor s = Run1("ReduceSum", {X(xi), C(Ints({1}))}, {{"keepdims", 0}});
  EXPECT_EQ(s.dtype(), DType::kInt64);
  EXPECT_EQ(s.ToInt64(), (std::vector<int64_t>{6, 15}));
  EXPECT_EQ(Run1("ReduceProd", {X(xi), C(Ints({0}))}).ToInt64(), (std::vector<int64_t>{4, 10, 18}));
  Tensor b = Tensor::FromInt64(DType::kBool, {2, 2}, {0, 1, 0, 0});
  Tensor bm = Run1("ReduceMax", {X(b), C(Ints({1}))}, {{"keepdims", 0}});
  EXPECT_EQ(bm.dtype(), DType::kBool);
  EXPECT_EQ(bm.ToInt64(), (std::vector<int64_t>{1, 0}));
  Tensor h = Run1("ReduceMean", {X(F16({2, 2}, {1, 2, 3, 5})), C(Ints({0}))});
  EXPECT_EQ(h.dtype(), DType::kFloat16);
  ExpectNear(h, {1, 2}, {2, 3.5f});
  // NaN propagates through max.
  Tensor m = Run1("ReduceMax", {X(F32({3}, {1, std::nanf(""), 2}))});
  EXPECT_TRUE(std::isnan(m.ToFloat()[0]));
}

TEST(NnReduceTest, LargeShapesMatchNaive) {
  // Axes patterns: inner kept (long rows), inner reduced, alternating.
  const Shape shape = {3, 5, 7, 1100};
  const std::vector<float> x = Random(NumElements(shape), 42);
  const std::vector<std::vector<int64_t>> axes_cases = {{0}, {3}, {1, 3}, {0, 2}, {0, 1, 2, 3}, {2}};
  for (const auto& axes : axes_cases) {
    SCOPED_TRACE(testing::Message() << "axes " << ShapeToString(axes));
    Tensor y = Run1("ReduceSum", {X(F32(shape, x)), C(Ints(axes))}, {{"keepdims", 0}});
    std::vector<bool> red(4, false);
    for (int64_t a : axes) red[a] = true;
    Shape out;
    for (int d = 0; d < 4; ++d) {
      if (!red[d]) out.push_back(shape[d]);
    }
    std::vector<double> want(NumElements(out), 0.0);
    for (int64_t i0 = 0; i0 < shape[0]; ++i0) {
      for (int64_t i1 = 0; i1 < shape[1]; ++i1) {
        for (int64_t i2 = 0; i2 < shape[2]; ++i2) {
          for (int64_t i3 = 0; i3 < shape[3]; ++i3) {
            const int64_t idx[4] = {i0, i1, i2, i3};
            int64_t o = 0;
            for (int d = 0; d < 4; ++d) {
              if (!red[d]) o = o * shape[d] + idx[d];
            }
            want[o] += x[((i0 * shape[1] + i1) * shape[2] + i2) * shape[3] + i3];
          }
        }
      }
    }
    ASSERT_EQ(y.shape(), out);
    const std::vector<float> got = y.ToFloat();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-3) << i;
  }
}

TEST(NnReduceTest, Errors) {
  Tensor x = F32({2, 3}, Iota(6));
  std::string e = ErrorOf("ReduceSum", {X(x), C(Ints({1, -1}))});
  EXPECT_NE(e.find("appears more than once"), std::string::npos) << e;
  e = ErrorOf("ReduceMean", {X(x), C(Ints({2}))});
  EXPECT_NE(e.find("axis 2 is out of range for rank 2"), std::string::npos) << e;
  e = ErrorOf("ReduceMax", {X(x), X(Ints({0}))});
  EXPECT_NE(e.find("must be a compile-time constant"), std::string::npos) << e;
  e = ErrorOf("ReduceSum", {X(Tensor::FromInt64(DType::kBool, {2}, {0, 1}))});
  EXPECT_NE(e.find("input dtype bool is not supported"), std::string::npos) << e;
}

}  // namespace
}  // namespace kiln
