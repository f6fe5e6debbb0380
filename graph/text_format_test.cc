// Tests for the graph text format: exact round trips, hand-written input, errors.
#include "graph/text_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "common/float16.h"
#include "graph/infer_shapes.h"

namespace kiln {
namespace {

std::unique_ptr<Graph> MustParse(absl::string_view text) {
  auto g = ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? std::move(*g) : std::make_unique<Graph>();
}

std::string ParseError(absl::string_view text) {
  auto g = ParseGraph(text);
  EXPECT_FALSE(g.ok()) << "parsed unexpectedly:\n" << text;
  if (g.ok()) return "";
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(g.status().message());
}

bool SameTensor(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

bool SameAttribute(const Attribute& a, const Attribute& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case AttrKind::kInt: return a.i() == b.i();
    case AttrKind::kFloat: return FloatToBits(a.f()) == FloatToBits(b.f());
    case AttrKind::kString: return a.s() == b.s();
    case AttrKind::kInts: return a.ints() == b.ints();
    case AttrKind::kFloats:
      if (a.floats().size() != b.floats().size()) return false;
      for (size_t i = 0; i < a.floats().size(); ++i) {
        if (FloatToBits(a.floats()[i]) != FloatToBits(b.floats()[i])) return false;
      }
      return true;
    case AttrKind::kStrings: return a.strings() == b.strings();
    case AttrKind::kTensor: return SameTensor(a.t(), b.t());
    case AttrKind::kGraph: return PrintGraph(*a.g()) == PrintGraph(*b.g());
  }
  return false;
}

void ExpectSameValue(const Value* a, const Value* b) {
  ASSERT_EQ(a == nullptr, b == nullptr);
  if (!a) return;
  EXPECT_EQ(a->name(), b->name());
  EXPECT_EQ(a->TypeString(), b->TypeString()) << a->name();
  ASSERT_EQ(a->is_constant(), b->is_constant()) << a->name();
  if (a->is_constant()) {
    EXPECT_TRUE(SameTensor(a->constant(), b->constant())) << a->name();
  }
}

// Structural equality of everything the text format carries.
void ExpectSameGraph(const Graph& a, const Graph& b) {
  EXPECT_EQ(a.name(), b.name());
  ASSERT_EQ(a.inputs().size(), b.inputs().size());
  for (size_t i = 0; i < a.inputs().size(); ++i) ExpectSameValue(a.inputs()[i], b.inputs()[i]);
  ASSERT_EQ(a.outputs().size(), b.outputs().size());
  for (size_t i = 0; i < a.outputs().size(); ++i) ExpectSameValue(a.outputs()[i], b.outputs()[i]);
  ASSERT_EQ(a.constants().size(), b.constants().size());
  for (size_t i = 0; i < a.constants().size(); ++i) ExpectSameValue(a.constants()[i], b.constants()[i]);
  ASSERT_EQ(a.num_nodes(), b.num_nodes());
  for (int n = 0; n < a.num_nodes(); ++n) {
    const Node* x = a.nodes()[n];
    const Node* y = b.nodes()[n];
    EXPECT_EQ(x->name(), y->name());
    EXPECT_EQ(x->op_type(), y->op_type());
    EXPECT_EQ(x->domain(), y->domain());
    ASSERT_EQ(x->num_inputs(), y->num_inputs()) << x->name();
    for (int i = 0; i < x->num_inputs(); ++i) ExpectSameValue(x->input(i), y->input(i));
    ASSERT_EQ(x->num_outputs(), y->num_outputs()) << x->name();
    for (int i = 0; i < x->num_outputs(); ++i) ExpectSameValue(x->output(i), y->output(i));
    ASSERT_EQ(x->attributes().size(), y->attributes().size()) << x->name();
    for (const auto& [name, attr] : x->attributes()) {
      ASSERT_TRUE(y->has_attr(name)) << name;
      EXPECT_TRUE(SameAttribute(attr, y->attributes().at(name))) << x->name() << "." << name;
    }
  }
}

// A graph exercising every dtype, attribute kind and naming corner.
std::unique_ptr<Graph> KitchenSinkGraph() {
  auto g = std::make_unique<Graph>();
  g->set_name("kitchen sink");
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float denorm = std::numeric_limits<float>::denorm_min();

  Value* x = g->AddValue("x");
  x->SetType(DType::kFloat32, {1, 3, 8, 8});
  g->AddInput(x);
  Value* mask = g->AddValue("input mask");  // needs quoting
  mask->SetType(DType::kBool, {8});
  g->AddInput(mask);
  Value* untyped_in = g->AddValue("ids:0");  // ':' followed by a digit stays bare
  g->AddInput(untyped_in);

  Value* w = g->AddConstant(
      "conv/w", Tensor::FromFloat(DType::kFloat32, {2, 3},
                                  {0.1f, -2.5f, 1e-7f, 3.4028235e38f, denorm, 16777216.f}));
  Value* special = g->AddConstant("special", Tensor::FromFloat(DType::kFloat32, {5},
                                                               {inf, -inf, nan, -nan, -0.0f}));
  Value* h = g->AddConstant("h", Tensor::FromFloat(DType::kFloat16, {4}, {0.1f, 65504.f, 6e-8f, -1.f / 3}));
  Value* bf = g->AddConstant("bf", Tensor::FromFloat(DType::kBFloat16, {3}, {0.1f, 1e30f, -7.f}));
  Value* i64 = g->AddConstant("i64", Tensor::FromInt64(DType::kInt64, {3},
                                                       {std::numeric_limits<int64_t>::min(), -1,
                                                        std::numeric_limits<int64_t>::max()}));
  Value* i32 = g->AddConstant("i32", Tensor::FromInt64(DType::kInt32, {2}, {-2147483648LL, 2147483647}));
  Value* i8 = g->AddConstant("i8", Tensor::FromInt64(DType::kInt8, {2}, {-128, 127}));
  Value* u8 = g->AddConstant("u8", Tensor::FromInt64(DType::kUInt8, {2}, {0, 255}));
  Value* b = g->AddConstant("b", Tensor::FromInt64(DType::kBool, {3}, {1, 0, 1}));
  Value* splat = g->AddConstant("splat", Tensor::FromFloat(DType::kFloat16, {2, 2}, {0.5f, 0.5f, 0.5f, 0.5f}));
  Value* scalar = g->AddConstant("scalar", Tensor::FromInt64(DType::kInt64, {}, {42}));
  Value* empty = g->AddConstant("empty", Tensor(DType::kFloat32, {0, 4}));

  Value* y = g->AddValue("y");
  y->SetType(DType::kFloat32, {1, 2, 8, 8});
  Node* conv = g->AddNode("Conv", {x, w, nullptr}, {y}, "conv 1");
  conv->SetAttr("pads", std::vector<int64_t>{1, 1, 1, 1});
  conv->SetAttr("group", 1);
  conv->SetAttr("alpha", 1e-5f);
  conv->SetAttr("beta", -inf);
  conv->SetAttr("gamma", nan);
  conv->SetAttr("whole", 3.0f);
  conv->SetAttr("auto_pad", "NOTSET");
  conv->SetAttr("escaped", std::string("quote\" back\\ nl\n tab\t nul\0 end", 30));
  conv->SetAttr("scales", std::vector<float>{1.0f, 0.25f, 1e20f});
  conv->SetAttr("names", std::vector<std::string>{"a", "b c", ""});
  conv->SetAttr("no_ints", std::vector<int64_t>{});
  conv->SetAttr("no_floats", std::vector<float>{});
  conv->SetAttr("no_strings", std::vector<std::string>{});
  conv->SetAttr("value", Tensor::FromFloat(DType::kFloat32, {2}, {1.f, 2.f}));
  conv->SetAttr("value_i", Tensor::FromInt64(DType::kInt64, {}, {7}));
  conv->SetAttr("value_splat", Tensor::FromFloat(DType::kBFloat16, {3}, {2.f, 2.f, 2.f}));
  conv->SetAttr("odd name!", 5);

  // Multiple outputs, one untyped; absent input in the middle; a domain.
  Value* a = g->AddValue("a");
  a->SetType(DType::kFloat32, {1, 1, 8, 8});
  Value* c = g->AddValue("c");  // untyped
  Node* split = g->AddNode("Split", {y, nullptr, i64}, {a, c});
  split->SetAttr("axis", -1);
  Value* z = g->AddValue("z");
  Node* custom = g->AddNode("FusedThing", {a, mask, untyped_in, special, h, bf, i32, i8, u8, b, splat, scalar, empty},
                            {z}, "custom");
  custom->set_domain("com.example");
  // A node with no outputs and no inputs.
  g->AddNode("Barrier", {}, {}, "barrier");

  g->AddOutput(z);  // outputs in a different order than definition
  g->AddOutput(c);
  g->AddOutput(x);
  return g;
}

TEST(TextFormatTest, RoundTripIsExact) {
  std::unique_ptr<Graph> g = KitchenSinkGraph();
  const std::string text = PrintGraph(*g);
  auto parsed = ParseGraph(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_EQ(PrintGraph(**parsed), text);
  ExpectSameGraph(*g, **parsed);
}

TEST(TextFormatTest, PrintsReadableText) {
  std::unique_ptr<Graph> g = KitchenSinkGraph();
  const std::string text = PrintGraph(*g);
  for (const char* expected : {
           "graph @\"kitchen sink\" {\n",
           "  input %x : f32[1,3,8,8]\n",
           "  input %\"input mask\" : bool[8]\n",
           "  input %ids:0\n",
           "  const %conv/w : f32[2,3] = [0.1, -2.5, 1e-07, 3.4028235e+38, 1e-45, 16777216.0]\n",
           "  const %special : f32[5] = [inf, -inf, nan, -nan, -0.0]\n",
           "  const %h : f16[4] = [0.1, 65500.0, 6e-08, -0.3333]\n",
           "  const %bf : bf16[3] = [0.1, 1e+30, -7.0]\n",
           "  const %i64 : i64[3] = [-9223372036854775808, -1, 9223372036854775807]\n",
           "  const %b : bool[3] = [true, false, true]\n",
           "  const %splat : f16[2,2] = splat(0.5)\n",
           "  const %scalar : i64[] = [42]\n",
           "  const %empty : f32[0,4] = []\n",
           "  %y : f32[1,2,8,8] = Conv(%x, %conv/w, _) {alpha = 1e-05, auto_pad = \"NOTSET\", beta = -inf, ",
           "escaped = \"quote\\\" back\\\\ nl\\n tab\\t nul\\x00 end\", gamma = nan, group = 1, ",
           "names = [\"a\", \"b c\", \"\"], no_floats = floats[], no_ints = ints[], no_strings = strings[], "
           "\"odd name!\" = 5, pads = [1, 1, 1, 1], scales = [1.0, 0.25, 1e+20], "
           "value = tensor<f32[2]> [1.0, 2.0], value_i = tensor<i64[]> [7], "
           "value_splat = tensor<bf16[3]> splat(2.0), whole = 3.0} @\"conv 1\"\n",
           "  %a : f32[1,1,8,8], %c = Split(%y, _, %i64) {axis = -1} @Split_1\n",
           "  %z = com.example::FusedThing(%a, %\"input mask\", %ids:0, %special",
           "  Barrier() @barrier\n",
           "  output %z\n  output %c\n  output %x\n}\n",
       }) {
    EXPECT_NE(text.find(expected), std::string::npos) << "missing: " << expected << "\nin:\n" << text;
  }
}

TEST(TextFormatTest, HandWrittenTextPrintsCanonically) {
  auto g = MustParse(R"(
    # A comment line.
    graph {                       # unnamed: keeps the default name
      input %x: f32[2, 3]         # ':' may touch the name
      input %"odd name" : i64[]
      const %w : f32[3] = [1, 2.5, -3]    # integers are fine for float data
      const %k : i32[2] = splat(7)
      const %t : bool[2] = [1, false]
      %y = Add(%x, %w)
      %p, %q : f32[2,3] = Custom(%y, _) {axis = 1, eps = 1e-5, f = [1, 2.0], s = ["a"], e = ints[],
                                          v = tensor<u8[2]> [3, 4]} @"my node"
      output %q, %p
    }
  )");
  EXPECT_EQ(PrintGraph(*g),
            "graph @main {\n"
            "  input %x : f32[2,3]\n"
            "  input %\"odd name\" : i64[]\n"
            "  const %w : f32[3] = [1.0, 2.5, -3.0]\n"
            "  const %k : i32[2] = splat(7)\n"
            "  const %t : bool[2] = [true, false]\n"
            "  %y = Add(%x, %w) @Add_0\n"
            "  %p, %q : f32[2,3] = Custom(%y, _) {axis = 1, e = ints[], eps = 1e-05, f = [1.0, 2.0], "
            "s = [\"a\"], v = tensor<u8[2]> [3, 4]} @\"my node\"\n"
            "  output %q\n"
            "  output %p\n"
            "}\n");
}

TEST(TextFormatTest, ParsedTextFeedsShapeInference) {
  auto g = MustParse(R"(
    graph @mlp {
      input %x : f32[2,4]
      const %bias : f32[4] = [0.5, -1.0, 2.0, 0.0]
      const %shape : i64[2] = [4, -1]
      %h = Add(%x, %bias)
      %r = Relu(%h) @act
      %out = Reshape(%r, %shape)
      output %out
    }
  )");
  ASSERT_TRUE(InferShapes(*g).ok());
  EXPECT_EQ(PrintGraph(*g, {.print_node_names = false}),
            "graph @mlp {\n"
            "  input %x : f32[2,4]\n"
            "  const %bias : f32[4] = [0.5, -1.0, 2.0, 0.0]\n"
            "  const %shape : i64[2] = [4, -1]\n"
            "  %h : f32[2,4] = Add(%x, %bias)\n"
            "  %r : f32[2,4] = Relu(%h)\n"
            "  %out : f32[4,2] = Reshape(%r, %shape)\n"
            "  output %out\n"
            "}\n");
}

TEST(TextFormatTest, PrintOptions) {
  Graph g;
  Value* x = g.AddValue("x");
  x->SetType(DType::kFloat32, {4});
  g.AddInput(x);
  std::vector<float> big(100);
  for (int i = 0; i < 100; ++i) big[i] = static_cast<float>(i);
  Value* w = g.AddConstant("w", Tensor::FromFloat(DType::kFloat32, {100}, big));
  Value* s = g.AddConstant("s", Tensor::FromFloat(DType::kFloat32, {100}, std::vector<float>(100, 1.f)));
  Value* y = g.AddValue("y");
  y->SetType(DType::kFloat32, {4});
  Node* n = g.AddNode("Op", {x, w, s}, {y});
  n->SetAttr("t", Tensor::FromFloat(DType::kFloat32, {100}, big));
  g.AddOutput(y);
  PrintOptions options;
  options.max_constant_elements = 10;
  options.print_node_names = false;
  options.print_value_types = false;
  const std::string text = PrintGraph(g, options);
  EXPECT_EQ(text,
            "graph @main {\n"
            "  input %x : f32[4]\n"
            "  const %w : f32[100] = <elided 100 elements>\n"
            "  const %s : f32[100] = splat(1.0)\n"
            "  %y = Op(%x, %w, %s) {t = tensor<f32[100]> <elided 100 elements>}\n"
            "  output %y\n"
            "}\n");
  EXPECT_NE(ParseError(text).find("3:25: this constant's data was elided"), std::string::npos);
}

TEST(TextFormatTest, FormatFloatIsShortestAndExact) {
  EXPECT_EQ(FormatFloat(0.1f), "0.1");
  EXPECT_EQ(FormatFloat(1e-5f), "1e-05");
  EXPECT_EQ(FormatFloat(1e-4f), "0.0001");
  EXPECT_EQ(FormatFloat(100.f), "100.0");
  EXPECT_EQ(FormatFloat(-1.5f), "-1.5");
  EXPECT_EQ(FormatFloat(1e16f), "1e+16");
  EXPECT_EQ(FormatFloat(123456792.f), "123456790.0");
  EXPECT_EQ(FormatFloat(1.0f / 3), "0.33333334");
  EXPECT_EQ(FormatFloat(HalfToFloat(FloatToHalf(0.1f)), DType::kFloat16), "0.1");
  EXPECT_EQ(FormatFloat(BFloat16ToFloat(FloatToBFloat16(3.14159f)), DType::kBFloat16), "3.14");
  // Every f16 bit pattern (except NaN payloads) survives print + parse.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float f = HalfToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(f)) continue;
    Graph g;
    g.AddOutput(g.AddConstant("c", Tensor::FromFloat(DType::kFloat16, {}, {f})));
    auto parsed = ParseGraph(PrintGraph(g));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    ASSERT_EQ((*parsed)->constants()[0]->constant().data<uint16_t>()[0], bits) << PrintGraph(g);
  }
  // A sweep of f32 bit patterns across all exponents.
  for (uint64_t bits = 1; bits < 0x7f800000u; bits += 0x10001) {
    const float f = BitsToFloat(static_cast<uint32_t>(bits));
    Graph g;
    g.AddOutput(g.AddConstant("c", Tensor::FromFloat(DType::kFloat32, {1}, {f})));
    auto parsed = ParseGraph(PrintGraph(g));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    ASSERT_EQ(FloatToBits((*parsed)->constants()[0]->constant().data<float>()[0]), bits);
  }
}

TEST(TextFormatTest, NamesAndForwardReferences) {
  auto g = MustParse(R"(graph @g {
    input %x:f32[2]
    %b = Relu(%a) @second       # %a is defined below
    %a = Relu(%x) @first
    %"w:y" = Relu(%b)
    %layer/conv:0 = Relu(%"w:y")
    output %layer/conv:0
  })");
  ASSERT_NE(g->FindValue("x"), nullptr);
  EXPECT_EQ(g->FindValue("x")->TypeString(), "f32[2]");
  ASSERT_NE(g->FindValue("layer/conv:0"), nullptr);
  EXPECT_EQ(g->nodes()[0]->name(), "second");
  EXPECT_EQ(g->nodes()[0]->input(0), g->FindValue("a"));
  EXPECT_EQ(g->FindValue("a")->producer()->name(), "first");
  const std::string text = PrintGraph(*g);
  EXPECT_NE(text.find("  %\"w:y\" = Relu(%b) @Relu_2\n"), std::string::npos) << text;
  EXPECT_EQ(PrintGraph(*MustParse(text)), text);
}

TEST(TextFormatTest, ErrorsNameLineAndColumn) {
  EXPECT_EQ(ParseError("graph {\n  input %x : f33[2]\n}"),
            "2:14: unknown dtype 'f33' (expected f32, f16, bf16, i64, i32, i8, u8 or bool)");
  EXPECT_EQ(ParseError("graph {\n  input %x : f32[2]\n  %y = Relu(%x {}\n}"),
            "3:16: expected ',' or ')' in the input list, got '{'");
  EXPECT_EQ(ParseError("graph {\n  %y = Relu(%x)\n  output %y\n}"),
            "2:13: value %x is used but never defined (by 'input', 'const' or a node)");
  EXPECT_EQ(ParseError("graph {\n  input %x : f32[2]\n  %x = Relu(%x)\n}"),
            "3:3: value %x is defined twice (first at 2:9)");
  EXPECT_EQ(ParseError("graph {\n  const %w : f32[2,2] = [1.0, 2.0, 3.0]\n}"),
            "2:25: data of type f32[2,2] needs 4 elements, got 3");
  EXPECT_EQ(ParseError("graph {\n  input %x : f32[2]\n  %y = Foo(%x) {axes = []}\n}"),
            "3:24: an empty list needs its kind: write ints[], floats[] or strings[]");
  EXPECT_EQ(ParseError("graph {\n  %y = Foo() {mode = \"abc\n}"),
            "2:22: unterminated string (a string must end on the line it starts)");
  EXPECT_EQ(ParseError("graph {\n  const %c : u8[1] = [256]\n}"), "2:23: 256 is out of range for u8");
  EXPECT_EQ(ParseError("graph {\n  const %c : i64[1] = [1.5]\n}"),
            "2:24: expected an integer (i64 element), got '1.5'");
  EXPECT_EQ(ParseError("graph {\n  %y = Foo() {a = 1.0f}\n}"), "2:19: malformed number '1.0f'");
  EXPECT_EQ(ParseError("graph {\n  %y = Foo() {a = 99999999999999999999}\n}"),
            "2:19: integer 99999999999999999999 is out of range");
  EXPECT_EQ(ParseError("graph {\n  %y = Foo() {a = 1, a = 2}\n}"), "2:22: attribute 'a' is given twice");
  EXPECT_EQ(ParseError("graph {\n  %y = Foo() {a = [1, \"x\"]}\n}"),
            "2:23: expected a number (list items are all numbers or all strings), got '\"x\"'");
  EXPECT_EQ(ParseError("graph {\n  %y = Foo() {a = ints[1, 2.0]}\n}"),
            "2:27: expected an integer in the ints list, got '2.0'");
  EXPECT_EQ(ParseError("graph {\n  %y : f32[2] Relu(%x)\n}"),
            "2:15: expected ',' or '=' after a node output, got 'Relu'");
  EXPECT_EQ(ParseError("graph {\n  input %x : f32[2]\n"), "3:1: expected '}' to close the graph, got end of input");
  EXPECT_EQ(ParseError("graph { } extra"), "1:11: expected end of input after the graph's closing '}', got 'extra'");
  EXPECT_EQ(ParseError("model {}"), "1:1: expected 'graph', got 'model'");
  EXPECT_EQ(ParseError("graph {\n  input %x : f32[2] $\n}"), "2:21: unexpected character '$'");
  EXPECT_EQ(ParseError("graph {\n  const %w : ? = [1]\n}"), "2:14: a constant needs a type, not '?'");
  EXPECT_EQ(ParseError("graph {\n  %y = Foo(%x, 3)\n}"),
            "2:16: expected an input (%name, or _ for an absent optional input), got '3'");
  EXPECT_EQ(ParseError("graph {\n  %y = Foo() {s = \"a\\q\"}\n}"),
            "2:21: unknown escape in string (expected \\\" \\\\ \\n \\t \\r \\0 or \\xHH)");
}

TEST(TextFormatTest, DamagedTextFailsCleanly) {
  const std::string text = PrintGraph(*KitchenSinkGraph());
  // Every prefix, and every single-character replacement by a few troublemakers,
  // either parses or fails with a positioned InvalidArgument; nothing crashes.
  for (size_t n = 0; n < text.size(); ++n) {
    auto g = ParseGraph(absl::string_view(text).substr(0, n));
    EXPECT_TRUE(g.ok() || g.status().code() == absl::StatusCode::kInvalidArgument) << g.status();
  }
  for (size_t i = 0; i < text.size(); ++i) {
    for (char c : {'"', '%', '[', ']', '\\', '\n', '#', '-', ':', '\0'}) {
      std::string damaged = text;
      damaged[i] = c;
      auto g = ParseGraph(damaged);
      EXPECT_TRUE(g.ok() || g.status().code() == absl::StatusCode::kInvalidArgument) << g.status();
    }
  }
}

}  // namespace
}  // namespace kiln
