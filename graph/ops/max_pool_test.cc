// Tests for MaxPool's Indices output.
#include <gtest/gtest.h>

#include "graph/ops/op_test_util.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {
namespace {

using namespace op_test;  // NOLINT: test helpers

TEST(MaxPoolIndicesTest, RowAndColumnMajorWithPadsAndTies) {
  // 1 x 1 x 3 x 4 with one padded row on top; the second window holds a tie (5, 5).
  const Tensor x = F32({1, 1, 3, 4}, {1, 5, 5, 5, 0, 3, 9, 4, 8, 7, 6, 1});
  const Attrs attrs = {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}},
                       {"pads", std::vector<int64_t>{1, 0, 0, 0}}};
  auto out = RunOp("MaxPool", {X(x)}, attrs, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear((*out)[0], {1, 1, 2, 2}, {5, 5, 8, 9});
  EXPECT_EQ((*out)[1].dtype(), DType::kInt64);
  EXPECT_EQ((*out)[1].ToInt64(), (std::vector<int64_t>{1, 2, 8, 6}));  // the tie: the first
  Attrs col = attrs;
  col["storage_order"] = int64_t{1};
  out = RunOp("MaxPool", {X(x)}, col, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  // Column-major offsets: w * H + h.
  EXPECT_EQ((*out)[1].ToInt64(), (std::vector<int64_t>{3, 6, 2, 7}));
  col["storage_order"] = int64_t{2};
  EXPECT_NE(ErrorOf("MaxPool", {X(x)}, col, 2).find("storage_order must be 0 or 1"), std::string::npos);
}

}  // namespace
}  // namespace kiln
