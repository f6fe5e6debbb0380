// Tests for the checked size arithmetic and the float-to-integer rule of graph/dtype.h,
// and for Tensor::FromFloat, which follows that rule.
#include "graph/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "graph/tensor.h"

namespace kiln {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(DTypeTest, CheckedMulAndNumElements) {
  int64_t out = 0;
  EXPECT_TRUE(CheckedMul(int64_t{1} << 31, int64_t{1} << 31, &out));
  EXPECT_EQ(out, int64_t{1} << 62);
  EXPECT_FALSE(CheckedMul(int64_t{1} << 32, int64_t{1} << 31, &out));
  EXPECT_FALSE(CheckedMul(-1, 2, &out));
  EXPECT_EQ(CheckedNumElements({2, 3, 4}).value_or(-1), 24);
  EXPECT_EQ(CheckedNumElements({0, kMax}).value_or(-1), 0);
  EXPECT_FALSE(CheckedNumElements({kMax, 2}).ok());
  EXPECT_FALSE(CheckedNumElements({0, kMax, kMax}).ok());  // the non-zero dims overflow
  EXPECT_FALSE(CheckedNumElements({3, -1}).ok());
  const absl::StatusOr<int64_t> bytes = CheckedTensorBytes(DType::kFloat32, {int64_t{1} << 37}, "input 'x'");
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("input 'x'"), std::string::npos) << bytes.status();
}

TEST(DTypeTest, TruncToInt64SaturatesAndZeroesNaN) {
  EXPECT_EQ(TruncToInt64(-2.9), -2);
  EXPECT_EQ(TruncToInt64(1e30), kMax);
  EXPECT_EQ(TruncToInt64(-INFINITY), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(TruncToInt64(NAN), 0);
}

TEST(DTypeTest, FromFloatToIntegersNeverCastsOutOfRange) {
  const std::vector<float> v = {-INFINITY, INFINITY, NAN, 300.f, -3.7f};
  // Through int64 (saturated), then the low bits, as the GPU stores them.
  EXPECT_EQ(Tensor::FromFloat(DType::kInt64, {5}, v).ToInt64(),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), kMax, 0, 300, -3}));
  EXPECT_EQ(Tensor::FromFloat(DType::kUInt8, {5}, v).ToInt64(), (std::vector<int64_t>{0, 255, 0, 44, 253}));
  EXPECT_EQ(Tensor::FromFloat(DType::kInt8, {5}, v).ToInt64(), (std::vector<int64_t>{0, -1, 0, 44, -3}));
  EXPECT_EQ(Tensor::FromFloat(DType::kInt32, {5}, v).ToInt64(), (std::vector<int64_t>{0, -1, 0, 300, -3}));
}

}  // namespace
}  // namespace kiln
