// Internals shared by the printer (text_format_print.cc) and the parser
// (text_format_parse.cc) of the graph text format: the lexical rules of names and
// identifiers, float literal parsing and the text of a type. Private to graph/.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "graph/dtype.h"

namespace kiln::text_format_internal {

inline bool IsDigit(char c) { return c >= '0' && c <= '9'; }
inline bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool IsIdentStart(char c) { return IsAlpha(c) || c == '_'; }
inline bool IsIdentChar(char c) { return IsAlpha(c) || IsDigit(c) || c == '_' || c == '.'; }
// Characters of a bare %value / @name (':' is allowed when a digit follows it).
inline bool IsNameChar(char c) {
  return IsAlpha(c) || IsDigit(c) || c == '_' || c == '.' || c == '/' || c == '-';
}

// Parses a float literal as the lexer delimits it (sign, digits, '.', exponent,
// or inf/nan). Locale-independent. Defined in text_format_parse.cc.
bool ParseFloatText(absl::string_view s, float* out);

// "f32[2,3]". Defined in text_format_print.cc.
std::string TypeText(DType dtype, const Shape& shape);

}  // namespace kiln::text_format_internal
