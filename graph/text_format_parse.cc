// Lexer and parser of the graph text format (grammar in text_format.h).
#include "graph/text_format.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "graph/fused_group.h"
#include "graph/text_format_internal.h"

namespace kiln {

namespace text_format_internal {

// Parses a float literal as the lexer delimits it (sign, digits, '.', exponent,
// or inf/nan). Locale-independent.
bool ParseFloatText(absl::string_view s, float* out) {
  bool negative = false;
  absl::string_view body = s;
  if (!body.empty() && (body[0] == '-' || body[0] == '+')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body == "inf") {
    *out = negative ? -INFINITY : INFINITY;
    return true;
  }
  if (body == "nan") {
    *out = negative ? -NAN : NAN;
    return true;
  }
  return absl::SimpleAtof(s, out);
}

}  // namespace text_format_internal

namespace {

using namespace text_format_internal;  // NOLINT: the shared lexical rules

// ---- Lexer -------------------------------------------------------------------

enum class TokKind { kEnd, kIdent, kValue, kAt, kString, kNumber, kPunct };

struct Token {
  TokKind kind = TokKind::kEnd;
  std::string text;        // identifier, decoded name or string, number, punctuation
  absl::string_view raw;   // the source characters (for messages)
  bool is_float = false;   // numbers: has '.', exponent, inf or nan
  int line = 0;
  int col = 0;
};

std::string At(int line, int col) { return absl::StrCat(line, ":", col, ": "); }

std::string Describe(const Token& t) {
  if (t.kind == TokKind::kEnd) return "end of input";
  absl::string_view raw = t.raw;
  if (raw.size() > 40) return absl::StrCat("'", raw.substr(0, 37), "...'");
  return absl::StrCat("'", raw, "'");
}

class Lexer {
 public:
  explicit Lexer(absl::string_view src) : src_(src) {}

  absl::StatusOr<std::vector<Token>> Tokenize() {
    std::vector<Token> tokens;
    while (true) {
      SkipSpaceAndComments();
      Token t;
      t.line = line_;
      t.col = Col();
      const size_t start = pos_;
      if (pos_ >= src_.size()) {
        tokens.push_back(t);
        return tokens;
      }
      const char c = src_[pos_];
      if (c == '%' || c == '@') {
        t.kind = c == '%' ? TokKind::kValue : TokKind::kAt;
        ++pos_;
        if (Cur() == '"') {
          KILN_ASSIGN_OR_RETURN(t.text, ReadQuoted());
        } else {
          while (pos_ < src_.size() &&
                 (IsNameChar(src_[pos_]) || (src_[pos_] == ':' && IsDigit(PeekChar(1))))) {
            ++pos_;
          }
          t.text = std::string(src_.substr(start + 1, pos_ - start - 1));
          if (t.text.empty()) {
            return Error(t.line, t.col,
                         absl::StrCat("expected a name or a quoted string after '", std::string(1, c),
                                      "'"));
          }
        }
      } else if (c == '"') {
        t.kind = TokKind::kString;
        KILN_ASSIGN_OR_RETURN(t.text, ReadQuoted());
      } else if (StartsNumber()) {
        t.kind = TokKind::kNumber;
        KILN_RETURN_IF_ERROR(ReadNumber(&t));
      } else if (IsIdentStart(c)) {
        t.kind = TokKind::kIdent;
        while (pos_ < src_.size() && IsIdentChar(src_[pos_])) ++pos_;
        t.text = std::string(src_.substr(start, pos_ - start));
      } else if (c == ':' && PeekChar(1) == ':') {
        t.kind = TokKind::kPunct;
        t.text = "::";
        pos_ += 2;
      } else if (std::strchr("{}()[],=:<>?", c) != nullptr) {
        t.kind = TokKind::kPunct;
        t.text = std::string(1, c);
        ++pos_;
      } else {
        const unsigned char u = static_cast<unsigned char>(c);
        std::string shown = (u < 0x20 || u >= 0x7f) ? absl::StrFormat("\\x%02x", u) : std::string(1, c);
        return Error(t.line, t.col, absl::StrCat("unexpected character '", shown, "'"));
      }
      t.raw = src_.substr(start, pos_ - start);
      tokens.push_back(std::move(t));
    }
  }

 private:
  char Cur() const { return pos_ < src_.size() ? src_[pos_] : '\0'; }
  char PeekChar(size_t k) const { return pos_ + k < src_.size() ? src_[pos_ + k] : '\0'; }
  int Col() const { return static_cast<int>(pos_ - line_start_) + 1; }

  absl::Status Error(int line, int col, absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(At(line, col), message));
  }

  void SkipSpaceAndComments() {
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      if (c == '\n') {
        ++pos_;
        ++line_;
        line_start_ = pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < src_.size() && src_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  // "inf" or "nan" at offset k, not followed by an identifier character.
  bool WordAt(size_t k) const {
    absl::string_view rest = src_.substr(std::min(src_.size(), pos_ + k));
    if (rest.size() < 3) return false;
    absl::string_view word = rest.substr(0, 3);
    if (word != "inf" && word != "nan") return false;
    return rest.size() == 3 || !IsIdentChar(rest[3]);
  }

  bool StartsNumber() const {
    const char c = Cur();
    if (IsDigit(c)) return true;
    if (c == '.') return IsDigit(PeekChar(1));
    if (c == '-' || c == '+') {
      const char d = PeekChar(1);
      return IsDigit(d) || (d == '.' && IsDigit(PeekChar(2))) || WordAt(1);
    }
    return false;
  }

  absl::Status ReadNumber(Token* t) {
    const size_t start = pos_;
    if (Cur() == '-' || Cur() == '+') ++pos_;
    if (WordAt(0)) {
      pos_ += 3;
      t->is_float = true;
    } else {
      while (IsDigit(Cur())) ++pos_;
      if (Cur() == '.') {
        t->is_float = true;
        ++pos_;
        while (IsDigit(Cur())) ++pos_;
      }
      if (Cur() == 'e' || Cur() == 'E') {
        size_t k = 1;
        if (PeekChar(1) == '+' || PeekChar(1) == '-') k = 2;
        if (IsDigit(PeekChar(k))) {
          t->is_float = true;
          pos_ += k;
          while (IsDigit(Cur())) ++pos_;
        }
      }
    }
    t->text = std::string(src_.substr(start, pos_ - start));
    if (IsIdentChar(Cur()) && Cur() != '.') {
      size_t end = pos_;
      while (end < src_.size() && IsIdentChar(src_[end])) ++end;
      return Error(t->line, t->col,
                   absl::StrCat("malformed number '", src_.substr(start, end - start), "'"));
    }
    if (Cur() == '.') {
      return Error(t->line, t->col, absl::StrCat("malformed number '", t->text, ".'"));
    }
    return absl::OkStatus();
  }

  static int HexDigit(char c) {
    if (IsDigit(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Reads "..." starting at the opening quote; returns the decoded contents.
  absl::StatusOr<std::string> ReadQuoted() {
    const int line = line_;
    const int col = Col();
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= src_.size() || src_[pos_] == '\n') {
        return Error(line, col, "unterminated string (a string must end on the line it starts)");
      }
      const char c = src_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      const int esc_col = Col() - 1;
      const char e = Cur();
      ++pos_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case 'x': {
          const int hi = HexDigit(Cur());
          const int lo = HexDigit(PeekChar(1));
          if (hi < 0 || lo < 0) return Error(line_, esc_col, "expected two hex digits after '\\x'");
          out += static_cast<char>(hi * 16 + lo);
          pos_ += 2;
          break;
        }
        default:
          return Error(line_, esc_col,
                       "unknown escape in string (expected \\\" \\\\ \\n \\t \\r \\0 or \\xHH)");
      }
    }
  }

  absl::string_view src_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
};

// ---- Parser ------------------------------------------------------------------

struct TypeSpec {
  bool typed = false;
  DType dtype = DType::kFloat32;
  Shape shape;
};

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  absl::StatusOr<std::unique_ptr<Graph>> Parse() {
    graph_ = std::make_unique<Graph>();
    if (!IsIdent(Peek(), "graph")) return Expected(Peek(), "'graph'");
    Next();
    if (Peek().kind == TokKind::kAt) graph_->set_name(Next().text);
    KILN_RETURN_IF_ERROR(Expect("{", "to open the graph body"));
    while (!IsPunct(Peek(), "}")) {
      if (Peek().kind == TokKind::kEnd) return Expected(Peek(), "'}' to close the graph");
      KILN_RETURN_IF_ERROR(ParseStatement());
    }
    Next();
    if (Peek().kind != TokKind::kEnd) {
      return Expected(Peek(), "end of input after the graph's closing '}'");
    }
    for (const Entry& e : entries_) {
      if (!e.defined) {
        return absl::InvalidArgumentError(absl::StrCat(
            At(e.line, e.col), "value ", FormatValueName(e.value->name()),
            " is used but never defined (by 'input', 'const' or a node)"));
      }
    }
    return std::move(graph_);
  }

 private:
  struct Entry {
    Value* value = nullptr;
    bool defined = false;
    int line = 0;  // first reference, or the definition
    int col = 0;
    int def_line = 0;
    int def_col = 0;
  };

  const Token& Peek(size_t k = 0) const {
    return tokens_[std::min(pos_ + k, tokens_.size() - 1)];
  }
  const Token& Next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  static bool IsPunct(const Token& t, absl::string_view p) {
    return t.kind == TokKind::kPunct && t.text == p;
  }
  static bool IsIdent(const Token& t, absl::string_view word) {
    return t.kind == TokKind::kIdent && t.text == word;
  }

  static absl::Status ErrorAt(const Token& t, absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat(At(t.line, t.col), message));
  }
  static absl::Status Expected(const Token& t, absl::string_view what) {
    return ErrorAt(t, absl::StrCat("expected ", what, ", got ", Describe(t)));
  }
  absl::Status Expect(absl::string_view punct, absl::string_view context) {
    if (!IsPunct(Peek(), punct)) {
      return Expected(Peek(), absl::StrCat("'", punct, "' ", context));
    }
    Next();
    return absl::OkStatus();
  }

  Entry& EntryFor(const Token& t) {
    auto it = index_.find(t.text);
    if (it != index_.end()) return entries_[it->second];
    Entry e;
    e.value = graph_->AddValue(t.text);
    e.line = t.line;
    e.col = t.col;
    index_[t.text] = entries_.size();
    entries_.push_back(e);
    return entries_.back();
  }

  absl::StatusOr<Value*> Reference(const Token& t) {
    if (t.text.empty()) return ErrorAt(t, "value names must not be empty");
    return EntryFor(t).value;
  }

  absl::StatusOr<Value*> Define(const Token& t) {
    if (t.text.empty()) return ErrorAt(t, "value names must not be empty");
    Entry& e = EntryFor(t);
    if (e.defined) {
      return ErrorAt(t, absl::StrCat("value ", FormatValueName(t.text), " is defined twice (first at ",
                                     e.def_line, ":", e.def_col, ")"));
    }
    e.defined = true;
    e.def_line = t.line;
    e.def_col = t.col;
    return e.value;
  }

  absl::Status ParseStatement() {
    const Token& t = Peek();
    if (IsIdent(t, "dim") && Peek(1).kind == TokKind::kIdent) return ParseDimSymbol();
    if (t.kind == TokKind::kIdent && Peek(1).kind == TokKind::kValue) {
      if (t.text == "input") return ParseInput();
      if (t.text == "const") return ParseConst();
      if (t.text == "output") return ParseOutput();
    }
    if (t.kind == TokKind::kValue) return ParseNode();
    if (t.kind == TokKind::kIdent || t.kind == TokKind::kString) return ParseCall({});
    return Expected(t, "a statement ('input', 'const', 'output' or a node) or '}'");
  }

  // dim NAME in [MIN, MAX] (opt OPT): a dim symbol of a dynamic graph.
  absl::Status ParseDimSymbol() {
    Next();  // dim
    DimSymbol s{.name = Next().text};
    if (!IsIdent(Peek(), "in")) return Expected(Peek(), "'in' and the dim's range [MIN, MAX]");
    Next();
    KILN_RETURN_IF_ERROR(Expect("[", "to open the dim's range"));
    KILN_ASSIGN_OR_RETURN(s.min, ParseInt(Peek(), "the least value of the dim"));
    Next();
    KILN_RETURN_IF_ERROR(Expect(",", "between the dim's least and largest values"));
    KILN_ASSIGN_OR_RETURN(s.max, ParseInt(Peek(), "the largest value of the dim"));
    if (s.min < 0 || s.max < s.min) return ErrorAt(Peek(), "a dim's range needs 0 <= MIN <= MAX");
    Next();
    KILN_RETURN_IF_ERROR(Expect("]", "to close the dim's range"));
    if (IsIdent(Peek(), "opt") && Peek(1).kind == TokKind::kNumber) {
      Next();
      KILN_ASSIGN_OR_RETURN(s.opt, ParseInt(Peek(), "the dim's opt value"));
      if (s.opt < s.min || s.opt > s.max) return ErrorAt(Peek(), "a dim's opt value lies in its range [MIN, MAX]");
      Next();
    }
    std::vector<DimSymbol> symbols = graph_->dim_symbols();
    symbols.push_back(std::move(s));
    graph_->set_dim_symbols(std::move(symbols));
    return absl::OkStatus();
  }

  // `KEYWORD "e1, e2, ..."` after a type or constant (dims, symbolic): the list of
  // expressions over the declared dim symbols; `count` of them.
  absl::StatusOr<std::optional<std::vector<DimExpr>>> ParseExprList(absl::string_view keyword, size_t count) {
    if (!IsIdent(Peek(), keyword) || Peek(1).kind != TokKind::kString) return std::nullopt;
    Next();
    const Token& t = Next();
    std::vector<DimExpr> out;
    for (absl::string_view part : absl::StrSplit(t.text, ',')) {
      absl::StatusOr<DimExpr> e = DimExpr::Parse(part, graph_->dim_symbols());
      if (!e.ok()) return ErrorAt(t, e.status().message());
      out.push_back(*std::move(e));
    }
    if (out.size() != count) {
      return ErrorAt(t, absl::StrCat(keyword, " lists ", out.size(), " expressions for ", count, " elements"));
    }
    return out;
  }

  absl::Status ParseTypeAndDims(Value* v) {
    KILN_ASSIGN_OR_RETURN(TypeSpec type, ParseType());
    if (!type.typed) return absl::OkStatus();
    v->SetType(type.dtype, type.shape);
    KILN_ASSIGN_OR_RETURN(auto dims, ParseExprList("dims", type.shape.size()));
    if (dims) v->SetDims(*std::move(dims));
    return absl::OkStatus();
  }

  absl::Status ParseInput() {
    Next();  // input
    KILN_ASSIGN_OR_RETURN(Value * v, Define(Next()));
    if (IsPunct(Peek(), ":")) {
      Next();
      KILN_RETURN_IF_ERROR(ParseTypeAndDims(v));
    }
    graph_->AddInput(v);
    return absl::OkStatus();
  }

  absl::Status ParseConst() {
    Next();  // const
    const Token& name = Next();
    KILN_ASSIGN_OR_RETURN(Value * v, Define(name));
    KILN_RETURN_IF_ERROR(Expect(":", "and the type of the constant"));
    const Token& type_tok = Peek();
    KILN_ASSIGN_OR_RETURN(TypeSpec type, ParseType());
    if (!type.typed) return ErrorAt(type_tok, "a constant needs a type, not '?'");
    KILN_RETURN_IF_ERROR(Expect("=", "and the constant's data"));
    KILN_ASSIGN_OR_RETURN(Tensor data, ParseData(type));
    const int64_t n = data.numel();
    graph_->SetConstant(v, std::move(data));
    KILN_ASSIGN_OR_RETURN(auto symbolic, ParseExprList("symbolic", n));
    if (symbolic) v->SetSymbolicData(*std::move(symbolic));
    return absl::OkStatus();
  }

  absl::Status ParseOutput() {
    Next();  // output
    while (true) {
      if (Peek().kind != TokKind::kValue) return Expected(Peek(), "a graph output (%name)");
      KILN_ASSIGN_OR_RETURN(Value * v, Reference(Next()));
      graph_->AddOutput(v);
      if (!IsPunct(Peek(), ",")) return absl::OkStatus();
      Next();
    }
  }

  absl::Status ParseNode() {
    std::vector<Value*> outputs;
    while (true) {
      if (Peek().kind != TokKind::kValue) return Expected(Peek(), "a node output (%name)");
      KILN_ASSIGN_OR_RETURN(Value * v, Define(Next()));
      if (IsPunct(Peek(), ":")) {
        Next();
        KILN_RETURN_IF_ERROR(ParseTypeAndDims(v));
      }
      outputs.push_back(v);
      if (IsPunct(Peek(), "=")) break;
      if (!IsPunct(Peek(), ",")) return Expected(Peek(), "',' or '=' after a node output");
      Next();
    }
    Next();  // =
    return ParseCall(std::move(outputs));
  }

  absl::StatusOr<std::string> ParseName(absl::string_view what) {
    const Token& t = Peek();
    if (t.kind != TokKind::kIdent && t.kind != TokKind::kString) return Expected(t, what);
    return Next().text;
  }

  absl::Status ParseCall(std::vector<Value*> outputs) {
    const Token op_tok = Peek();
    KILN_ASSIGN_OR_RETURN(std::string op, ParseName("an op name"));
    std::string domain;
    if (IsPunct(Peek(), "::")) {
      Next();
      domain = std::move(op);
      KILN_ASSIGN_OR_RETURN(op, ParseName("an op name after '::'"));
    }
    KILN_RETURN_IF_ERROR(Expect("(", absl::StrCat("after op name '", op, "'")));
    std::vector<Value*> inputs;
    if (!IsPunct(Peek(), ")")) {
      while (true) {
        const Token& t = Peek();
        if (IsIdent(t, "_")) {
          Next();
          inputs.push_back(nullptr);
        } else if (t.kind == TokKind::kValue) {
          KILN_ASSIGN_OR_RETURN(Value * v, Reference(Next()));
          inputs.push_back(v);
        } else {
          return Expected(t, "an input (%name, or _ for an absent optional input)");
        }
        if (IsPunct(Peek(), ")")) break;
        if (!IsPunct(Peek(), ",")) return Expected(Peek(), "',' or ')' in the input list");
        Next();
      }
    }
    Next();  // )
    std::map<std::string, Attribute> attrs;
    if (IsPunct(Peek(), "{")) {
      Next();
      if (!IsPunct(Peek(), "}")) {
        while (true) {
          const Token& name_tok = Peek();
          KILN_ASSIGN_OR_RETURN(std::string name, ParseName("an attribute name"));
          if (attrs.count(name)) {
            return ErrorAt(name_tok, absl::StrCat("attribute '", name, "' is given twice"));
          }
          KILN_RETURN_IF_ERROR(Expect("=", absl::StrCat("after attribute name '", name, "'")));
          KILN_ASSIGN_OR_RETURN(Attribute value, ParseAttribute());
          attrs.emplace(std::move(name), std::move(value));
          if (IsPunct(Peek(), "}")) break;
          if (!IsPunct(Peek(), ",")) return Expected(Peek(), "',' or '}' in the attribute list");
          Next();
        }
      }
      Next();  // }
    }
    std::string node_name;
    if (Peek().kind == TokKind::kAt) node_name = Next().text;
    Node* node = graph_->AddNode(op, inputs, outputs, node_name);
    node->set_domain(std::move(domain));
    for (auto& [name, value] : attrs) node->SetAttr(name, std::move(value));
    // A FusedGroup's body: a graph attribute, printed as a string literal.
    if (absl::Status st = ReadFusedGroupBody(*node); !st.ok()) return ErrorAt(op_tok, st.message());
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> ParseInt(const Token& t, absl::string_view what) {
    int64_t v;
    if (t.kind != TokKind::kNumber || t.is_float) return Expected(t, what);
    if (!absl::SimpleAtoi(t.text, &v)) return ErrorAt(t, absl::StrCat("integer ", t.text, " is out of range"));
    return v;
  }

  absl::StatusOr<float> ParseFloat(const Token& t, absl::string_view what) {
    float v;
    const bool word = IsIdent(t, "inf") || IsIdent(t, "nan");
    if ((t.kind != TokKind::kNumber && !word) || !ParseFloatText(t.text, &v)) return Expected(t, what);
    return v;
  }

  absl::StatusOr<TypeSpec> ParseType() {
    TypeSpec type;
    if (IsPunct(Peek(), "?")) {
      Next();
      return type;
    }
    const Token& t = Peek();
    if (t.kind != TokKind::kIdent) return Expected(t, "a type such as f32[2,3] (or ? for untyped)");
    absl::StatusOr<DType> dtype = ParseDType(t.text);
    if (!dtype.ok()) return ErrorAt(t, dtype.status().message());
    Next();
    type.typed = true;
    type.dtype = *dtype;
    KILN_RETURN_IF_ERROR(Expect("[", absl::StrCat("and the shape after '", t.text, "' (f32[] is a scalar)")));
    if (!IsPunct(Peek(), "]")) {
      while (true) {
        KILN_ASSIGN_OR_RETURN(int64_t dim, ParseInt(Peek(), "an integer dimension"));
        Next();
        type.shape.push_back(dim);
        if (IsPunct(Peek(), "]")) break;
        if (!IsPunct(Peek(), ",")) return Expected(Peek(), "',' or ']' in the shape");
        Next();
      }
    }
    absl::Status size = CheckedTensorBytes(type.dtype, type.shape, "the type").status();
    if (!size.ok()) return ErrorAt(Peek(), size.message());
    Next();  // ]
    return type;
  }

  // One element of constant or tensor data, appended to the accumulator of its kind.
  absl::Status ParseElement(DType dtype, std::vector<float>* floats, std::vector<int64_t>* ints) {
    const Token& t = Peek();
    if (IsFloating(dtype)) {
      KILN_ASSIGN_OR_RETURN(float v, ParseFloat(t, absl::StrCat("a number (", DTypeName(dtype), " element)")));
      floats->push_back(v);
    } else if (dtype == DType::kBool) {
      if (IsIdent(t, "true") || IsIdent(t, "false")) {
        ints->push_back(t.text == "true" ? 1 : 0);
      } else if (t.kind == TokKind::kNumber && (t.text == "0" || t.text == "1")) {
        ints->push_back(t.text == "1" ? 1 : 0);
      } else {
        return Expected(t, "true or false (bool element)");
      }
    } else {
      KILN_ASSIGN_OR_RETURN(int64_t v,
                            ParseInt(t, absl::StrCat("an integer (", DTypeName(dtype), " element)")));
      int64_t lo = INT64_MIN, hi = INT64_MAX;
      switch (dtype) {
        case DType::kInt32: lo = INT32_MIN; hi = INT32_MAX; break;
        case DType::kInt8: lo = INT8_MIN; hi = INT8_MAX; break;
        case DType::kUInt8: lo = 0; hi = UINT8_MAX; break;
        default: break;
      }
      if (v < lo || v > hi) {
        return ErrorAt(t, absl::StrCat(v, " is out of range for ", DTypeName(dtype)));
      }
      ints->push_back(v);
    }
    Next();
    return absl::OkStatus();
  }

  absl::StatusOr<Tensor> ParseData(const TypeSpec& type) {
    const Token& start = Peek();
    int64_t numel = 1;
    for (int64_t d : type.shape) {
      if (d < 0 || __builtin_mul_overflow(numel, d, &numel) || numel > (int64_t{1} << 40)) {
        return ErrorAt(start, absl::StrCat("data of type ", TypeText(type.dtype, type.shape),
                                           " cannot be built (negative or huge dimensions)"));
      }
    }
    std::vector<float> floats;
    std::vector<int64_t> ints;
    if (IsIdent(start, "splat")) {
      Next();
      KILN_RETURN_IF_ERROR(Expect("(", "after 'splat'"));
      KILN_RETURN_IF_ERROR(ParseElement(type.dtype, &floats, &ints));
      KILN_RETURN_IF_ERROR(Expect(")", "to close 'splat('"));
      if (!floats.empty()) floats.assign(numel, floats[0]);
      if (!ints.empty()) ints.assign(numel, ints[0]);
    } else if (IsPunct(start, "[")) {
      Next();
      if (!IsPunct(Peek(), "]")) {
        while (true) {
          KILN_RETURN_IF_ERROR(ParseElement(type.dtype, &floats, &ints));
          if (IsPunct(Peek(), "]")) break;
          if (!IsPunct(Peek(), ",")) return Expected(Peek(), "',' or ']' in the data");
          Next();
        }
      }
      Next();  // ]
      const int64_t count = static_cast<int64_t>(floats.size() + ints.size());
      if (count != numel) {
        return ErrorAt(start, absl::StrCat("data of type ", TypeText(type.dtype, type.shape), " needs ",
                                           numel, " elements, got ", count));
      }
    } else if (IsPunct(start, "<")) {
      return ErrorAt(start,
                     "this constant's data was elided by the printer (max_constant_elements); "
                     "elided text cannot be parsed");
    } else {
      return Expected(start, "data: [elements...] or splat(element)");
    }
    if (IsFloating(type.dtype)) return Tensor::FromFloat(type.dtype, type.shape, floats);
    return Tensor::FromInt64(type.dtype, type.shape, ints);
  }

  absl::StatusOr<Attribute> ParseList(std::optional<AttrKind> kind) {
    const Token& open = Peek();
    KILN_RETURN_IF_ERROR(Expect("[", "to start the list"));
    std::vector<Token> items;
    if (!IsPunct(Peek(), "]")) {
      while (true) {
        const Token& t = Peek();
        const bool number = t.kind == TokKind::kNumber || IsIdent(t, "inf") || IsIdent(t, "nan");
        if (!number && t.kind != TokKind::kString) return Expected(t, "a number or a string in the list");
        items.push_back(Next());
        if (IsPunct(Peek(), "]")) break;
        if (!IsPunct(Peek(), ",")) return Expected(Peek(), "',' or ']' in the list");
        Next();
      }
    }
    Next();  // ]
    if (!kind) {
      if (items.empty()) {
        return ErrorAt(open, "an empty list needs its kind: write ints[], floats[] or strings[]");
      }
      // The first item decides between numbers and strings; a float makes floats.
      kind = items[0].kind == TokKind::kString ? AttrKind::kStrings : AttrKind::kInts;
      for (const Token& t : items) {
        if (*kind == AttrKind::kStrings) break;
        if (t.kind == TokKind::kString) {
          return Expected(t, "a number (list items are all numbers or all strings)");
        }
        if (t.kind != TokKind::kNumber || t.is_float) kind = AttrKind::kFloats;
      }
    }
    switch (*kind) {
      case AttrKind::kInts: {
        std::vector<int64_t> v;
        for (const Token& t : items) {
          KILN_ASSIGN_OR_RETURN(int64_t x, ParseInt(t, "an integer in the ints list"));
          v.push_back(x);
        }
        return Attribute(std::move(v));
      }
      case AttrKind::kFloats: {
        std::vector<float> v;
        for (const Token& t : items) {
          KILN_ASSIGN_OR_RETURN(float x, ParseFloat(t, "a number in the floats list"));
          v.push_back(x);
        }
        return Attribute(std::move(v));
      }
      default: {
        std::vector<std::string> v;
        for (const Token& t : items) {
          if (t.kind != TokKind::kString) return Expected(t, "a string in the strings list");
          v.push_back(t.text);
        }
        return Attribute(std::move(v));
      }
    }
  }

  absl::StatusOr<Attribute> ParseAttribute() {
    const Token& t = Peek();
    if (t.kind == TokKind::kNumber || IsIdent(t, "inf") || IsIdent(t, "nan")) {
      Next();
      if (t.is_float || t.kind == TokKind::kIdent) {
        KILN_ASSIGN_OR_RETURN(float f, ParseFloat(t, "a float"));
        return Attribute(f);
      }
      KILN_ASSIGN_OR_RETURN(int64_t i, ParseInt(t, "an integer"));
      return Attribute(i);
    }
    if (t.kind == TokKind::kString) return Attribute(Next().text);
    if (IsPunct(t, "[")) return ParseList(std::nullopt);
    if (t.kind == TokKind::kIdent && IsPunct(Peek(1), "[")) {
      std::optional<AttrKind> kind;
      if (t.text == "ints") kind = AttrKind::kInts;
      if (t.text == "floats") kind = AttrKind::kFloats;
      if (t.text == "strings") kind = AttrKind::kStrings;
      if (kind) {
        Next();
        return ParseList(kind);
      }
    }
    if (IsIdent(t, "tensor")) {
      Next();
      KILN_RETURN_IF_ERROR(Expect("<", "after 'tensor'"));
      const Token& type_tok = Peek();
      KILN_ASSIGN_OR_RETURN(TypeSpec type, ParseType());
      if (!type.typed) return ErrorAt(type_tok, "a tensor attribute needs a type, not '?'");
      KILN_RETURN_IF_ERROR(Expect(">", "after the tensor type"));
      KILN_ASSIGN_OR_RETURN(Tensor data, ParseData(type));
      return Attribute(std::move(data));
    }
    return Expected(t, "an attribute value (integer, float, \"string\", [list] or tensor<type> data)");
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  std::unique_ptr<Graph> graph_;
  absl::flat_hash_map<std::string, size_t> index_;
  std::vector<Entry> entries_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Graph>> ParseGraph(absl::string_view text) {
  KILN_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lexer(text).Tokenize());
  return Parser(std::move(tokens)).Parse();
}

}  // namespace kiln
