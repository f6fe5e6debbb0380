// `kiln run model.onnx --reference`: runs a model on the CPU reference.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "frontend/onnx_importer.h"
#include "frontend/tensor_file.h"
#include "graph/evaluate.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/model_inputs.h"

namespace kiln::cli {
namespace {

constexpr char kUsage[] =
    "usage: kiln run MODEL.onnx --reference [--input NAME=SOURCE]... [--output-dir DIR]\n"
    "                [--output-format npy|pb] [--input-shape NAME=1x128]... [--bind NAME=SOURCE]...\n"
    "Runs the model on kiln's CPU reference and prints one line per output.\n"
    "SOURCE is a .npy or ONNX TensorProto .pb file, or a generator: arange (arange(n)/n,\n"
    "as ONNX's backend tests feed the light models), zeros, ones, random[:SEED].\n"
    "--bind fixes an input at compile time (for models that compute shapes from it).";

std::string FileNameFor(const std::string& value_name) {
  std::string out = value_name;
  for (char& c : out) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) c = '_';
  }
  return out;
}

}  // namespace

absl::Status RunCommand(const std::vector<std::string>& argv) {
  KILN_ASSIGN_OR_RETURN(Args args, Args::Parse(argv, {"input", "output-dir", "output-format", "input-shape", "bind"},
                                               {"reference", "help"}));
  if (args.Has("help")) {
    std::cout << kUsage << "\n";
    return absl::OkStatus();
  }
  if (args.positional().size() != 1) return absl::InvalidArgumentError(absl::StrCat("expected one model file\n", kUsage));
  const std::string path = args.positional()[0];
  if (!absl::EndsWith(path, ".onnx")) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": kiln run takes an .onnx model (with --reference)"));
  }
  if (!args.Has("reference")) {
    return absl::InvalidArgumentError(
        "running an .onnx file needs --reference (the CPU reference evaluator); compiled bundles are not available yet");
  }
  const std::string format = args.Get("output-format", "npy");
  if (format != "npy" && format != "pb") return absl::InvalidArgumentError("--output-format must be npy or pb");

  ImportOptions options;
  KILN_ASSIGN_OR_RETURN(options.input_shapes, ParseInputShapes(args.GetAll("input-shape")));
  KILN_ASSIGN_OR_RETURN(onnx::ModelProto model, ReadOnnxModel(path));
  // --bind values take the dtype and shape the model declares for the input.
  for (const std::string& spec : args.GetAll("bind")) {
    KILN_ASSIGN_OR_RETURN(auto kv, SplitAssignment(spec, "bind"));
    KILN_ASSIGN_OR_RETURN(Tensor t, ReadTensorFile(kv.second));
    options.constant_inputs[kv.first] = std::move(t);
  }
  const auto start_import = std::chrono::steady_clock::now();
  auto graph_or = ImportOnnxModel(std::move(model), ModelDir(path), options);
  if (!graph_or.ok()) return absl::Status(graph_or.status().code(), absl::StrCat(path, ": ", graph_or.status().message()));
  const Graph& graph = **graph_or;
  const double import_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_import).count();

  std::map<std::string, std::string> sources;
  for (const std::string& spec : args.GetAll("input")) {
    KILN_ASSIGN_OR_RETURN(auto kv, SplitAssignment(spec, "input"));
    const Value* v = graph.FindValue(kv.first);
    if (v == nullptr || !graph.IsGraphInput(v)) {
      std::string names;
      for (const Value* in : graph.inputs()) absl::StrAppend(&names, names.empty() ? "" : ", ", in->name());
      return absl::InvalidArgumentError(absl::StrCat("--input ", kv.first, ": the model has no such input (inputs: ", names, ")"));
    }
    sources[kv.first] = kv.second;
  }
  TensorMap feeds;
  for (const Value* in : graph.inputs()) {
    auto it = sources.find(in->name());
    if (it == sources.end()) {
      return absl::InvalidArgumentError(absl::StrCat("missing input '", in->name(), "' (", in->TypeString(),
                                                     "): pass --input ", in->name(), "=FILE.npy (or =arange, =random)"));
    }
    KILN_ASSIGN_OR_RETURN(feeds[in->name()], MakeInput(in->name(), it->second, in->dtype(), in->shape()));
  }

  const auto start = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, EvaluateGraph(graph, feeds));
  const double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const std::string out_dir = args.Get("output-dir");
  if (!out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create --output-dir ", out_dir, ": ", ec.message()));
  }
  std::cout << absl::StrFormat("%s: CPU reference, %d nodes, import %.2fs, run %.3fs\n", path, graph.num_nodes(),
                               import_s, run_s);
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    const std::string& name = graph.outputs()[i]->name();
    const std::vector<float> v = t.ToFloat();
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (float x : v) {
      lo = std::min<double>(lo, x);
      hi = std::max<double>(hi, x);
      sum += x;
    }
    std::cout << absl::StrFormat("  %-28s %-18s min %-12.6g max %-12.6g mean %.6g", name, t.TypeString(), lo, hi,
                                 v.empty() ? 0.0 : sum / v.size());
    if (!out_dir.empty()) {
      const std::string file = (std::filesystem::path(out_dir) / (FileNameFor(name) + "." + format)).string();
      KILN_RETURN_IF_ERROR(format == "npy" ? WriteNpy(file, t) : WriteTensorProtoFile(file, t, name));
      std::cout << "  -> " << file;
    }
    std::cout << "\n";
  }
  return absl::OkStatus();
}

}  // namespace kiln::cli
