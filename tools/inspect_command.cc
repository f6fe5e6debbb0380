// `kiln inspect model.onnx`: inputs, outputs, op histogram, parameters, unsupported ops.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/write_file.h"
#include "frontend/onnx_importer.h"
#include "frontend/onnx_tensor.h"
#include "graph/dot.h"
#include "graph/text_format.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/model_inputs.h"

namespace kiln::cli {
namespace {

constexpr char kUsage[] =
    "usage: kiln inspect MODEL.onnx [--dim NAME=N]... [--input-shape NAME=1x128]... [--graph] [--dot FILE]\n"
    "       kiln inspect MODEL.kiln [--json]   (bundle: signature, sections, memory plan, steps)\n"
    "Prints the model's inputs and outputs, op histogram, parameter count and any\n"
    "unsupported ops, then imports it and reports the graph kiln would compile.\n"
    "  --graph      print the imported graph in kiln's text form (large constants elided)\n"
    "  --dot FILE   write the imported graph as Graphviz DOT";

std::string OnnxTypeString(const onnx::TypeProto& type) {
  if (!type.has_tensor_type()) return "(not a tensor)";
  const auto& tt = type.tensor_type();
  std::string dims;
  if (!tt.has_shape()) {
    dims = "[?]";
  } else {
    std::vector<std::string> parts;
    for (const auto& d : tt.shape().dim()) {
      parts.push_back(d.has_dim_value() ? absl::StrCat(d.dim_value()) : d.has_dim_param() ? d.dim_param() : "?");
    }
    dims = absl::StrCat("[", absl::StrJoin(parts, ","), "]");
  }
  auto dtype = DTypeFromOnnx(tt.elem_type());
  return absl::StrCat(dtype.ok() ? std::string(DTypeName(*dtype)) : OnnxTypeName(tt.elem_type()), dims);
}

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (bytes >= 1024 && u < 3) {
    bytes /= 1024;
    ++u;
  }
  return absl::StrFormat("%.1f %s", bytes, units[u]);
}

}  // namespace

absl::Status InspectCommand(const std::vector<std::string>& argv) {
  KILN_ASSIGN_OR_RETURN(Args args, Args::Parse(argv, {"input-shape", "dim", "dot"}, {"help", "graph", "json"}));
  if (args.Has("help")) {
    std::cout << kUsage << "\n";
    return absl::OkStatus();
  }
  if (args.positional().size() != 1) return absl::InvalidArgumentError(absl::StrCat("expected one model file\n", kUsage));
  const std::string path = args.positional()[0];
  if (absl::EndsWith(path, ".kiln")) return InspectBundle(path, args.Has("json"));
  if (args.Has("json")) return absl::InvalidArgumentError("--json is for bundles (.kiln); ONNX models print text only");
  KILN_ASSIGN_OR_RETURN(onnx::ModelProto model, ReadOnnxModel(path));
  const auto& g = model.graph();

  std::cout << "model:    " << path << "\n";
  std::cout << "format:   ONNX IR " << model.ir_version() << ", opset " << DefaultOpset(model);
  if (!model.producer_name().empty()) std::cout << ", from " << model.producer_name() << " " << model.producer_version();
  std::cout << "\n";

  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : g.initializer()) inits[t.name()] = &t;
  std::cout << "inputs:\n";
  for (const auto& in : g.input()) {
    if (inits.count(in.name())) continue;
    std::cout << absl::StrFormat("  %-32s %s\n", in.name(), OnnxTypeString(in.type()));
  }
  std::cout << "outputs:\n";
  for (const auto& out : g.output()) std::cout << absl::StrFormat("  %-32s %s\n", out.name(), OnnxTypeString(out.type()));

  std::map<std::string, int> histogram;
  for (const auto& n : g.node()) histogram[n.domain().empty() ? n.op_type() : n.domain() + "::" + n.op_type()]++;
  std::vector<std::pair<std::string, int>> ops(histogram.begin(), histogram.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::cout << "ops:      " << g.node_size() << " nodes, " << ops.size() << " op types\n";
  for (const auto& [op, count] : ops) std::cout << absl::StrFormat("  %-24s %6d\n", op, count);

  const auto unsupported = FindUnsupportedOps(model);
  std::cout << "unsupported ops: " << (unsupported.empty() ? "none" : "") << "\n";
  if (!unsupported.empty()) std::cout << "  " << FormatUnsupportedOps(unsupported) << "\n";

  // Parameters: counted on the imported graph, where weights built by
  // ConstantOfShape and friends are materialised; else on the initializers.
  ImportOptions options;
  KILN_ASSIGN_OR_RETURN(options.input_shapes, ParseInputShapes(args.GetAll("input-shape")));
  KILN_ASSIGN_OR_RETURN(options.dims, ParseDims(args.GetAll("dim")));
  auto graph = ImportOnnxModel(model, ModelDir(path), options);
  int64_t params = 0, bytes = 0;
  if (graph.ok()) {
    for (const Value* c : (*graph)->constants()) {
      if (IsFloating(c->dtype())) params += c->numel();
      bytes += c->numel() * DTypeSize(c->dtype());
    }
  } else {
    for (const auto& [name, t] : inits) {
      int64_t n = 1;
      for (int64_t d : t->dims()) n *= d;
      params += n;
    }
  }
  std::cout << "parameters: " << params << (graph.ok() ? absl::StrCat(" (constants: ", HumanBytes(bytes), ")") : " (initializers)")
            << "\n";
  if (!graph.ok()) {
    std::cout << "import:   FAILED\n";
    return absl::Status(graph.status().code(), absl::StrCat(path, ": ", graph.status().message()));
  }
  const Graph& imported = **graph;
  std::cout << "import:   ok, " << imported.num_nodes() << " nodes after constant folding\n";
  for (const Value* in : imported.inputs()) std::cout << absl::StrFormat("  input  %-25s %s\n", in->name(), in->TypeString());
  for (const Value* out : imported.outputs()) {
    std::cout << absl::StrFormat("  output %-25s %s\n", out->name(), out->TypeString());
  }
  if (args.Has("graph")) {
    PrintOptions print;
    print.max_constant_elements = 16;
    std::cout << "\n" << PrintGraph(imported, print);
  }
  if (args.Has("dot")) {
    KILN_RETURN_IF_ERROR(WriteFile(args.Get("dot"), ExportDot(imported), "--dot"));
    std::cout << "wrote " << args.Get("dot") << "\n";
  }
  return absl::OkStatus();
}

}  // namespace kiln::cli
