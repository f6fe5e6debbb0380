// Tests for GatherND, ScatterND and ScatterElements (Scatter): the ONNX spec's
// examples, batch dims, reductions, negative indices, and the errors.
#include <gtest/gtest.h>

#include "graph/ops/op_test_util.h"

namespace kiln {
namespace {

using namespace op_test;  // NOLINT: test helpers

TEST(GatherNdTest, SlicesScalarsAndBatchDims) {
  const Tensor data = F32({2, 2}, {0, 1, 2, 3});
  ExpectNear(Run1("GatherND", {X(data), X(I64({2, 2}, {0, 0, 1, 1}))}), {2}, {0, 3});
  ExpectNear(Run1("GatherND", {X(data), X(I64({2, 1}, {1, -2}))}), {2, 2}, {2, 3, 0, 1});
  const Tensor cube = F32({2, 2, 2}, Iota(8));
  ExpectNear(Run1("GatherND", {X(cube), X(I64({2, 1}, {1, 0}))}, {{"batch_dims", int64_t{1}}}), {2, 2},
             {2, 3, 4, 5});
}

TEST(GatherNdTest, Errors) {
  const Tensor data = F32({2, 2}, {0, 1, 2, 3});
  EXPECT_NE(ErrorOf("GatherND", {X(data), X(I64({1, 3}, {0, 0, 0}))}).find("last dim of indices"), std::string::npos);
  EXPECT_NE(ErrorOf("GatherND", {X(data), X(I64({1, 2}, {0, 2}))}).find("index 2 is out of range for axis 1"),
            std::string::npos);
  EXPECT_NE(ErrorOf("GatherND", {X(data), X(I64({1, 1}, {0}))}, {{"batch_dims", int64_t{2}}}).find("batch_dims"),
            std::string::npos);
  EXPECT_NE(ErrorOf("GatherND", {X(data), X(I32({1, 1}, {0}))}).find("indices must be i64"), std::string::npos);
}

TEST(ScatterNdTest, ReplaceAndReductions) {
  const Tensor data = F32({4}, {1, 2, 3, 4});
  const Tensor idx = I64({3, 1}, {1, -1, 1});
  const Tensor upd = F32({3}, {10, 20, 30});
  ExpectNear(Run1("ScatterND", {X(data), X(I64({2, 1}, {0, 3})), X(F32({2}, {9, 8}))}), {4}, {9, 2, 3, 8});
  ExpectNear(Run1("ScatterND", {X(data), X(idx), X(upd)}, {{"reduction", std::string("add")}}), {4}, {1, 42, 3, 24});
  ExpectNear(Run1("ScatterND", {X(data), X(idx), X(upd)}, {{"reduction", std::string("mul")}}), {4}, {1, 600, 3, 80});
  ExpectNear(Run1("ScatterND", {X(data), X(idx), X(upd)}, {{"reduction", std::string("min")}}), {4}, {1, 2, 3, 4});
  const Tensor rows = Run1("ScatterND", {X(I64({2, 2}, {1, 2, 3, 4})), X(I64({1, 1}, {1})), X(I64({1, 2}, {7, 5}))},
                           {{"reduction", std::string("max")}});
  EXPECT_EQ(rows.ToInt64(), (std::vector<int64_t>{1, 2, 7, 5}));
}

TEST(ScatterNdTest, Errors) {
  const Tensor data = F32({4}, {1, 2, 3, 4});
  EXPECT_NE(ErrorOf("ScatterND", {X(data), X(I64({1, 1}, {4})), X(F32({1}, {0}))}).find("out of range"),
            std::string::npos);
  EXPECT_NE(ErrorOf("ScatterND", {X(data), X(I64({1, 1}, {0})), X(F32({2}, {0, 1}))}).find("updates [2] must have shape [1]"),
            std::string::npos);
  EXPECT_NE(ErrorOf("ScatterND", {X(data), X(I64({1, 1}, {0})), X(F32({1}, {0}))}, {{"reduction", std::string("avg")}})
                .find("reduction 'avg'"),
            std::string::npos);
}

TEST(ScatterElementsTest, AxesReductionsAndTheLegacyName) {
  const Tensor data = F32({3, 3}, std::vector<float>(9, 0.f));
  const Tensor idx = I64({2, 3}, {1, 0, 2, 0, 2, 1});
  const Tensor upd = F32({2, 3}, {1.0f, 1.1f, 1.2f, 2.0f, 2.1f, 2.2f});
  const std::vector<float> want = {2.0f, 1.1f, 0.0f, 1.0f, 0.0f, 2.2f, 0.0f, 2.1f, 1.2f};
  ExpectNear(Run1("ScatterElements", {X(data), X(idx), X(upd)}), {3, 3}, want);
  ExpectNear(Run1("Scatter", {X(data), X(idx), X(upd)}), {3, 3}, want);
  ExpectNear(Run1("ScatterElements", {X(F32({1, 5}, {1, 2, 3, 4, 5})), X(I64({1, 2}, {1, -2})),
                                      X(F32({1, 2}, {1.1f, 2.1f}))},
                  {{"axis", int64_t{1}}}),
             {1, 5}, {1, 1.1f, 3, 2.1f, 5});
  ExpectNear(Run1("ScatterElements", {X(F32({1, 5}, {1, 2, 3, 4, 5})), X(I64({1, 2}, {1, 1})),
                                      X(F32({1, 2}, {1.1f, 2.1f}))},
                  {{"axis", int64_t{1}}, {"reduction", std::string("add")}}),
             {1, 5}, {1, 5.2f, 3, 4, 5});
}

TEST(ScatterElementsTest, Errors) {
  const Tensor data = F32({2, 2}, {0, 1, 2, 3});
  EXPECT_NE(ErrorOf("ScatterElements", {X(data), X(I64({1, 2}, {0, 2})), X(F32({1, 2}, {0, 0}))}, {{"axis", int64_t{1}}})
                .find("index 2 is out of range for axis 1"),
            std::string::npos);
  EXPECT_NE(ErrorOf("ScatterElements", {X(data), X(I64({1, 2}, {0, 1})), X(F32({2, 1}, {0, 0}))}).find("must share"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln
