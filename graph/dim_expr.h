// Symbolic dimensions for dynamic shapes (issue 34, stage 0): a dim is an integer
// polynomial over named symbols ("batch", "seq") whose values lie in ranges given at
// compile time (--dim seq=1..512). Shape inference will carry these beside the
// concrete shape (which stays the largest), so that a bundle can name each dim in
// terms of the symbols and a run can evaluate it for the actual sizes.
//
// Canonical form: a sum of terms coefficient * monomial, each monomial a sorted list
// of symbol ids (with repetition: seq*seq), no zero coefficients, so equal
// polynomials compare equal (batch*seq + seq*batch == 2*batch*seq). Arithmetic that
// would overflow int64 is an error, never a wrap.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kiln {

// A range of sizes of one dim, as given per input (`--input-shape x=1..32:8x1..512`):
// min == max for a fixed size; opt as DimSymbol's.
struct SizeRange {
  int64_t min = 0, max = 0;
  int64_t opt = 0;
};

// A named dim of the model's inputs and its range of values. `opt` (0: none given) is
// the size to tune for (`--dim seq=1..512:128`, min <= opt <= max): `kiln compile
// --tune` measures the GEMMs at it (OptValues).
struct DimSymbol {
  std::string name;
  int64_t min = 0, max = 0;
  int64_t opt = 0;
};

// Each symbol's largest value, in symbol-id order: the sizes a dynamic graph's concrete
// shapes are for.
std::vector<int64_t> LargestValues(absl::Span<const DimSymbol> symbols);

// Each symbol's opt value, or its largest where none was given: the sizes tuning
// measures at.
std::vector<int64_t> OptValues(absl::Span<const DimSymbol> symbols);

class DimExpr {
 public:
  DimExpr() = default;  // the constant 0
  static DimExpr Constant(int64_t c);
  static DimExpr Symbol(int id);  // the id indexes the symbol table the caller keeps

  static absl::StatusOr<DimExpr> Add(const DimExpr& a, const DimExpr& b);
  static absl::StatusOr<DimExpr> Sub(const DimExpr& a, const DimExpr& b);
  static absl::StatusOr<DimExpr> Mul(const DimExpr& a, const DimExpr& b);
  // The product of `factors` (1 for none).
  static absl::StatusOr<DimExpr> Product(absl::Span<const DimExpr> factors);
  // a / d when d is one term (a constant times a monomial, not 0) dividing every term
  // of a exactly; nullopt otherwise (Reshape's inferred dim: (768*batch*seq) / 768).
  static std::optional<DimExpr> DivideExactly(const DimExpr& a, const DimExpr& d);

  bool IsConstant() const;
  std::optional<int64_t> constant() const;  // the value when IsConstant()
  std::optional<int> AsSymbol() const;      // the id when the expression is one symbol
  bool operator==(const DimExpr& other) const { return terms_ == other.terms_; }
  bool operator!=(const DimExpr& other) const { return !(*this == other); }

  // The value for the symbols' values (indexed by id). InvalidArgument when an id
  // has no value or the arithmetic overflows.
  absl::StatusOr<int64_t> Evaluate(absl::Span<const int64_t> values) const;
  // The least and greatest value over the symbols' ranges (interval arithmetic per
  // term; exact for polynomials with non-negative coefficients).
  absl::StatusOr<std::pair<int64_t, int64_t>> Bounds(absl::Span<const DimSymbol> symbols) const;

  // "2*batch*seq + seq - 1" (terms by falling degree, then by symbol ids); "0".
  std::string ToString(absl::Span<const DimSymbol> symbols) const;
  // Integers, symbol names, + - * (and unary -) and parentheses. InvalidArgument naming an unknown
  // symbol (and the known ones) or the position of a syntax error.
  static absl::StatusOr<DimExpr> Parse(absl::string_view text, absl::Span<const DimSymbol> symbols);

 private:
  using Monomial = std::vector<int>;
  std::map<Monomial, int64_t> terms_;
};

}  // namespace kiln
