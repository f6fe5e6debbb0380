// `kiln run`: a compiled bundle (model.kiln) on the CPU backend, or an .onnx model on the
// CPU reference (--reference).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/write_file.h"
#include "frontend/onnx_importer.h"
#include "frontend/tensor_file.h"
#include "graph/evaluate.h"
#include "kiln/profile.h"
#include "runtime/bundle.h"
#include "runtime/cpu_executor.h"
#include "runtime/cuda_util.h"
#include "runtime/gpu_executor.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/model_inputs.h"

namespace kiln::cli {
namespace {

constexpr char kUsage[] =
    "usage: kiln run MODEL.kiln [--device gpu|cpu] [--input NAME=SOURCE]... [--dim NAME=N]... [--output-dir DIR]\n"
    "                [--output-format npy|pb] [--iterations N] [--profile [--profile-json FILE]]\n"
    "                [--no-cuda-graph] [--no-programmatic-launch]\n"
    "       kiln run MODEL.onnx --reference [--input NAME=SOURCE]... [--output-dir DIR]\n"
    "                [--output-format npy|pb] [--dim NAME=N]... [--input-shape NAME=1x128]... [--bind NAME=SOURCE]...\n"
    "Runs the model on kiln's CPU reference and prints one line per output.\n"
    "SOURCE is a .npy or ONNX TensorProto .pb file, or a generator: arange (arange(n)/n,\n"
    "as ONNX's backend tests feed the light models), zeros, ones, random[:SEED].\n"
    "--bind fixes an input at compile time (for models that compute shapes from it).\n"
    "A bundle runs on the GPU (--device gpu, the default when there is one) or on the CPU\n"
    "backend (--device cpu: the reference evaluators inside the planned arena), --iterations\n"
    "times (default 1), and reports the latency median and spread (host to host: inputs\n"
    "copied in, outputs copied out); on the GPU also the device time of a run on data\n"
    "already in the arena (CUDA graph replay). On sm_90 and later a generated kernel\n"
    "starts as the CTAs of the one before it exit and waits on the GPU for its writes\n"
    "(programmatic dependent launch); --no-programmatic-launch launches each kernel\n"
    "after the one before has finished.\n"
    "A bundle compiled for dim ranges (kiln compile --dim seq=1..512) runs at the sizes\n"
    "--dim NAME=N gives (each dim's largest when not given); by default on the CPU backend\n"
    "when a step has no GPU kernel with run-time sizes.\n"
    "--profile then runs it --iterations more times (after one warm-up) timing every step,\n"
    "prints a per-step table sorted by time (step, median ms, share of the total, kernel,\n"
    "ONNX nodes) and writes the same data as JSON to --profile-json FILE (default:\n"
    "BUNDLE_NAME.profile.json in --output-dir when given, else in the current directory).";

// The file name of an output: its name with every byte other than a letter, digit,
// '_' or '-' (and a leading '.') written as %XX, so that distinct names never share a
// file ('a/b' -> a%2Fb, 'a_b' -> a_b) and the name can be read back.
std::string FileNameFor(const std::string& value_name) {
  std::string out;
  for (size_t i = 0; i < value_name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(value_name[i]);
    if (std::isalnum(c) || c == '_' || c == '-' || (c == '.' && i > 0)) {
      out.push_back(static_cast<char>(c));
    } else {
      out += absl::StrFormat("%%%02X", c);
    }
  }
  return out.empty() ? "%" : out;
}

// Prints one line per output (and writes it under `out_dir` when set).
absl::Status PrintOutputs(const std::vector<std::string>& names, const std::vector<Tensor>& outputs,
                          const std::string& out_dir, const std::string& format) {
  if (!out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create --output-dir ", out_dir, ": ", ec.message()));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    const std::string& name = names[i];
    const std::vector<float> v = t.ToFloat();
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (float x : v) {
      lo = std::min<double>(lo, x);
      hi = std::max<double>(hi, x);
      sum += x;
    }
    if (v.empty()) {
      std::cout << absl::StrFormat("  %-28s %-18s (no elements)", name, t.TypeString());
    } else {
      std::cout << absl::StrFormat("  %-28s %-18s min %-12.6g max %-12.6g mean %.6g", name, t.TypeString(), lo, hi,
                                   sum / v.size());
    }
    if (!out_dir.empty()) {
      const std::string file = (std::filesystem::path(out_dir) / (FileNameFor(name) + "." + format)).string();
      KILN_RETURN_IF_ERROR(format == "npy" ? WriteNpy(file, t) : WriteTensorProtoFile(file, t, name));
      std::cout << "  -> " << file;
    }
    std::cout << "\n";
  }
  return absl::OkStatus();
}

// `--profile`: the per-step table on stdout and the JSON file.
absl::Status WriteProfile(const std::string& path, const Args& args, const ProfileReport& report, int iterations) {
  std::string json_path = args.Get("profile-json");
  if (json_path.empty()) {
    const std::string name = std::filesystem::path(path).stem().string() + ".profile.json";
    const std::string dir = args.Get("output-dir");
    json_path = dir.empty() ? name : (std::filesystem::path(dir) / name).string();
  }
  std::cout << absl::StrFormat("profile over %d iteration%s (%s backend):\n", iterations, iterations == 1 ? "" : "s",
                               report.device == "gpu" ? "GPU" : "CPU")
            << FormatProfileTable(report);
  KILN_RETURN_IF_ERROR(WriteFile(json_path, ProfileToJson(report), "--profile-json"));
  std::cout << "profile -> " << json_path << "\n";
  return absl::OkStatus();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// The value of each dim symbol that an input read from a file (--input NAME=FILE)
// gives: the file's size at a dim that is the symbol alone. The first input wins; a
// disagreement is caught when the inputs are conformed to the sizes chosen.
std::map<std::string, int64_t> DimsFromInputFiles(const bundle::Manifest& m, const std::map<std::string, Tensor>& files) {
  std::map<std::string, int64_t> found;
  for (const bundle::TensorSignature& in : m.inputs()) {
    auto it = files.find(in.name());
    if (in.dims_size() == 0 || it == files.end()) continue;
    const Tensor& t = it->second;
    if (t.rank() != in.dims_size()) continue;  // ConformInput names the mismatch
    for (int d = 0; d < in.dims_size(); ++d) {
      for (const bundle::DimSymbol& s : m.dim_symbols()) {
        if (in.dims(d) == s.name()) found.emplace(s.name(), t.shape()[d]);
      }
    }
  }
  return found;
}

// The sizes a run of a dynamic bundle uses: --dim NAME=N inside each range, else the
// size the inputs read from files have, else the range's largest value (said on
// stderr). Empty for a static bundle, where --dim is an error.
absl::StatusOr<std::vector<int64_t>> RunSizes(const bundle::Manifest& m, const Args& args,
                                              const std::map<std::string, Tensor>& files) {
  std::vector<int64_t> sizes;
  KILN_ASSIGN_OR_RETURN(auto given, ParseDims(args.GetAll("dim")));
  if (m.dim_symbols_size() == 0) {
    if (!given.empty()) {
      return absl::InvalidArgumentError(
          "--dim picks the sizes of a bundle compiled for dim ranges; this bundle's sizes were fixed when compiling");
    }
    return sizes;
  }
  const std::map<std::string, int64_t> from_files = DimsFromInputFiles(m, files);
  std::vector<std::string> defaulted;
  for (const bundle::DimSymbol& d : m.dim_symbols()) {
    auto it = given.find(d.name());
    const bool from_file = it == given.end() && from_files.contains(d.name());
    if (from_file) it = given.emplace(d.name(), from_files.at(d.name())).first;
    if (it == given.end()) {
      sizes.push_back(d.max());
      defaulted.push_back(absl::StrCat(d.name(), "=", d.max()));
      continue;
    }
    if (it->second < d.min() || it->second > d.max()) {
      return absl::InvalidArgumentError(absl::StrCat(from_file ? "the --input files give " : "--dim ", d.name(), "=",
                                                     it->second, from_file ? ", " : " is ", "outside the range ",
                                                     d.min(), "..", d.max(), " the bundle was compiled for"));
    }
    sizes.push_back(it->second);
    given.erase(it);
  }
  if (!given.empty()) {
    std::vector<std::string> names;
    for (const bundle::DimSymbol& d : m.dim_symbols()) names.push_back(d.name());
    return absl::InvalidArgumentError(absl::StrCat(
        "--dim ", given.begin()->first, ": the bundle has no such dim (dims: ", absl::StrJoin(names, ", "), ")"));
  }
  if (!defaulted.empty()) {
    std::cerr << "dynamic bundle: running at the largest sizes " << absl::StrJoin(defaulted, ", ")
              << " (pick others with --dim NAME=N)\n";
  }
  return sizes;
}

// `kiln run MODEL.kiln`: the bundle on the GPU or the CPU backend.
absl::Status RunBundle(const std::string& path, const Args& args, const std::string& format) {
  std::string device = args.Get("device", "");
  if (!device.empty() && device != "cpu" && device != "gpu") {
    return absl::InvalidArgumentError(absl::StrCat("--device must be cpu or gpu, got '", device, "'"));
  }
  if (args.Has("reference")) {
    return absl::InvalidArgumentError("--reference is for .onnx models; a bundle runs with --device gpu or --device cpu");
  }
  if (args.Has("input-shape") || args.Has("bind")) {
    return absl::InvalidArgumentError("--input-shape and --bind are fixed when compiling; pass them to kiln compile");
  }
  int iterations = 1;
  if (args.Has("iterations") && (!absl::SimpleAtoi(args.Get("iterations"), &iterations) || iterations < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--iterations must be a positive integer, got '",
                                                   args.Get("iterations"), "'"));
  }
  const auto start_load = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Bundle> bundle, Bundle::Load(path));
  const bundle::Manifest& m = bundle->manifest();
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const CpuProgram> program, CpuProgram::Create(*bundle));
  // A dynamic bundle runs at the sizes --dim gives (each dim's largest by default).
  std::map<std::string, std::string> sources;
  std::string names;
  for (const auto& in : m.inputs()) absl::StrAppend(&names, names.empty() ? "" : ", ", in.name());
  for (const std::string& spec : args.GetAll("input")) {
    KILN_ASSIGN_OR_RETURN(auto kv, SplitAssignment(spec, "input"));
    bool known = false;
    for (const auto& in : m.inputs()) known |= in.name() == kv.first;
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("--input ", kv.first, ": the bundle has no such input (inputs: ", names, ")"));
    }
    sources[kv.first] = kv.second;
  }
  // Input files are read once: a dynamic bundle's sizes come from them.
  std::map<std::string, Tensor> files;
  for (const auto& [name, source] : sources) {
    if (IsInputGenerator(source)) continue;
    KILN_ASSIGN_OR_RETURN(files[name], ReadTensorFile(source));
  }
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> sizes, RunSizes(m, args, files));
  std::string note;
  if (device.empty() && m.dim_symbols_size() > 0 &&
      std::any_of(m.steps().begin(), m.steps().end(),
                  [](const bundle::Step& s) { return absl::StartsWith(s.kernel(), "cpu_ref:"); })) {
    device = "cpu";
    note = " (steps of this dynamic bundle have no GPU kernel with run-time sizes; kiln inspect names them)";
  }
  if (device.empty()) {  // default: the GPU when there is one and the bundle runs there
    auto gpu = LocalGpu();
    device = gpu.ok() ? "gpu" : "cpu";
    if (!gpu.ok()) note = absl::StrCat(" (", gpu.status().message(), ")");
  }
  std::unique_ptr<CpuExecutor> cpu;
  std::unique_ptr<GpuExecutor> gpu;
  if (device == "gpu") {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<const GpuProgram> gpu_program, GpuProgram::Create(program));
    GpuExecutorOptions gpu_options;
    gpu_options.enable_cuda_graph = !args.Has("no-cuda-graph");
    gpu_options.enable_programmatic_launch = !args.Has("no-programmatic-launch");
    KILN_ASSIGN_OR_RETURN(gpu, GpuExecutor::Create(std::move(gpu_program), gpu_options));
  } else {
    KILN_ASSIGN_OR_RETURN(cpu, CpuExecutor::Create(program));
  }
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_load).count();

  TensorMap feeds;
  for (const auto& in : m.inputs()) {
    KILN_ASSIGN_OR_RETURN(const Shape shape, SignatureShape(m, in, sizes));
    auto dtype = ParseDType(in.dtype());
    if (!dtype.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": input '", in.name(), "': ", dtype.status().message()));
    auto it = sources.find(in.name());
    if (it == sources.end()) {
      return absl::InvalidArgumentError(absl::StrCat("missing input '", in.name(), "' (", in.dtype(), ShapeToString(shape),
                                                     "): pass --input ", in.name(), "=FILE.npy (or =arange, =random)"));
    }
    if (auto file = files.find(in.name()); file != files.end()) {
      KILN_ASSIGN_OR_RETURN(feeds[in.name()], ConformInput(in.name(), it->second, std::move(file->second), *dtype, shape));
    } else {
      KILN_ASSIGN_OR_RETURN(feeds[in.name()], MakeInput(in.name(), it->second, *dtype, shape));
    }
  }

  std::vector<double> times_ms;
  std::vector<Tensor> outputs;
  for (int i = 0; i < iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (gpu != nullptr) {
      KILN_ASSIGN_OR_RETURN(outputs, gpu->Run(feeds));
    } else {
      KILN_ASSIGN_OR_RETURN(outputs, cpu->Run(feeds));
    }
    times_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::vector<double> sorted = times_ms;
  std::sort(sorted.begin(), sorted.end());
  if (gpu != nullptr) {
    const GpuInfo& info = gpu->program().gpu();
    std::cout << absl::StrFormat("%s: GPU %s (%s; %s bundle, %s), %d steps, arena %d bytes, weights %d bytes, load %.2fs\n",
                                 path, info.name, info.arch, m.target_arch(), m.precision(), m.steps_size(),
                                 gpu->arena_bytes(), gpu->program().weight_bytes(), load_s);
    std::cout << "  " << (gpu->cuda_graph_note().empty() ? "CUDA graphs off (--no-cuda-graph)" : gpu->cuda_graph_note())
              << "\n";
  } else {
    std::cout << absl::StrFormat("%s: CPU backend%s (%s bundle, %s), %d steps, arena %d bytes, load %.2fs\n", path,
                                 note, m.target_arch(), m.precision(), m.steps_size(), cpu->arena_bytes(), load_s);
  }
  std::cout << absl::StrFormat("latency over %d iteration%s: median %.3f ms, min %.3f ms, max %.3f ms\n", iterations,
                               iterations == 1 ? "" : "s", Median(times_ms), sorted.front(), sorted.back());
  if (gpu != nullptr) {
    KILN_ASSIGN_OR_RETURN(std::vector<double> device_ms, gpu->TimeRuns(std::max(iterations, 10)));
    std::vector<double> d = device_ms;
    std::sort(d.begin(), d.end());
    std::cout << absl::StrFormat("GPU time over %d run%s on data in the arena: median %.3f ms, min %.3f ms, max %.3f ms\n",
                                 static_cast<int>(d.size()), d.size() == 1 ? "" : "s", Median(device_ms), d.front(),
                                 d.back());
  }
  std::vector<std::string> out_names;
  for (const auto& out : m.outputs()) out_names.push_back(out.name());
  KILN_RETURN_IF_ERROR(PrintOutputs(out_names, outputs, args.Get("output-dir"), format));
  if (args.Has("profile") || args.Has("profile-json")) {
    ProfileReport report;
    if (gpu != nullptr) {
      KILN_ASSIGN_OR_RETURN(report, gpu->Profile(feeds, iterations));
    } else {
      KILN_ASSIGN_OR_RETURN(report, ProfileCpuExecutor(*cpu, feeds, iterations));
    }
    KILN_RETURN_IF_ERROR(WriteProfile(path, args, report, iterations));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunCommand(const std::vector<std::string>& argv) {
  KILN_ASSIGN_OR_RETURN(Args args, Args::Parse(argv,
                                               {"input", "output-dir", "output-format", "input-shape", "dim", "bind",
                                                "device", "iterations", "profile-json"},
                                               {"reference", "help", "profile", "no-cuda-graph", "no-programmatic-launch"}));
  if (args.Has("help")) {
    std::cout << kUsage << "\n";
    return absl::OkStatus();
  }
  if (args.positional().size() != 1) return absl::InvalidArgumentError(absl::StrCat("expected one model file\n", kUsage));
  const std::string path = args.positional()[0];
  const std::string format = args.Get("output-format", "npy");
  if (format != "npy" && format != "pb") return absl::InvalidArgumentError("--output-format must be npy or pb");
  if (absl::EndsWith(path, ".kiln")) return RunBundle(path, args, format);
  if (!absl::EndsWith(path, ".onnx")) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": kiln run takes a compiled bundle (.kiln) or an .onnx model (with --reference)"));
  }
  if (!args.Has("reference")) {
    return absl::InvalidArgumentError(
        "running an .onnx file needs --reference (the CPU reference evaluator); or compile it first: kiln compile "
        "MODEL.onnx -o MODEL.kiln, then kiln run MODEL.kiln");
  }
  if (args.Has("device") || args.Has("iterations") || args.Has("profile") || args.Has("profile-json")) {
    return absl::InvalidArgumentError(
        "--device, --iterations and --profile are for bundles (.kiln); compile the model first");
  }

  ImportOptions options;
  KILN_ASSIGN_OR_RETURN(options.input_shapes, ParseInputShapes(args.GetAll("input-shape")));
  KILN_ASSIGN_OR_RETURN(options.dims, ParseDims(args.GetAll("dim")));
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

  std::cout << absl::StrFormat("%s: CPU reference, %d nodes, import %.2fs, run %.3fs\n", path, graph.num_nodes(),
                               import_s, run_s);
  std::vector<std::string> out_names;
  for (const Value* v : graph.outputs()) out_names.push_back(v->name());
  return PrintOutputs(out_names, outputs, args.Get("output-dir"), format);
}

}  // namespace kiln::cli
