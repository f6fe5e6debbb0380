// Text form of a Graph: a printer and a parser that round-trip exactly, for tests
// ("text graph in, expected text out"), debugging dumps and hand-written graphs.
//
// Example:
//
//   graph @main {
//     input %x : f32[1,3,8,8]
//     const %w : f32[4,3,3,3] = [0.1, 0.2, ...]      # full data
//     const %b : f32[4] = splat(0.5)                  # every element equal
//     %y : f32[1,4,8,8] = Conv(%x, %w, _) {pads = [1, 1, 1, 1], strides = [1, 1]} @conv1
//     %a : f32[2], %b2 : f32[2] = Split(%v, %s) {axis = 0}
//     %z = Relu(%y)                                    # untyped: left to InferShapes
//     %g = com.microsoft::Gelu(%z)                     # op in a non-default domain
//     output %y
//   }
//
// Grammar (whitespace and newlines are insignificant; '#' starts a comment that
// runs to the end of the line):
//
//   file      := 'graph' [@name] '{' stmt* '}'
//   stmt      := 'dim' name 'in' '[' int ',' int ']'   # a dim symbol, before its uses
//              | 'input' %value [':' type]
//              | 'const' %value ':' type '=' data ['symbolic' exprs]
//              | 'output' %value {',' %value}
//              | outputs '=' call          # a node
//              | call                      # a node with no outputs
//   outputs   := %value [':' type] {',' %value [':' type]}
//   call      := [domain '::'] op '(' [input {',' input}] ')' ['{' attrs '}'] [@name]
//   input     := %value | '_'              # '_' is an absent optional input
//   attrs     := name '=' attr {',' name '=' attr}
//   attr      := int | float | "string" | list | 'tensor' '<' type '>' data
//   list      := '[' items ']' | ('ints' | 'floats' | 'strings') '[' items ']'
//   data      := '[' elem {',' elem} ']' | '[' ']' | 'splat' '(' elem ')'
//   type      := dtype '[' [dim {',' dim}] ']' ['dims' exprs] | '?'   # f32[] is a scalar; ? is untyped
//   exprs     := '"' expr {',' expr} '"'     # DimExpr text over the dim symbols (graph/dim_expr.h)
//
// Dynamic graphs (graph/symbolic_shapes.h). `dim seq in [1, 512]` declares a dim
// symbol; a dynamic value's type is its shape at the symbols' largest values followed
// by `dims "batch, seq*12, 64"`, and a constant folded from shape arithmetic carries
// its elements as `symbolic "batch, seq"`.
//
// Names. A value is %name where name matches [A-Za-z0-9_./-] plus ':' when a digit
// follows it ("%conv/w:0"); any other name is quoted with C escapes: %"a b",
// %"x:y". So `%x:f32[2]` reads as %x then ': f32[2]'. Node and graph names follow
// '@' by the same rule (@conv1, @"my node"). Op, domain and attribute names are
// identifiers ([A-Za-z_][A-Za-z0-9_.]*) or quoted strings. Values may be used
// before the line that defines them (the graph then is simply not in topological
// order); each must be defined exactly once. A node written without @name gets
// the graph's automatic name (OpType_N).
//
// Graph attributes. A graph-valued attribute (AttrKind::kGraph: a FusedGroup's body,
// graph/fused_group.h) prints as its own text in a string literal; the parser reads a
// FusedGroup's "body" string back into a typed graph and fails, naming the node, when
// that text does not parse or type-check.
//
// Numbers. An int attribute is written without '.' or exponent (3, -1); a float
// always has one (1.0, 1e-05, inf, -inf, nan). Lists take the kind of their items
// ([1, 2] is ints, [1.0, 2] is floats); empty lists need their kind: ints[],
// floats[], strings[]. Constant and tensor data is the flat row-major list of all
// elements: integer dtypes take integers, float dtypes take any number (printed as
// the shortest decimal that converts back to the same f32/f16/bf16 bits), bool takes
// true/false (or 1/0). NaN keeps its sign but not its payload.
//
// The printer emits, in order: graph inputs, constants (creation order), nodes
// (stored order), graph outputs; attributes are sorted by name. With
// PrintOptions::max_constant_elements, larger constants print as
// `= <elided N elements>`, which is for humans only and does not parse.
// Round trips are exact (print(parse(print(g))) == print(g), with names, types,
// attributes, data, absent inputs and input/output order restored) for graphs
// whose structure VerifyGraph accepts. Values that are not inputs, constants, node
// outputs or graph outputs (left over after RemoveNode) are not printed.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln {

struct PrintOptions {
  // Constants and tensor attributes with more elements print as
  // `<elided N elements>` (not parseable). Splats always print in full.
  int64_t max_constant_elements = std::numeric_limits<int64_t>::max();
  // Print @name after each node. Off: shorter text for pass tests; parsing it back
  // gives automatic node names.
  bool print_node_names = true;
  // Print the types of node outputs (graph inputs and constants are always typed).
  bool print_value_types = true;
};

std::string PrintGraph(const Graph& graph, const PrintOptions& options = {});

// Parses the text form. Errors are InvalidArgument("<line>:<column>: <what was
// expected>, got <token>").
absl::StatusOr<std::unique_ptr<Graph>> ParseGraph(absl::string_view text);

// Pieces of the format, for messages and other printers.
// "%x" or "%\"a b\"".
std::string FormatValueName(absl::string_view name);
// Tensor data as in a constant line: "[1.0, 2.0]", "splat(0.5)", or "<elided N
// elements>" beyond options.max_constant_elements.
std::string FormatTensorData(const Tensor& tensor, const PrintOptions& options = {});
// The shortest decimal form that converts back to the same bits of `dtype` (f32,
// f16 or bf16; `value` must be representable in it), always with '.' or exponent.
std::string FormatFloat(float value, DType dtype = DType::kFloat32);

}  // namespace kiln
