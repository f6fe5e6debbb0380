// Tests for Einsum: explicit and implicit outputs, ellipses, diagonals, errors.
#include <gtest/gtest.h>

#include "graph/ops/op_test_util.h"

namespace kiln {
namespace {

using namespace op_test;  // NOLINT: test helpers

Attrs Eq(const char* e) { return {{"equation", std::string(e)}}; }

TEST(EinsumTest, ExplicitImplicitEllipsisAndDiagonal) {
  const Tensor a = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = F32({3, 2}, {1, 0, 0, 1, 1, 1});
  ExpectNear(Run1("Einsum", {X(a), X(b)}, Eq("ij,jk->ik")), {2, 2}, {4, 5, 10, 11});
  ExpectNear(Run1("Einsum", {X(a), X(b)}, Eq("ij,jk")), {2, 2}, {4, 5, 10, 11});  // implicit: ik
  ExpectNear(Run1("Einsum", {X(a)}, Eq("ij->ji")), {3, 2}, {1, 4, 2, 5, 3, 6});
  ExpectNear(Run1("Einsum", {X(a)}, Eq("ij->")), {}, {21});
  const Tensor sq = F32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  ExpectNear(Run1("Einsum", {X(sq)}, Eq("...ii->...i")), {2, 2}, {1, 4, 5, 8});
  ExpectNear(Run1("Einsum", {X(sq), X(F32({1, 2}, {1, 10}))}, Eq("...j,...j->...")), {2, 2}, {21, 43, 65, 87});
}

TEST(EinsumTest, Errors) {
  const Tensor a = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_NE(ErrorOf("Einsum", {X(a)}, Eq("ijk->i")).find("names 3 dims of an input of rank 2"), std::string::npos);
  EXPECT_NE(ErrorOf("Einsum", {X(a), X(a)}, Eq("ij,ij->ij,")).find("output letter ','"), std::string::npos);
  EXPECT_NE(ErrorOf("Einsum", {X(a), X(a)}, Eq("ij,jk->ik")).find("has size 3 and 2"), std::string::npos);
  EXPECT_NE(ErrorOf("Einsum", {X(a)}, Eq("ij->iz")).find("output letter 'z'"), std::string::npos);
  EXPECT_NE(ErrorOf("Einsum", {X(a), X(a)}, Eq("ij->i")).find("has 1 terms for 2 inputs"), std::string::npos);
}

}  // namespace
}  // namespace kiln
