// Graphviz DOT export of a Graph.
#include "graph/dot.h"

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/text_format.h"

namespace kiln {
namespace {

// A DOT double-quoted string. Backslash and quote are escaped; a newline becomes
// the label line break \n; other control characters become spaces.
std::string Quoted(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default: out += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
    }
  }
  out += '"';
  return out;
}

// A multi-line label: each line escaped, joined with DOT's "\n" line break.
std::string Label(const std::vector<std::string>& lines) {
  std::vector<std::string> escaped;
  for (const std::string& line : lines) {
    std::string q = Quoted(line);
    escaped.push_back(q.substr(1, q.size() - 2));
  }
  return absl::StrCat("\"", absl::StrJoin(escaped, "\\n"), "\"");
}

bool IsDrawnConstant(const Value* v) {
  return v->is_constant() && v->constant().numel() <= kDotMaxDrawnConstantElements;
}

}  // namespace

std::string ExportDot(const Graph& graph) {
  std::string out = absl::StrCat("digraph ", Quoted(graph.name()), " {\n");
  out += "  rankdir=TB;\n";
  out += "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", fontname=\"Helvetica\", "
         "fontsize=11];\n";
  out += "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#555555\"];\n";

  // Where each value comes from: the DOT id of its source.
  absl::flat_hash_map<const Value*, std::string> source;
  const std::vector<Node*> nodes = graph.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const Value* v : nodes[i]->outputs()) {
      if (v) source.emplace(v, absl::StrCat("n", i));
    }
  }

  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Value* v = graph.inputs()[i];
    if (!v) continue;
    const std::string id = absl::StrCat("in", i);
    source.emplace(v, id);
    absl::StrAppend(&out, "  ", id, " [label=", Label({v->name(), v->TypeString()}),
                    ", shape=invhouse, style=filled, fillcolor=\"#cfe2ff\"];\n");
  }

  int next_const = 0;
  for (const Value* v : graph.constants()) {
    if (!IsDrawnConstant(v) || source.contains(v)) continue;
    // Drawn only when something reads it.
    if (v->uses().empty() && !graph.IsGraphOutput(v)) continue;
    const std::string id = absl::StrCat("c", next_const++);
    source.emplace(v, id);
    absl::StrAppend(&out, "  ", id, " [label=",
                    Label({v->name(), v->TypeString(), FormatTensorData(v->constant())}),
                    ", shape=note, style=filled, fillcolor=\"#fff3cd\", fontsize=8];\n");
  }

  int next_undefined = 0;
  // The DOT id of a value's source, drawing an "undefined" marker when it has none.
  auto source_of = [&](const Value* v) -> std::string {
    auto it = source.find(v);
    if (it != source.end()) return it->second;
    const std::string id = absl::StrCat("u", next_undefined++);
    absl::StrAppend(&out, "  ", id, " [label=", Label({v->name(), "(undefined)"}),
                    ", shape=plaintext, style=\"\", fontcolor=\"#dc3545\"];\n");
    source.emplace(v, id);
    return id;
  };
  auto edge = [&](const std::string& from, const std::string& to, const Value* v, bool constant) {
    absl::StrAppend(&out, "  ", from, " -> ", to, " [label=", Quoted(v->TypeString()),
                    ", tooltip=", Quoted(v->name()), constant ? ", style=dashed" : "", "];\n");
  };

  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node* node = nodes[i];
    const std::string id = absl::StrCat("n", i);
    std::vector<std::string> lines;
    lines.push_back(node->domain().empty() ? node->op_type()
                                           : absl::StrCat(node->domain(), "::", node->op_type()));
    lines.push_back(node->name());
    for (const Value* in : node->inputs()) {
      if (in && in->is_constant() && !IsDrawnConstant(in) && !source.contains(in)) {
        lines.push_back(absl::StrCat(in->name(), ": ", in->TypeString()));
      }
    }
    absl::StrAppend(&out, "  ", id, " [label=", Label(lines), "];\n");
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string id = absl::StrCat("n", i);
    for (const Value* in : nodes[i]->inputs()) {
      if (!in) continue;
      if (in->is_constant() && !IsDrawnConstant(in) && !source.contains(in)) continue;  // in the label
      edge(source_of(in), id, in, in->is_constant());
    }
  }

  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const Value* v = graph.outputs()[i];
    if (!v) continue;
    const std::string id = absl::StrCat("out", i);
    if (v->is_constant() && !source.contains(v)) {  // a large constant as graph output
      const std::string cid = absl::StrCat("c", next_const++);
      source.emplace(v, cid);
      absl::StrAppend(&out, "  ", cid, " [label=", Label({v->name(), v->TypeString()}),
                      ", shape=note, style=filled, fillcolor=\"#fff3cd\", fontsize=8];\n");
    }
    absl::StrAppend(&out, "  ", id, " [label=", Label({v->name(), v->TypeString()}),
                    ", shape=house, style=filled, fillcolor=\"#d1e7dd\"];\n");
    edge(source_of(v), id, v, v->is_constant());
  }
  out += "}\n";
  return out;
}

}  // namespace kiln
