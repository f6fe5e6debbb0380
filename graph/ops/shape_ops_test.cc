// Tests for the shape and data-movement ops: Transpose, Flatten, Squeeze,
// Unsqueeze, Concat, Split, Slice, Gather, GatherElements, Expand, Shape, Size,
// ConstantOfShape, Constant, Identity, Dropout, Cast, CastLike, Range, Pad, Tile,
// DepthToSpace, SpaceToDepth, Trilu, OneHot.
#include <gtest/gtest.h>

#include "graph/ops/op_test_util.h"

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "common/float16.h"
#include "graph/evaluate.h"
#include "graph/graph.h"
#include "graph/infer_shapes.h"
#include "graph/op_registry.h"

namespace kiln {
namespace {

using namespace op_test;  // NOLINT: test helpers

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

// Naive reference: transposes a row-major tensor element by element.
std::vector<float> NaiveTranspose(const std::vector<float>& x, const Shape& s, const std::vector<int>& perm) {
  const int r = static_cast<int>(s.size());
  Shape os(r);
  for (int i = 0; i < r; ++i) os[i] = s[perm[i]];
  std::vector<int64_t> in_strides(r, 1);
  for (int i = r - 2; i >= 0; --i) in_strides[i] = in_strides[i + 1] * s[i + 1];
  std::vector<float> out(x.size());
  std::vector<int64_t> idx(r, 0);
  for (size_t o = 0; o < x.size(); ++o) {
    int64_t rem = static_cast<int64_t>(o), src = 0;
    for (int d = r - 1; d >= 0; --d) {
      idx[d] = rem % os[d];
      rem /= os[d];
      src += idx[d] * in_strides[perm[d]];
    }
    out[o] = x[src];
  }
  return out;
}

// ---- Registration ------------------------------------------------------------

TEST(ShapeOpsTest, RegisteredWithViewFlags) {
  const OpRegistry& r = OpRegistry::Global();
  for (const char* op : {"Transpose", "Flatten",      "Squeeze",         "Unsqueeze",      "Concat",
                         "Split",     "Slice",        "Gather",          "GatherElements", "Expand",
                         "Shape",     "Size",         "ConstantOfShape", "Constant",       "Identity",
                         "Dropout",   "Cast",         "CastLike",        "Range",          "Pad",
                         "Tile",      "DepthToSpace", "SpaceToDepth",    "Trilu",          "OneHot"}) {
    ASSERT_NE(r.Find(op), nullptr) << op;
  }
  for (const char* op : {"Flatten", "Squeeze", "Unsqueeze", "Identity"})
    EXPECT_TRUE(r.Find(op)->is_view) << op;
  EXPECT_FALSE(r.Find("Transpose")->is_view);
  EXPECT_EQ(r.Find("Constant")->min_inputs, 0);
  EXPECT_EQ(r.Find("Constant")->max_inputs, 0);
}

// ---- Transpose ---------------------------------------------------------------

TEST(ShapeOpsTransposeTest, DefaultReversesAxes) {
  Tensor y = Run1("Transpose", {X(F32({2, 3}, {1, 2, 3, 4, 5, 6}))});
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(ShapeOpsTransposeTest, PermOn3DAndInt64Exact) {
  // [2,3,2] -> perm (1,0,2) keeps the last axis contiguous.
  const int64_t big = (int64_t{1} << 53) + 1;  // not representable as float
  std::vector<int64_t> x = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, big};
  Tensor y = Run1("Transpose", {X(I64({2, 3, 2}, x))}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  EXPECT_EQ(y.shape(), (Shape{3, 2, 2}));
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, big}));
}

TEST(ShapeOpsTransposeTest, Float16BitsArePreserved) {
  Tensor x = Tensor::FromFloat(DType::kFloat16, {2, 2}, {0.1f, -2.5f, 65504.f, 3.f});
  Tensor y = Run1("Transpose", {X(x)});
  ASSERT_EQ(y.dtype(), DType::kFloat16);
  const uint16_t* a = x.data<uint16_t>();
  const uint16_t* b = y.data<uint16_t>();
  EXPECT_EQ(b[0], a[0]);
  EXPECT_EQ(b[1], a[2]);
  EXPECT_EQ(b[2], a[1]);
  EXPECT_EQ(b[3], a[3]);
}

TEST(ShapeOpsTransposeTest, LargeMatchesNaive) {
  // Big enough to be split over threads; odd sizes.
  const Shape s = {3, 70, 131};
  const std::vector<float> x = Iota(NumElements(s));
  for (const std::vector<int>& perm :
       std::vector<std::vector<int>>{{2, 0, 1}, {1, 2, 0}, {0, 2, 1}, {2, 1, 0}}) {
    Tensor y = Run1("Transpose", {X(F32(s, x))}, {{"perm", std::vector<int64_t>(perm.begin(), perm.end())}});
    EXPECT_EQ(y.ToFloat(), NaiveTranspose(x, s, perm));
  }
}

TEST(ShapeOpsTransposeTest, BadPermIsAnError) {
  std::string m = ErrorOf("Transpose", {X(F32({2, 3}, Iota(6)))}, {{"perm", std::vector<int64_t>{0, 0}}});
  EXPECT_CONTAINS(m, "not a permutation");
  m = ErrorOf("Transpose", {X(F32({2, 3}, Iota(6)))}, {{"perm", std::vector<int64_t>{0, 1, 2}}});
  EXPECT_CONTAINS(m, "rank 2");
}

// ---- Flatten / Squeeze / Unsqueeze / Identity ----------------------------------

TEST(ShapeOpsViewTest, FlattenAxes) {
  const Tensor x = F32({2, 3, 4}, Iota(24));
  EXPECT_EQ(Run1("Flatten", {X(x)}).shape(), (Shape{2, 12}));
  EXPECT_EQ(Run1("Flatten", {X(x)}, {{"axis", 0}}).shape(), (Shape{1, 24}));
  EXPECT_EQ(Run1("Flatten", {X(x)}, {{"axis", 3}}).shape(), (Shape{24, 1}));
  Tensor y = Run1("Flatten", {X(x)}, {{"axis", -1}});
  EXPECT_EQ(y.shape(), (Shape{6, 4}));
  EXPECT_EQ(y.ToFloat(), Iota(24));
  EXPECT_CONTAINS(ErrorOf("Flatten", {X(x)}, {{"axis", 4}}), "axis 4 is out of range");
}

TEST(ShapeOpsViewTest, Squeeze) {
  const Tensor x = F32({1, 3, 1, 2}, Iota(6));
  Tensor y = Run1("Squeeze", {X(x)});
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(y.ToFloat(), Iota(6));
  EXPECT_EQ(Run1("Squeeze", {X(x), C(Ints({-2}))}).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(Run1("Squeeze", {X(x), C(Ints({0, 2}))}).shape(), (Shape{3, 2}));
  std::string m = ErrorOf("Squeeze", {X(x), C(Ints({1}))});
  EXPECT_CONTAINS(m, "cannot squeeze axis 1");
  EXPECT_CONTAINS(m, "its size is 3");
  // axes must be a constant.
  EXPECT_CONTAINS(ErrorOf("Squeeze", {X(x), X(Ints({0}))}), "compile-time constant");
}

TEST(ShapeOpsViewTest, Unsqueeze) {
  const Tensor x = F32({3, 2}, Iota(6));
  Tensor y = Run1("Unsqueeze", {X(x), C(Ints({3, 0}))});
  EXPECT_EQ(y.shape(), (Shape{1, 3, 2, 1}));
  EXPECT_EQ(y.ToFloat(), Iota(6));
  EXPECT_EQ(Run1("Unsqueeze", {X(x), C(Ints({-1}))}).shape(), (Shape{3, 2, 1}));
  EXPECT_EQ(Run1("Unsqueeze", {X(F32({}, {7})), C(Ints({0}))}).shape(), (Shape{1}));
  EXPECT_CONTAINS(ErrorOf("Unsqueeze", {X(x), C(Ints({1, 1}))}), "repeat axis 1");
  EXPECT_CONTAINS(ErrorOf("Unsqueeze", {X(x), C(Ints({4}))}), "out of range for output rank 3");
}

TEST(ShapeOpsViewTest, IdentityKeepsBytes) {
  Tensor y = Run1("Identity", {X(I64({2}, {kMax, kMin}))});
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{kMax, kMin}));
}

// ---- Concat / Split ------------------------------------------------------------

TEST(ShapeOpsConcatTest, AlongInnerAndOuterAxes) {
  Tensor a = F32({2, 1}, {1, 2}), b = F32({2, 3}, {3, 4, 5, 6, 7, 8});
  Tensor y = Run1("Concat", {X(a), C(b)}, {{"axis", 1}});
  EXPECT_EQ(y.shape(), (Shape{2, 4}));
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{1, 3, 4, 5, 2, 6, 7, 8}));
  y = Run1("Concat", {X(F32({1, 2}, {1, 2})), X(F32({2, 2}, {3, 4, 5, 6}))}, {{"axis", -2}});
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(ShapeOpsConcatTest, Int64ThreeInputsAndEmptyInput) {
  Tensor y = Run1("Concat", {X(Ints({kMax})), X(I64({0}, {})), X(Ints({1, kMin}))}, {{"axis", 0}});
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{kMax, 1, kMin}));
}

TEST(ShapeOpsConcatTest, LargeMiddleAxis) {
  // [5, 40, 300] ++ [5, 7, 300] along axis 1: many rows, copied in parallel.
  Tensor a = F32({5, 40, 300}, Iota(5 * 40 * 300)), b = F32({5, 7, 300}, Iota(5 * 7 * 300, -1e6f));
  Tensor y = Run1("Concat", {X(a), X(b)}, {{"axis", 1}});
  ASSERT_EQ(y.shape(), (Shape{5, 47, 300}));
  const std::vector<float> av = a.ToFloat(), bv = b.ToFloat(), yv = y.ToFloat();
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 47; ++j) {
      for (int k = 0; k < 300; k += 37) {
        const float want = j < 40 ? av[(i * 40 + j) * 300 + k] : bv[(i * 7 + j - 40) * 300 + k];
        ASSERT_EQ(yv[(i * 47 + j) * 300 + k], want) << i << "," << j << "," << k;
      }
    }
  }
}

TEST(ShapeOpsConcatTest, MismatchIsAnError) {
  std::string m = ErrorOf("Concat", {X(F32({2, 3}, Iota(6))), X(F32({3, 3}, Iota(9)))}, {{"axis", 1}});
  EXPECT_CONTAINS(m, "[2,3]");
  EXPECT_CONTAINS(m, "[3,3]");
  EXPECT_CONTAINS(ErrorOf("Concat", {X(F32({2}, Iota(2))), X(Ints({1}))}, {{"axis", 0}}), "share a dtype");
}

TEST(ShapeOpsSplitTest, VariableSizesFromInput) {
  auto r = RunOp("Split", {X(F32({2, 5}, Iota(10))), C(Ints({2, 0, 3}))}, {{"axis", 1}}, 3);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].ToFloat(), (std::vector<float>{0, 1, 5, 6}));
  EXPECT_EQ((*r)[1].shape(), (Shape{2, 0}));
  EXPECT_EQ((*r)[2].ToFloat(), (std::vector<float>{2, 3, 4, 7, 8, 9}));
}

TEST(ShapeOpsSplitTest, NumOutputsUnevenLastChunkSmaller) {
  auto r = RunOp("Split", {X(I64({10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}))}, {{"num_outputs", 3}}, 3);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].ToInt64(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ((*r)[1].ToInt64(), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ((*r)[2].ToInt64(), (std::vector<int64_t>{8, 9}));
}

TEST(ShapeOpsSplitTest, EqualPartsOverOutputsBf16) {
  Tensor x = Tensor::FromFloat(DType::kBFloat16, {3, 2}, {1.5f, -2, 3, 4, 5, 6});
  auto r = RunOp("Split", {X(x)}, {{"axis", -2}}, 3);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].dtype(), DType::kBFloat16);
  EXPECT_EQ((*r)[0].ToFloat(), (std::vector<float>{1.5f, -2}));
  EXPECT_EQ((*r)[2].ToFloat(), (std::vector<float>{5, 6}));
}

TEST(ShapeOpsSplitTest, BadSizesAreErrors) {
  EXPECT_CONTAINS(ErrorOf("Split", {X(F32({5}, Iota(5))), C(Ints({2, 2}))}, {}, 2), "sums to 4");
  EXPECT_CONTAINS(ErrorOf("Split", {X(F32({5}, Iota(5)))}, {}, 2), "2 equal parts");
  EXPECT_CONTAINS(ErrorOf("Split", {X(F32({6}, Iota(6)))}, {{"num_outputs", 3}}, 2), "num_outputs is 3");
}

// ---- Slice ---------------------------------------------------------------------

TEST(ShapeOpsSliceTest, BasicWithAxesAndSteps) {
  // x = [[0..4],[5..9],[10..14]]
  const Tensor x = F32({3, 5}, Iota(15));
  Tensor y = Run1("Slice", {X(x), C(Ints({1, 0})), C(Ints({3, 5})), C(Ints({0, 1})), C(Ints({1, 2}))});
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{5, 7, 9, 10, 12, 14}));
  // Default axes/steps, negative start, end past the end.
  y = Run1("Slice", {X(x), C(Ints({-2})), C(Ints({1000}))});
  EXPECT_EQ(y.shape(), (Shape{2, 5}));
  EXPECT_EQ(y.ToFloat(), Iota(10, 5));
  // Negative axis, i32 arguments.
  y = Run1("Slice", {X(x), C(I32({1}, {1})), C(I32({1}, {-1})), C(I32({1}, {-1}))});
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{1, 2, 3, 6, 7, 8, 11, 12, 13}));
}

TEST(ShapeOpsSliceTest, NegativeStepsAndInt64Limits) {
  const Tensor x = I64({6}, {0, 1, 2, 3, 4, 5});
  // Reverse everything: start -1, end INT64_MIN, step -1.
  Tensor y = Run1("Slice", {X(x), C(Ints({-1})), C(Ints({kMin})), C(Ints({0})), C(Ints({-1}))});
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{5, 4, 3, 2, 1, 0}));
  // start INT64_MAX clamps to the last element; step -2.
  y = Run1("Slice", {X(x), C(Ints({kMax})), C(Ints({kMin})), C(Ints({0})), C(Ints({-2}))});
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{5, 3, 1}));
  // end -1 with a negative step means index 5 - 1 = 4 (not "before the start").
  y = Run1("Slice", {X(x), C(Ints({5})), C(Ints({-1})), C(Ints({0})), C(Ints({-1}))});
  EXPECT_EQ(y.shape(), (Shape{0}));
  y = Run1("Slice", {X(x), C(Ints({5})), C(Ints({1})), C(Ints({0})), C(Ints({-3}))});
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{5, 2}));
  // Positive step with INT64_MAX end and a start past the end (empty).
  y = Run1("Slice", {X(x), C(Ints({2})), C(Ints({kMax})), C(Ints({0})), C(Ints({3}))});
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{2, 5}));
  y = Run1("Slice", {X(x), C(Ints({10})), C(Ints({kMax}))});
  EXPECT_EQ(y.shape(), (Shape{0}));
  // Huge steps take one element.
  y = Run1("Slice", {X(x), C(Ints({1})), C(Ints({kMax})), C(Ints({0})), C(Ints({kMax}))});
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{1}));
  y = Run1("Slice", {X(x), C(Ints({-1})), C(Ints({kMin})), C(Ints({0})), C(Ints({kMin}))});
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{5}));
}

TEST(ShapeOpsSliceTest, ReversedLargeMatchesNaive) {
  // Slice [2:, ::-1, 1::2] of [4, 150, 81] (f16).
  const Shape s = {4, 150, 81};
  std::vector<float> xv(NumElements(s));
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i % 2000);
  Tensor x = Tensor::FromFloat(DType::kFloat16, s, xv);
  Tensor y = Run1("Slice", {X(x), C(Ints({2, -1, 1})), C(Ints({kMax, kMin, kMax})), C(Ints({0, 1, 2})),
                            C(Ints({1, -1, 2}))});
  ASSERT_EQ(y.shape(), (Shape{2, 150, 40}));
  const std::vector<float> yv = y.ToFloat();
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 150; ++j) {
      for (int k = 0; k < 40; ++k) {
        ASSERT_EQ(yv[(i * 150 + j) * 40 + k], xv[((i + 2) * 150 + (149 - j)) * 81 + 1 + 2 * k]);
      }
    }
  }
}

TEST(ShapeOpsSliceTest, BadArgumentsAreErrors) {
  const Tensor x = F32({4}, Iota(4));
  EXPECT_CONTAINS(ErrorOf("Slice", {X(x), C(Ints({0})), C(Ints({4})), C(Ints({0})), C(Ints({0}))}),
                  "steps[0] is 0");
  EXPECT_CONTAINS(ErrorOf("Slice", {X(x), C(Ints({0})), C(Ints({4, 5}))}), "ends has 2");
  EXPECT_CONTAINS(ErrorOf("Slice", {X(x), C(Ints({0})), X(Ints({4}))}), "'ends'");
}

// ---- Gather / GatherElements -----------------------------------------------------

TEST(ShapeOpsGatherTest, Axis0NegativeIndices) {
  const Tensor x = F32({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor y = Run1("Gather", {X(x), X(I64({2, 2}, {0, -1, 1, 1}))});
  EXPECT_EQ(y.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{1, 2, 5, 6, 3, 4, 3, 4}));
}

TEST(ShapeOpsGatherTest, Axis1ScalarAndInt32Indices) {
  const Tensor x = I64({2, 3}, {10, 11, 12, 13, 14, 15});
  Tensor y = Run1("Gather", {X(x), C(I32({2}, {2, 0}))}, {{"axis", 1}});
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{12, 10, 15, 13}));
  // A scalar index drops the axis (Shape -> Gather chains).
  y = Run1("Gather", {X(Ints({1, 128, 768})), C(I64({}, {-2}))});
  EXPECT_EQ(y.shape(), (Shape{}));
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{128}));
}

TEST(ShapeOpsGatherTest, OutOfRangeIndexIsAnError) {
  const Tensor x = F32({3, 2}, Iota(6));
  EXPECT_CONTAINS(ErrorOf("Gather", {X(x), C(Ints({3}))}), "index 3 is out of range for axis of size 3");
  EXPECT_CONTAINS(ErrorOf("Gather", {X(x), X(Ints({-4}))}), "index -4");
  EXPECT_CONTAINS(ErrorOf("Gather", {X(x), X(F32({1}, {0}))}), "indices must be i32 or i64");
}

TEST(ShapeOpsGatherTest, GatherElements) {
  const Tensor x = F32({2, 2}, {1, 2, 3, 4});
  Tensor y = Run1("GatherElements", {X(x), X(I64({2, 2}, {0, 0, 1, 0}))}, {{"axis", 1}});
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{1, 1, 4, 3}));
  // axis 0, negative indices, indices smaller than data.
  const Tensor z = I64({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  y = Run1("GatherElements", {X(z), X(I64({2, 3}, {-1, 0, 2, 1, 2, 0}))});
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{7, 2, 9, 4, 8, 3}));
  EXPECT_CONTAINS(ErrorOf("GatherElements", {X(x), X(Ints({0, 1}))}), "rank of data");
  EXPECT_CONTAINS(ErrorOf("GatherElements", {X(x), X(I64({1, 1}, {2}))}, {{"axis", 1}}),
                  "index 2 is out of range");
}

// ---- Expand / Tile ---------------------------------------------------------------

TEST(ShapeOpsExpandTest, BroadcastsBothWays) {
  const Tensor x = F32({3, 1}, {1, 2, 3});
  Tensor y = Run1("Expand", {X(x), C(Ints({2, 1, 2}))});
  EXPECT_EQ(y.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  // A shape with 1s keeps the input dims.
  y = Run1("Expand", {X(x), C(Ints({1}))});
  EXPECT_EQ(y.shape(), (Shape{3, 1}));
  y = Run1("Expand", {X(Bool({}, {1})), C(Ints({3}))});
  EXPECT_EQ(y.dtype(), DType::kBool);
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_CONTAINS(ErrorOf("Expand", {X(x), C(Ints({2, 4}))}), "cannot be broadcast");
}

TEST(ShapeOpsTileTest, Repeats) {
  Tensor y = Run1("Tile", {X(F32({2, 2}, {1, 2, 3, 4})), C(Ints({2, 3}))});
  EXPECT_EQ(y.shape(), (Shape{4, 6}));
  EXPECT_EQ(y.ToFloat(),
            (std::vector<float>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
  y = Run1("Tile", {X(I64({1, 3}, {7, 8, 9})), C(Ints({2, 1}))});
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{7, 8, 9, 7, 8, 9}));
  EXPECT_EQ(Run1("Tile", {X(F32({2}, {1, 2})), C(Ints({0}))}).shape(), (Shape{0}));
  EXPECT_CONTAINS(ErrorOf("Tile", {X(F32({2}, {1, 2})), C(Ints({1, 2}))}), "rank 1");
}

// ---- Shape / Size ------------------------------------------------------------------

TEST(ShapeOpsShapeTest, StartEnd) {
  const Tensor x = F32({2, 3, 4, 5}, Iota(120));
  EXPECT_EQ(Run1("Shape", {X(x)}).ToInt64(), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(Run1("Shape", {X(x)}, {{"start", 1}, {"end", -1}}).ToInt64(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(Run1("Shape", {X(x)}, {{"start", -10}}).ToInt64(), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(Run1("Shape", {X(x)}, {{"end", 10}, {"start", -1}}).ToInt64(), (std::vector<int64_t>{5}));
  EXPECT_EQ(Run1("Shape", {X(x)}, {{"start", 3}, {"end", 1}}).shape(), (Shape{0}));
  EXPECT_EQ(Run1("Size", {X(x)}).ToInt64(), (std::vector<int64_t>{120}));
  EXPECT_EQ(Run1("Size", {X(x)}).shape(), (Shape{}));
}

TEST(ShapeOpsShapeTest, FoldsWithoutInputData) {
  // Shape -> Gather -> Unsqueeze -> Concat -> Reshape, with x a graph input: the
  // whole chain folds to constants during inference.
  Graph g;
  Value* x = g.AddValue("x");
  x->SetType(DType::kFloat16, {2, 3, 4});
  g.AddInput(x);
  Value* shape = g.AddValue("shape");
  g.AddNode("Shape", {x}, {shape});
  Value* size = g.AddValue("size");
  g.AddNode("Size", {x}, {size});
  Value* d0 = g.AddValue("d0");
  g.AddNode("Gather", {shape, g.AddConstant("i0", I64({}, {0}))}, {d0});
  Value* d0v = g.AddValue("d0v");
  g.AddNode("Unsqueeze", {d0, g.AddConstant("ax", Ints({0}))}, {d0v});
  Value* target = g.AddValue("target");
  g.AddNode("Concat", {d0v, g.AddConstant("m1", Ints({-1}))}, {target}, "cat")->SetAttr("axis", 0);
  Value* y = g.AddValue("y");
  g.AddNode("Reshape", {x, target}, {y});
  g.AddOutput(y);
  g.AddOutput(size);
  ASSERT_TRUE(InferShapes(g).ok());
  EXPECT_EQ(y->TypeString(), "f16[2,12]");
  ASSERT_TRUE(target->is_constant());
  EXPECT_EQ(target->constant().ToInt64(), (std::vector<int64_t>{2, -1}));
  ASSERT_TRUE(size->is_constant());
  EXPECT_EQ(size->constant().ToInt64(), (std::vector<int64_t>{24}));
}

// A dim of 0 (e.g. --dim batch=0) makes an exporter's computed Reshape targets
// ambiguous: -1 beside a 0, or a computed 0 that ONNX reads as "copy the input's dim".
// The error names the likely cause; a well-defined reshape of no elements works.
TEST(ShapeOpsShapeTest, ReshapeOfNoElementsSaysWhy) {
  const std::string minus_one = ErrorOf("Reshape", {X(F32({0, 4, 64}, {})), C(Ints({0, 4, -1, 32}))});
  EXPECT_CONTAINS(minus_one, "cannot reshape [0,4,64] to [0,4,-1,32]");
  EXPECT_CONTAINS(minus_one, "a -1 dim cannot be inferred beside a dim of 0");
  EXPECT_CONTAINS(minus_one, "--dim NAME=0");
  const std::string copy = ErrorOf("Reshape", {X(F32({0, 4}, {})), C(Ints({0, 4, 0}))});
  EXPECT_CONTAINS(copy, "shape[2] = 0 copies a dim the input lacks");
  EXPECT_CONTAINS(copy, "--dim NAME=0");
  EXPECT_EQ(ErrorOf("Reshape", {X(F32({2, 3}, Iota(6))), C(Ints({-1, 0, 4}))}).find("--dim NAME=0"), std::string::npos);
  EXPECT_EQ(Run1("Reshape", {X(F32({0, 4}, {})), C(Ints({0, 2, 2}))}).shape(), (Shape{0, 2, 2}));
}

// ---- ConstantOfShape / Constant -----------------------------------------------------

TEST(ShapeOpsConstantTest, ConstantOfShape) {
  Tensor y = Run1("ConstantOfShape", {C(Ints({2, 3}))});
  EXPECT_EQ(y.dtype(), DType::kFloat32);
  EXPECT_EQ(y.ToFloat(), std::vector<float>(6, 0.f));
  y = Run1("ConstantOfShape", {C(Ints({4}))}, {{"value", I64({1}, {kMax})}});
  EXPECT_EQ(y.ToInt64(), std::vector<int64_t>(4, kMax));
  y = Run1("ConstantOfShape", {C(Ints({2, 1}))},
           {{"value", Tensor::FromFloat(DType::kFloat16, {1}, {1.5f})}});
  EXPECT_EQ(y.dtype(), DType::kFloat16);
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{1.5f, 1.5f}));
  EXPECT_EQ(Run1("ConstantOfShape", {C(I64({0}, {}))}).shape(), (Shape{}));
  EXPECT_CONTAINS(ErrorOf("ConstantOfShape", {C(Ints({2, -1}))}), "negative dim");
  EXPECT_CONTAINS(ErrorOf("ConstantOfShape", {C(Ints({2}))}, {{"value", F32({2}, {1, 2})}}),
                  "exactly one element");
}

TEST(ShapeOpsConstantTest, ConstantAttributes) {
  EXPECT_EQ(Run1("Constant", {}, {{"value", I32({2}, {3, -4})}}).ToInt64(), (std::vector<int64_t>{3, -4}));
  Tensor y = Run1("Constant", {}, {{"value_float", 2.5f}});
  EXPECT_EQ(y.shape(), (Shape{}));
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{2.5f}));
  y = Run1("Constant", {}, {{"value_floats", std::vector<float>{1.f, 2.f}}});
  EXPECT_EQ(y.TypeString(), "f32[2]");
  y = Run1("Constant", {}, {{"value_int", int64_t{kMin}}});
  EXPECT_EQ(y.TypeString(), "i64[]");
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{kMin}));
  y = Run1("Constant", {}, {{"value_ints", std::vector<int64_t>{1, 2, 3}}});
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_CONTAINS(ErrorOf("Constant", {}, {{"value_string", "hi"}}), "'value_string' is not supported");
  EXPECT_CONTAINS(ErrorOf("Constant", {}), "got none");
  EXPECT_CONTAINS(ErrorOf("Constant", {}, {{"value_int", 1}, {"value_float", 1.f}}), "value_float, value_int");
}

// ---- Dropout ------------------------------------------------------------------------

TEST(ShapeOpsDropoutTest, InferenceIsIdentityWithTrueMask) {
  const Tensor x = F32({2, 2}, {1, -2, 3, 4});
  auto r = RunOp("Dropout", {X(x), C(F32({}, {0.5f})), C(Bool({}, {0}))}, {}, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].ToFloat(), x.ToFloat());
  EXPECT_EQ((*r)[1].dtype(), DType::kBool);
  EXPECT_EQ((*r)[1].ToInt64(), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(Run1("Dropout", {X(x)}).ToFloat(), x.ToFloat());
  EXPECT_CONTAINS(ErrorOf("Dropout", {X(x), None(), C(Bool({}, {1}))}), "training_mode is true");
  EXPECT_CONTAINS(ErrorOf("Dropout", {X(x), None(), X(Bool({}, {1}))}), "training_mode is true");
}

// ---- Cast / CastLike ----------------------------------------------------------------

TEST(ShapeOpsCastTest, FloatToIntTruncatesAndToBool) {
  const Tensor x = F32({6}, {-1.7f, 2.9f, 0.f, -0.4f, 300.5f, 1e10f});
  EXPECT_EQ(Run1("Cast", {X(x)}, {{"to", 7}}).ToInt64(),
            (std::vector<int64_t>{-1, 2, 0, 0, 300, 10000000000}));
  Tensor y = Run1("Cast", {X(x)}, {{"to", 6}});
  EXPECT_EQ(y.dtype(), DType::kInt32);
  EXPECT_EQ(y.data<int32_t>()[0], -1);
  EXPECT_EQ(y.data<int32_t>()[4], 300);
  y = Run1("Cast", {X(x)}, {{"to", 9}});
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{1, 1, 0, 1, 1, 1}));
  y = Run1("Cast", {X(F32({2}, {0.1f, 65536.f}))}, {{"to", 10}});
  EXPECT_EQ(y.dtype(), DType::kFloat16);
  EXPECT_EQ(y.data<uint16_t>()[0], FloatToHalf(0.1f));
  EXPECT_EQ(y.ToFloat()[1], std::numeric_limits<float>::infinity());
  y = Run1("Cast", {X(F32({1}, {1.00390625f}))}, {{"to", 16}});
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{1.f}));  // rounds to nearest even in bf16
}

TEST(ShapeOpsCastTest, IntegerConversionsAreExact) {
  const int64_t big = (int64_t{1} << 53) + 1;
  // i64 -> i32 -> i64 keeps values that fit, without a float round trip.
  Tensor y = Run1("Cast", {X(I64({2}, {123456789, -7}))}, {{"to", 6}});
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{123456789, -7}));
  EXPECT_EQ(Run1("Cast", {X(I64({1}, {big}))}, {{"to", 7}}).ToInt64(), (std::vector<int64_t>{big}));
  y = Run1("Cast", {X(I64({3}, {0, 5, -1}))}, {{"to", 9}});
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{0, 1, 1}));
  y = Run1("Cast", {X(Bool({2}, {1, 0}))}, {{"to", 1}});
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{1.f, 0.f}));
  y = Run1("Cast", {X(I64({2}, {300, -1}))}, {{"to", 2}});  // u8 wraps
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{44, 255}));
}

TEST(ShapeOpsCastTest, UnsupportedTypeIsNamed) {
  std::string m = ErrorOf("Cast", {X(F32({1}, {1}))}, {{"to", 11}});
  EXPECT_CONTAINS(m, "DOUBLE");
  EXPECT_CONTAINS(m, "11");
  EXPECT_CONTAINS(ErrorOf("Cast", {X(F32({1}, {1}))}, {{"to", 8}}), "STRING");
  // A kiln limitation, not a malformed model: Unimplemented.
  EXPECT_EQ(RunOp("Cast", {X(F32({1}, {1}))}, {{"to", 11}}).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_CONTAINS(ErrorOf("Cast", {X(F32({1}, {1}))}), "missing required attribute 'to'");
}

TEST(ShapeOpsCastTest, CastLike) {
  Tensor y = Run1("CastLike", {X(F32({3}, {1.5f, -2.5f, 7.f})), C(I32({1}, {0}))});
  EXPECT_EQ(y.dtype(), DType::kInt32);
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{1, -2, 7}));
  y = Run1("CastLike", {X(I64({2}, {3, 4})), X(Tensor::FromFloat(DType::kBFloat16, {}, {0.f}))});
  EXPECT_EQ(y.dtype(), DType::kBFloat16);
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{3.f, 4.f}));
}

// ---- Range ----------------------------------------------------------------------------

TEST(ShapeOpsRangeTest, FloatAndIntegerRanges) {
  Tensor y = Run1("Range", {C(F32({}, {1})), C(F32({}, {3})), C(F32({}, {0.5f}))});
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{1, 1.5f, 2, 2.5f}));
  y = Run1("Range", {C(I32({}, {10})), C(I32({}, {4})), C(I32({}, {-3}))});
  EXPECT_EQ(y.dtype(), DType::kInt32);
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{10, 7}));
  y = Run1("Range", {C(I64({}, {0})), C(I64({}, {5})), C(I64({}, {-1}))});
  EXPECT_EQ(y.shape(), (Shape{0}));
  y = Run1("Range", {C(I64({}, {0})), C(I64({}, {7})), C(I64({}, {3}))});
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{0, 3, 6}));
}

TEST(ShapeOpsRangeTest, ErrorsAreClear) {
  EXPECT_CONTAINS(ErrorOf("Range", {X(I64({}, {0})), C(I64({}, {5})), C(I64({}, {1}))}), "'start'");
  // Non-constant shape arguments are FailedPrecondition (the importer may bind them).
  EXPECT_EQ(RunOp("Range", {X(I64({}, {0})), C(I64({}, {5})), C(I64({}, {1}))}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_CONTAINS(ErrorOf("Range", {C(I64({}, {0})), C(I64({}, {5})), C(I64({}, {0}))}), "delta is 0");
  EXPECT_CONTAINS(ErrorOf("Range", {C(I64({}, {0})), C(I32({}, {5})), C(I64({}, {1}))}), "share a dtype");
}

// ---- Pad --------------------------------------------------------------------------------

TEST(ShapeOpsPadTest, ConstantMode) {
  const Tensor x = F32({3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f});
  Tensor y = Run1("Pad", {X(x), C(Ints({0, 2, 0, 0}))});
  EXPECT_EQ(y.shape(), (Shape{3, 4}));
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{0, 0, 1.0f, 1.2f, 0, 0, 2.3f, 3.4f, 0, 0, 4.5f, 5.7f}));
  y = Run1("Pad", {X(x), C(Ints({1, 0, 0, 1})), C(F32({}, {-1}))});
  EXPECT_EQ(y.shape(), (Shape{4, 3}));
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{-1, -1, -1, 1.0f, 1.2f, -1, 2.3f, 3.4f, -1, 4.5f, 5.7f, -1}));
}

TEST(ShapeOpsPadTest, NegativePadsCropAndAxesInput) {
  const Tensor x = I64({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  // Axis -1 only: crop 1 in front, pad 2 at the end with 9.
  Tensor y = Run1("Pad", {X(x), C(Ints({-1, 2})), C(I64({}, {9})), C(Ints({-1}))});
  EXPECT_EQ(y.shape(), (Shape{2, 5}));
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{1, 2, 3, 9, 9, 5, 6, 7, 9, 9}));
}

TEST(ShapeOpsPadTest, ReflectEdgeWrap) {
  const Tensor x = F32({3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f});
  Tensor y = Run1("Pad", {X(x), C(Ints({0, 2, 0, 0}))}, {{"mode", "reflect"}});
  EXPECT_EQ(y.ToFloat(),
            (std::vector<float>{1.0f, 1.2f, 1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f, 4.5f, 5.7f}));
  y = Run1("Pad", {X(x), C(Ints({0, 2, 0, 0}))}, {{"mode", "edge"}});
  EXPECT_EQ(y.ToFloat(),
            (std::vector<float>{1.0f, 1.0f, 1.0f, 1.2f, 2.3f, 2.3f, 2.3f, 3.4f, 4.5f, 4.5f, 4.5f, 5.7f}));
  y = Run1("Pad", {X(x), C(Ints({2, 1, 1, 1}))}, {{"mode", "wrap"}});
  EXPECT_EQ(y.shape(), (Shape{6, 4}));
  EXPECT_EQ(y.ToFloat(),
            (std::vector<float>{3.4f, 2.3f, 3.4f, 2.3f, 5.7f, 4.5f, 5.7f, 4.5f, 1.2f, 1.0f, 1.2f, 1.0f,
                                3.4f, 2.3f, 3.4f, 2.3f, 5.7f, 4.5f, 5.7f, 4.5f, 1.2f, 1.0f, 1.2f, 1.0f}));
  // Reflect with pads longer than the axis keeps bouncing (numpy semantics).
  y = Run1("Pad", {X(F32({3}, {1, 2, 3})), C(Ints({5, 3}))}, {{"mode", "reflect"}});
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2}));
}

TEST(ShapeOpsPadTest, Float16ConstantValue) {
  Tensor x = Tensor::FromFloat(DType::kFloat16, {2}, {1.f, 2.f});
  Tensor cv = Tensor::FromFloat(DType::kFloat16, {}, {0.5f});
  Tensor y = Run1("Pad", {X(x), C(Ints({1, 1})), X(cv)});
  EXPECT_EQ(y.dtype(), DType::kFloat16);
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{0.5f, 1.f, 2.f, 0.5f}));
}

TEST(ShapeOpsPadTest, ErrorsAreClear) {
  const Tensor x = F32({2, 2}, Iota(4));
  EXPECT_CONTAINS(ErrorOf("Pad", {X(x), C(Ints({1, 1}))}), "expected 2 x 2");
  EXPECT_CONTAINS(ErrorOf("Pad", {X(x), C(Ints({1, 1, 1, 1}))}, {{"mode", "mirror"}}), "unknown mode 'mirror'");
  EXPECT_CONTAINS(ErrorOf("Pad", {X(x), C(Ints({0, -3, 0, 0}))}), "negative size");
  EXPECT_CONTAINS(ErrorOf("Pad", {X(x), C(Ints({0, 1, 0, 0})), C(Ints({1}))}), "constant_value must be");
}

// ---- DepthToSpace / SpaceToDepth ----------------------------------------------------------

TEST(ShapeOpsDepthSpaceTest, DepthToSpaceModes) {
  const Tensor x = F32({1, 8, 1, 1}, Iota(8));
  Tensor y = Run1("DepthToSpace", {X(x)}, {{"blocksize", 2}});
  EXPECT_EQ(y.shape(), (Shape{1, 2, 2, 2}));
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{0, 2, 4, 6, 1, 3, 5, 7}));
  y = Run1("DepthToSpace", {X(x)}, {{"blocksize", 2}, {"mode", "CRD"}});
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));
  // Spatial interleaving on a [1,4,2,2] input (DCR).
  y = Run1("DepthToSpace", {X(F32({1, 4, 2, 2}, Iota(16)))}, {{"blocksize", 2}});
  EXPECT_EQ(y.shape(), (Shape{1, 1, 4, 4}));
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{0, 4, 1, 5, 8, 12, 9, 13, 2, 6, 3, 7, 10, 14, 11, 15}));
  EXPECT_CONTAINS(ErrorOf("DepthToSpace", {X(F32({1, 6, 1, 1}, Iota(6)))}, {{"blocksize", 2}}),
                  "divisible by blocksize^2 (4)");
}

TEST(ShapeOpsDepthSpaceTest, SpaceToDepthInvertsDepthToSpace) {
  Tensor y = Run1("SpaceToDepth", {X(F32({1, 2, 2, 2}, Iota(8)))}, {{"blocksize", 2}});
  EXPECT_EQ(y.shape(), (Shape{1, 8, 1, 1}));
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{0, 4, 1, 5, 2, 6, 3, 7}));
  std::vector<int64_t> v(144);
  for (int i = 0; i < 144; ++i) v[i] = i * 7 - 50;
  Tensor s2d = Run1("SpaceToDepth", {X(I64({2, 3, 4, 6}, v))}, {{"blocksize", 2}});
  EXPECT_EQ(s2d.shape(), (Shape{2, 12, 2, 3}));
  Tensor back = Run1("DepthToSpace", {X(s2d)}, {{"blocksize", 2}});
  EXPECT_EQ(back.ToInt64(), v);
  EXPECT_CONTAINS(ErrorOf("SpaceToDepth", {X(F32({1, 1, 3, 2}, Iota(6)))}, {{"blocksize", 2}}), "divisible");
}

// ---- Trilu / OneHot ------------------------------------------------------------------------

TEST(ShapeOpsTriluTest, UpperLowerWithK) {
  const Tensor x = F32({3, 3}, Iota(9, 1));
  EXPECT_EQ(Run1("Trilu", {X(x)}).ToFloat(), (std::vector<float>{1, 2, 3, 0, 5, 6, 0, 0, 9}));
  EXPECT_EQ(Run1("Trilu", {X(x), C(I64({}, {1}))}).ToFloat(),
            (std::vector<float>{0, 2, 3, 0, 0, 6, 0, 0, 0}));
  EXPECT_EQ(Run1("Trilu", {X(x)}, {{"upper", 0}}).ToFloat(), (std::vector<float>{1, 0, 0, 4, 5, 0, 7, 8, 9}));
  EXPECT_EQ(Run1("Trilu", {X(x), C(I64({}, {-1}))}, {{"upper", 0}}).ToFloat(),
            (std::vector<float>{0, 0, 0, 4, 0, 0, 7, 8, 0}));
  // Batched, non-square, k beyond the matrix.
  Tensor y = Run1("Trilu", {X(I64({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})), C(I64({}, {-5}))});
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  EXPECT_CONTAINS(ErrorOf("Trilu", {X(F32({3}, Iota(3)))}), "rank >= 2");
}

TEST(ShapeOpsOneHotTest, AxesAndNegativeIndices) {
  const Tensor values = F32({2}, {0, 3});
  Tensor y = Run1("OneHot", {X(I64({3}, {1, -1, 5})), C(I64({}, {4})), X(values)});
  EXPECT_EQ(y.shape(), (Shape{3, 4}));
  EXPECT_EQ(y.ToFloat(), (std::vector<float>{0, 3, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0}));
  y = Run1("OneHot", {X(I64({2}, {0, 2})), C(F32({}, {3})), X(I64({2}, {-1, 1}))}, {{"axis", 0}});
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(y.ToInt64(), (std::vector<int64_t>{1, -1, -1, -1, -1, 1}));
  EXPECT_CONTAINS(ErrorOf("OneHot", {X(I64({2}, {0, 2})), X(I64({}, {3})), X(values)}), "'depth'");
}

}  // namespace
}  // namespace kiln
