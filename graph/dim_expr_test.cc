// Tests for DimExpr: canonical form, exact division, evaluation, bounds over the
// symbols' ranges, printing and parsing, and the errors (overflow, unknown dims).
#include "graph/dim_expr.h"

#include <gtest/gtest.h>

#include <vector>

namespace kiln {
namespace {

const std::vector<DimSymbol> kSymbols = {{"batch", 1, 32}, {"seq", 1, 512}};

DimExpr P(const std::string& text) {
  absl::StatusOr<DimExpr> e = DimExpr::Parse(text, kSymbols);
  EXPECT_TRUE(e.ok()) << text << ": " << e.status();
  return e.ok() ? *e : DimExpr();
}

TEST(DimExprTest, CanonicalFormMakesEqualPolynomialsEqual) {
  EXPECT_EQ(P("batch*seq + seq*batch"), P("2*batch*seq"));
  EXPECT_EQ(P("(batch + 1)*(batch - 1)"), P("batch*batch - 1"));
  EXPECT_EQ(P("seq - seq"), DimExpr::Constant(0));
  EXPECT_TRUE(P("3*(2 + 4)").IsConstant());
  EXPECT_EQ(P("3*(2 + 4)").constant(), 18);
  EXPECT_FALSE(P("seq + 1").constant().has_value());
  EXPECT_NE(P("batch*seq"), P("batch*seq*seq"));
}

TEST(DimExprTest, PrintsByFallingDegree) {
  EXPECT_EQ(P("seq - 1 + seq*batch*2").ToString(kSymbols), "2*batch*seq + seq - 1");
  EXPECT_EQ(P("1 - seq").ToString(kSymbols), "-seq + 1");
  EXPECT_EQ(P("seq*seq*768").ToString(kSymbols), "768*seq*seq");
  EXPECT_EQ(DimExpr().ToString(kSymbols), "0");
  EXPECT_EQ(DimExpr::Constant(-7).ToString(kSymbols), "-7");
  EXPECT_EQ(P("-(seq - 2)"), P("2 - seq"));
  // Printing parses back to the same polynomial.
  for (const char* text : {"2*batch*seq + seq - 1", "-seq + 1", "768*seq*seq", "batch"}) {
    EXPECT_EQ(P(P(text).ToString(kSymbols)), P(text)) << text;
  }
}

TEST(DimExprTest, DividesOnlyExactly) {
  // Reshape's inferred dim: [batch, seq, 768] to [-1, 768].
  auto rows = DimExpr::DivideExactly(P("768*batch*seq"), DimExpr::Constant(768));
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(*rows, P("batch*seq"));
  EXPECT_EQ(DimExpr::DivideExactly(P("batch*seq"), P("seq")), P("batch"));
  EXPECT_EQ(DimExpr::DivideExactly(P("2*batch + 4"), DimExpr::Constant(2)), P("batch + 2"));
  EXPECT_EQ(DimExpr::DivideExactly(P("batch*seq + 1"), P("seq")), std::nullopt);
  EXPECT_EQ(DimExpr::DivideExactly(P("3*batch"), DimExpr::Constant(2)), std::nullopt);
  EXPECT_EQ(DimExpr::DivideExactly(P("batch"), P("batch + seq")), std::nullopt);  // not one term
  EXPECT_EQ(DimExpr::DivideExactly(P("batch"), DimExpr()), std::nullopt);        // by zero
  EXPECT_EQ(DimExpr::DivideExactly(DimExpr::Constant(INT64_MIN), DimExpr::Constant(-1)), std::nullopt);
}

TEST(DimExprTest, EvaluatesAndBounds) {
  const DimExpr e = P("2*batch*seq + seq - 1");
  EXPECT_EQ(e.Evaluate({3, 17}).value(), 2 * 3 * 17 + 17 - 1);
  EXPECT_FALSE(e.Evaluate({3}).ok());  // seq has no value
  auto bounds = e.Bounds(kSymbols);
  ASSERT_TRUE(bounds.ok()) << bounds.status();
  EXPECT_EQ(*bounds, std::make_pair(int64_t{2 + 1 - 1}, int64_t{2 * 32 * 512 + 512 - 1}));
  // A negative coefficient takes the other end of its term's range.
  EXPECT_EQ(P("1024 - seq").Bounds(kSymbols).value(), std::make_pair(int64_t{512}, int64_t{1023}));
  EXPECT_FALSE(P("seq").Bounds({}).ok());
  EXPECT_FALSE(P("seq").Bounds({{"batch", 1, 32}, {"seq", 5, 4}}).ok());  // empty range
}

TEST(DimExprTest, OverflowIsAnErrorNotAWrap) {
  const DimExpr big = DimExpr::Constant(int64_t{1} << 62);
  EXPECT_FALSE(DimExpr::Mul(big, DimExpr::Constant(4)).ok());
  EXPECT_FALSE(DimExpr::Add(big, big).ok());
  EXPECT_FALSE(DimExpr::Sub(DimExpr::Constant(INT64_MIN), DimExpr::Constant(1)).ok());
  auto huge = DimExpr::Mul(big, P("seq"));
  ASSERT_TRUE(huge.ok());
  EXPECT_FALSE(huge->Evaluate({1, 512}).ok());
  EXPECT_FALSE(huge->Bounds(kSymbols).ok());
  EXPECT_FALSE(DimExpr::Parse("99999999999999999999", kSymbols).ok());
}

TEST(DimExprTest, ParseErrorsSayWhat) {
  auto unknown = DimExpr::Parse("batch*tokens", kSymbols);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "dim expression 'batch*tokens': unknown dim 'tokens' (known: batch, seq)");
  for (const char* bad : {"", "batch +", "(seq", "seq)", "2 ** seq", "seq / 2", "--"}) {
    EXPECT_FALSE(DimExpr::Parse(bad, kSymbols).ok()) << bad;
  }
  std::string deep(100, '(');
  deep += "1" + std::string(100, ')');
  EXPECT_FALSE(DimExpr::Parse(deep, kSymbols).ok());
}

}  // namespace
}  // namespace kiln
