// DimExpr: integer polynomials over dim symbols, in canonical form.
#include "graph/dim_expr.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {
namespace {

absl::Status Overflow(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("dim arithmetic overflows int64 (", what, ")"));
}

bool MulOverflows(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }
bool AddOverflows(int64_t a, int64_t b, int64_t* out) { return __builtin_add_overflow(a, b, out); }

// Removes the occurrences of `d` from `m` (a sub-multiset); false if `d` is not one.
bool DivideMonomial(const std::vector<int>& m, const std::vector<int>& d, std::vector<int>* out) {
  out->clear();
  size_t j = 0;
  for (int s : m) {
    if (j < d.size() && d[j] == s) {
      ++j;
    } else {
      out->push_back(s);
    }
  }
  return j == d.size();
}

}  // namespace

std::vector<int64_t> LargestValues(absl::Span<const DimSymbol> symbols) {
  std::vector<int64_t> out;
  for (const DimSymbol& s : symbols) out.push_back(s.max);
  return out;
}

std::vector<int64_t> OptValues(absl::Span<const DimSymbol> symbols) {
  std::vector<int64_t> out;
  for (const DimSymbol& s : symbols) out.push_back(s.opt > 0 ? s.opt : s.max);
  return out;
}

DimExpr DimExpr::Constant(int64_t c) {
  DimExpr e;
  if (c != 0) e.terms_[{}] = c;
  return e;
}

DimExpr DimExpr::Symbol(int id) {
  DimExpr e;
  e.terms_[{id}] = 1;
  return e;
}

absl::StatusOr<DimExpr> DimExpr::Add(const DimExpr& a, const DimExpr& b) {
  DimExpr r = a;
  for (const auto& [m, c] : b.terms_) {
    int64_t sum = 0;
    if (AddOverflows(r.terms_[m], c, &sum)) return Overflow("a sum");
    if (sum == 0) {
      r.terms_.erase(m);
    } else {
      r.terms_[m] = sum;
    }
  }
  return r;
}

absl::StatusOr<DimExpr> DimExpr::Sub(const DimExpr& a, const DimExpr& b) {
  DimExpr neg;
  for (const auto& [m, c] : b.terms_) {
    if (c == INT64_MIN) return Overflow("a difference");
    neg.terms_[m] = -c;
  }
  return Add(a, neg);
}

absl::StatusOr<DimExpr> DimExpr::Product(absl::Span<const DimExpr> factors) {
  DimExpr p = Constant(1);
  for (const DimExpr& f : factors) {
    absl::StatusOr<DimExpr> next = Mul(p, f);
    if (!next.ok()) return next.status();
    p = *std::move(next);
  }
  return p;
}

absl::StatusOr<DimExpr> DimExpr::Mul(const DimExpr& a, const DimExpr& b) {
  DimExpr r;
  for (const auto& [ma, ca] : a.terms_) {
    for (const auto& [mb, cb] : b.terms_) {
      Monomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end());
      int64_t c = 0;
      if (MulOverflows(ca, cb, &c)) return Overflow("a product");
      DimExpr term;
      term.terms_[m] = c;
      absl::StatusOr<DimExpr> sum = Add(r, term);
      if (!sum.ok()) return sum.status();
      r = *std::move(sum);
    }
  }
  return r;
}

std::optional<DimExpr> DimExpr::DivideExactly(const DimExpr& a, const DimExpr& d) {
  if (d.terms_.size() != 1) return std::nullopt;
  const auto& [dm, dc] = *d.terms_.begin();
  DimExpr r;
  for (const auto& [m, c] : a.terms_) {
    Monomial q;
    if ((dc == -1 && c == INT64_MIN) || c % dc != 0 || !DivideMonomial(m, dm, &q)) return std::nullopt;
    r.terms_[q] = c / dc;  // distinct monomials stay distinct after removing dm
  }
  return r;
}

bool DimExpr::IsConstant() const { return terms_.empty() || (terms_.size() == 1 && terms_.begin()->first.empty()); }

std::optional<int> DimExpr::AsSymbol() const {
  if (terms_.size() != 1) return std::nullopt;
  const auto& [monomial, coefficient] = *terms_.begin();
  if (monomial.size() != 1 || coefficient != 1) return std::nullopt;
  return monomial[0];
}

std::optional<int64_t> DimExpr::constant() const {
  if (!IsConstant()) return std::nullopt;
  return terms_.empty() ? 0 : terms_.begin()->second;
}

absl::StatusOr<int64_t> DimExpr::Evaluate(absl::Span<const int64_t> values) const {
  int64_t total = 0;
  for (const auto& [m, c] : terms_) {
    int64_t term = c;
    for (int s : m) {
      if (s < 0 || static_cast<size_t>(s) >= values.size()) {
        return absl::InvalidArgumentError(absl::StrCat("dim symbol ", s, " has no value"));
      }
      if (MulOverflows(term, values[s], &term)) return Overflow("evaluating");
    }
    if (AddOverflows(total, term, &total)) return Overflow("evaluating");
  }
  return total;
}

absl::StatusOr<std::pair<int64_t, int64_t>> DimExpr::Bounds(absl::Span<const DimSymbol> symbols) const {
  int64_t lo = 0, hi = 0;
  for (const auto& [m, c] : terms_) {
    int64_t tlo = 1, thi = 1;  // the monomial's range; symbols are >= 0
    for (int s : m) {
      if (s < 0 || static_cast<size_t>(s) >= symbols.size()) {
        return absl::InvalidArgumentError(absl::StrCat("dim symbol ", s, " has no range"));
      }
      if (symbols[s].min < 0 || symbols[s].min > symbols[s].max) {
        return absl::InvalidArgumentError(absl::StrCat("dim '", symbols[s].name, "' has the range ", symbols[s].min,
                                                       "..", symbols[s].max));
      }
      if (MulOverflows(tlo, symbols[s].min, &tlo) || MulOverflows(thi, symbols[s].max, &thi)) {
        return Overflow("bounds");
      }
    }
    int64_t a = 0, b = 0;
    if (MulOverflows(c, tlo, &a) || MulOverflows(c, thi, &b)) return Overflow("bounds");
    if (AddOverflows(lo, std::min(a, b), &lo) || AddOverflows(hi, std::max(a, b), &hi)) return Overflow("bounds");
  }
  return std::make_pair(lo, hi);
}

std::string DimExpr::ToString(absl::Span<const DimSymbol> symbols) const {
  if (terms_.empty()) return "0";
  std::vector<std::pair<Monomial, int64_t>> order(terms_.begin(), terms_.end());
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& x, const auto& y) { return x.first.size() > y.first.size(); });
  std::string out;
  for (size_t i = 0; i < order.size(); ++i) {
    const auto& [m, c] = order[i];
    const uint64_t mag = c < 0 ? 0 - static_cast<uint64_t>(c) : static_cast<uint64_t>(c);
    if (i == 0) {
      if (c < 0) out += "-";
    } else {
      out += c < 0 ? " - " : " + ";
    }
    std::vector<std::string> factors;
    if (mag != 1 || m.empty()) factors.push_back(absl::StrCat(mag));
    for (int s : m) {
      factors.push_back(s >= 0 && static_cast<size_t>(s) < symbols.size() ? symbols[s].name : absl::StrCat("$", s));
    }
    out += absl::StrJoin(factors, "*");
  }
  return out;
}

namespace {

// Recursive descent over "expr := term (('+'|'-') term)*", "term := factor ('*'
// factor)*", "factor := integer | name | '-' factor | '(' expr ')'".
class DimParser {
 public:
  DimParser(absl::string_view text, absl::Span<const DimSymbol> symbols) : text_(text), symbols_(symbols) {}

  absl::StatusOr<DimExpr> Run() {
    absl::StatusOr<DimExpr> e = Expr(0);
    if (!e.ok()) return e;
    Skip();
    if (at_ != text_.size()) return Error("unexpected character");
    return e;
  }

 private:
  static constexpr int kMaxDepth = 64;

  void Skip() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("dim expression '", text_, "': ", what, " at offset ", at_));
  }

  absl::StatusOr<DimExpr> Expr(int depth) {
    absl::StatusOr<DimExpr> e = Term(depth);
    for (Skip(); e.ok() && at_ < text_.size() && (text_[at_] == '+' || text_[at_] == '-'); Skip()) {
      const bool plus = text_[at_++] == '+';
      absl::StatusOr<DimExpr> t = Term(depth);
      if (!t.ok()) return t;
      e = plus ? DimExpr::Add(*e, *t) : DimExpr::Sub(*e, *t);
    }
    return e;
  }

  absl::StatusOr<DimExpr> Term(int depth) {
    absl::StatusOr<DimExpr> e = Factor(depth);
    for (Skip(); e.ok() && at_ < text_.size() && text_[at_] == '*'; Skip()) {
      ++at_;
      absl::StatusOr<DimExpr> f = Factor(depth);
      if (!f.ok()) return f;
      e = DimExpr::Mul(*e, *f);
    }
    return e;
  }

  absl::StatusOr<DimExpr> Factor(int depth) {
    Skip();
    if (at_ >= text_.size()) return Error("missing operand");
    const char ch = text_[at_];
    if (ch == '-') {  // unary minus, as ToString writes a leading negative term
      if (depth >= kMaxDepth) return Error("too deeply nested");
      ++at_;
      absl::StatusOr<DimExpr> f = Factor(depth + 1);
      if (!f.ok()) return f;
      return DimExpr::Sub(DimExpr(), *f);
    }
    if (ch == '(') {
      if (depth >= kMaxDepth) return Error("too deeply nested");
      ++at_;
      absl::StatusOr<DimExpr> e = Expr(depth + 1);
      if (!e.ok()) return e;
      Skip();
      if (at_ >= text_.size() || text_[at_] != ')') return Error("missing ')'");
      ++at_;
      return e;
    }
    if (std::isdigit(static_cast<unsigned char>(ch))) {
      int64_t v = 0;
      while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) {
        if (MulOverflows(v, 10, &v) || AddOverflows(v, text_[at_] - '0', &v)) return Error("integer out of range");
        ++at_;
      }
      return DimExpr::Constant(v);
    }
    if (std::isalpha(static_cast<unsigned char>(ch)) || ch == '_') {
      const size_t start = at_;
      while (at_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[at_])) || text_[at_] == '_')) ++at_;
      const absl::string_view name = text_.substr(start, at_ - start);
      for (size_t i = 0; i < symbols_.size(); ++i) {
        if (symbols_[i].name == name) return DimExpr::Symbol(static_cast<int>(i));
      }
      std::vector<std::string> known;
      for (const DimSymbol& s : symbols_) known.push_back(s.name);
      return absl::InvalidArgumentError(absl::StrCat("dim expression '", text_, "': unknown dim '", name, "' (known: ",
                                                     known.empty() ? "none" : absl::StrJoin(known, ", "), ")"));
    }
    return Error("unexpected character");
  }

  absl::string_view text_;
  absl::Span<const DimSymbol> symbols_;
  size_t at_ = 0;
};

}  // namespace

absl::StatusOr<DimExpr> DimExpr::Parse(absl::string_view text, absl::Span<const DimSymbol> symbols) {
  return DimParser(text, symbols).Run();
}

}  // namespace kiln
