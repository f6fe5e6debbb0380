// Printer of the graph text format (grammar in text_format.h).
#include "graph/text_format.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/float16.h"
#include "graph/text_format_internal.h"

namespace kiln {

namespace text_format_internal {

std::string TypeText(DType dtype, const Shape& shape) {
  return absl::StrCat(DTypeName(dtype), ShapeToString(shape));
}

}  // namespace text_format_internal

namespace {

using namespace text_format_internal;  // NOLINT: the shared lexical rules

bool IsBareName(absl::string_view s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (IsNameChar(s[i])) continue;
    if (s[i] == ':' && i + 1 < s.size() && IsDigit(s[i + 1])) continue;
    return false;
  }
  return true;
}

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || !IsIdentStart(s[0])) return false;
  for (char c : s) {
    if (!IsIdentChar(c)) return false;
  }
  return true;
}

std::string Quote(absl::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          absl::StrAppendFormat(&out, "\\x%02x", c);
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

std::string FormatSigilName(char sigil, absl::string_view name) {
  return IsBareName(name) ? absl::StrCat(std::string(1, sigil), name)
                          : absl::StrCat(std::string(1, sigil), Quote(name));
}

std::string FormatIdent(absl::string_view name) {
  return IsIdentifier(name) ? std::string(name) : Quote(name);
}

bool RoundTrips(const char* text, float value, DType dtype) {
  float parsed;
  if (!ParseFloatText(text, &parsed)) return false;
  switch (dtype) {
    case DType::kFloat16: return FloatToHalf(parsed) == FloatToHalf(value);
    case DType::kBFloat16: return FloatToBFloat16(parsed) == FloatToBFloat16(value);
    default: return FloatToBits(parsed) == FloatToBits(value);
  }
}

void AppendElement(std::string* out, const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32: out->append(FormatFloat(t.data<float>()[i], DType::kFloat32)); break;
    case DType::kFloat16:
      out->append(FormatFloat(HalfToFloat(t.data<uint16_t>()[i]), DType::kFloat16));
      break;
    case DType::kBFloat16:
      out->append(FormatFloat(BFloat16ToFloat(t.data<uint16_t>()[i]), DType::kBFloat16));
      break;
    case DType::kInt64: absl::StrAppend(out, t.data<int64_t>()[i]); break;
    case DType::kInt32: absl::StrAppend(out, t.data<int32_t>()[i]); break;
    case DType::kInt8: absl::StrAppend(out, static_cast<int>(t.data<int8_t>()[i])); break;
    case DType::kUInt8: absl::StrAppend(out, static_cast<int>(t.data<uint8_t>()[i])); break;
    case DType::kBool: out->append(t.data<uint8_t>()[i] ? "true" : "false"); break;
  }
}

bool IsSplat(const Tensor& t) {
  const int64_t n = t.numel();
  if (n < 2) return false;
  const size_t size = DTypeSize(t.dtype());
  const uint8_t* p = static_cast<const uint8_t*>(t.raw_data());
  for (int64_t i = 1; i < n; ++i) {
    if (std::memcmp(p, p + i * size, size) != 0) return false;
  }
  return true;
}

// "[1.0, 2.0]", "splat(0.5)" or "<elided N elements>".
void AppendData(std::string* out, const Tensor& tensor, const PrintOptions& options) {
  // An undefined tensor (no buffer) prints as zeros rather than crashing.
  const Tensor t = tensor.defined() ? tensor : Tensor(tensor.dtype(), tensor.shape());
  const int64_t n = t.numel();
  if (IsSplat(t)) {
    out->append("splat(");
    AppendElement(out, t, 0);
    out->append(")");
    return;
  }
  if (n > options.max_constant_elements) {
    absl::StrAppend(out, "<elided ", n, " elements>");
    return;
  }
  out->append("[");
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) out->append(", ");
    AppendElement(out, t, i);
  }
  out->append("]");
}

std::string FormatAttribute(const Attribute& attr, const PrintOptions& options) {
  switch (attr.kind()) {
    case AttrKind::kInt: return absl::StrCat(attr.i());
    case AttrKind::kFloat: return FormatFloat(attr.f());
    case AttrKind::kString: return Quote(attr.s());
    case AttrKind::kInts:
      if (attr.ints().empty()) return "ints[]";
      return absl::StrCat("[", absl::StrJoin(attr.ints(), ", "), "]");
    case AttrKind::kFloats:
      if (attr.floats().empty()) return "floats[]";
      return absl::StrCat("[",
                          absl::StrJoin(attr.floats(), ", ",
                                        [](std::string* out, float f) { out->append(FormatFloat(f)); }),
                          "]");
    case AttrKind::kStrings:
      if (attr.strings().empty()) return "strings[]";
      return absl::StrCat("[",
                          absl::StrJoin(attr.strings(), ", ",
                                        [](std::string* out, const std::string& s) { out->append(Quote(s)); }),
                          "]");
    case AttrKind::kTensor: {
      std::string out = absl::StrCat("tensor<", TypeText(attr.t().dtype(), attr.t().shape()), "> ");
      AppendData(&out, attr.t(), options);
      return out;
    }
    // A graph attribute prints as its whole text (default options, whatever the outer
    // graph's) in a string literal; the parser reads it back (text_format.h).
    case AttrKind::kGraph: return Quote(attr.g() != nullptr ? PrintGraph(*attr.g()) : std::string());
  }
  return "?";
}

std::string FormatValueRef(const Value* v) { return v ? FormatValueName(v->name()) : "_"; }

}  // namespace

std::string FormatValueName(absl::string_view name) { return FormatSigilName('%', name); }

std::string FormatTensorData(const Tensor& tensor, const PrintOptions& options) {
  std::string out;
  AppendData(&out, tensor, options);
  return out;
}

std::string FormatFloat(float value, DType dtype) {
  if (std::isnan(value)) return std::signbit(value) ? "-nan" : "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  if (value == 0.0f) return std::signbit(value) ? "-0.0" : "0.0";
  // Shortest significant-digit count that converts back to the same bits.
  char buf[48];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*e", digits - 1, static_cast<double>(value));
    if (RoundTrips(buf, value, dtype)) break;
  }
  // buf is "[-]d[.ddd]e[+-]XX": render like Python's repr (fixed for 1e-4 <= |x| < 1e16).
  absl::string_view s(buf);
  std::string out;
  if (s[0] == '-') {
    out += '-';
    s.remove_prefix(1);
  }
  const size_t e = s.find('e');
  const int exp = std::atoi(std::string(s.substr(e + 1)).c_str());
  std::string digits;
  for (char c : s.substr(0, e)) {
    if (c != '.') digits += c;
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int n = static_cast<int>(digits.size());
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      if (n <= exp + 1) {
        absl::StrAppend(&out, digits, std::string(exp + 1 - n, '0'), ".0");
      } else {
        absl::StrAppend(&out, digits.substr(0, exp + 1), ".", digits.substr(exp + 1));
      }
    } else {
      absl::StrAppend(&out, "0.", std::string(-exp - 1, '0'), digits);
    }
  } else {
    out += digits[0];
    if (n > 1) absl::StrAppend(&out, ".", digits.substr(1));
    absl::StrAppendFormat(&out, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  }
  return out;
}

// `"batch, seq, 768"`: the dims or symbolic data of a dynamic value.
std::string ExprList(const std::vector<DimExpr>& exprs, const Graph& graph) {
  return Quote(absl::StrJoin(exprs, ", ", [&](std::string* o, const DimExpr& e) {
    o->append(e.ToString(graph.dim_symbols()));
  }));
}

// " : f32[32,128,768]", with ` dims "batch, seq, 768"` for a dynamic value.
std::string TypeSuffix(const Value* v, const Graph& graph) {
  std::string out = absl::StrCat(" : ", v->TypeString());
  if (v->is_dynamic()) absl::StrAppend(&out, " dims ", ExprList(v->dims(), graph));
  return out;
}

std::string PrintGraph(const Graph& graph, const PrintOptions& options) {
  std::string out = absl::StrCat("graph ", FormatSigilName('@', graph.name()), " {\n");
  for (const DimSymbol& s : graph.dim_symbols()) {
    absl::StrAppend(&out, "  dim ", s.name, " in [", s.min, ", ", s.max, "]",
                    s.opt > 0 ? absl::StrCat(" opt ", s.opt) : "", "\n");
  }
  for (const Value* v : graph.inputs()) {
    absl::StrAppend(&out, "  input ", FormatValueRef(v));
    if (v && v->has_type()) out += TypeSuffix(v, graph);
    out += "\n";
  }
  for (const Value* v : graph.constants()) {
    absl::StrAppend(&out, "  const ", FormatValueName(v->name()), " : ",
                    TypeText(v->constant().dtype(), v->constant().shape()), " = ");
    AppendData(&out, v->constant(), options);
    if (v->has_symbolic_data()) absl::StrAppend(&out, " symbolic ", ExprList(v->symbolic_data(), graph));
    out += "\n";
  }
  for (const Node* node : graph.nodes()) {
    out += "  ";
    for (int i = 0; i < node->num_outputs(); ++i) {
      const Value* v = node->output(i);
      if (i > 0) out += ", ";
      out += FormatValueRef(v);
      if (options.print_value_types && v && v->has_type()) out += TypeSuffix(v, graph);
    }
    if (node->num_outputs() > 0) out += " = ";
    if (!node->domain().empty()) absl::StrAppend(&out, FormatIdent(node->domain()), "::");
    absl::StrAppend(&out, FormatIdent(node->op_type()), "(",
                    absl::StrJoin(node->inputs(), ", ",
                                  [](std::string* o, const Value* v) { o->append(FormatValueRef(v)); }),
                    ")");
    if (!node->attributes().empty()) {
      out += " {";
      bool first = true;
      for (const auto& [name, attr] : node->attributes()) {
        if (!first) out += ", ";
        first = false;
        absl::StrAppend(&out, FormatIdent(name), " = ", FormatAttribute(attr, options));
      }
      out += "}";
    }
    if (options.print_node_names) absl::StrAppend(&out, " ", FormatSigilName('@', node->name()));
    out += "\n";
  }
  for (const Value* v : graph.outputs()) absl::StrAppend(&out, "  output ", FormatValueRef(v), "\n");
  out += "}\n";
  return out;
}
}  // namespace kiln
