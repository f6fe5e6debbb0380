// `kiln bench MODEL.onnx --compare fused,unfused`: compiles the model once per
// configuration, runs each bundle on the same inputs, and prints latency, speedup,
// device memory, compile time and the largest numeric difference between them; on the GPU
// also the board's mean power and SM clock while each one ran (NVML).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "common/write_file.h"
#include "compiler/compiler.h"
#include "compiler/gemm_tuner.h"
#include "frontend/onnx_importer.h"
#include "runtime/bundle.h"
#include "runtime/cpu_executor.h"
#include "runtime/cuda_util.h"
#include "runtime/gpu_executor.h"
#include "runtime/nvml_meter.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/compile_flags.h"
#include "tools/model_inputs.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

constexpr char kUsage[] =
    "usage: kiln bench MODEL.onnx [--compare fused,unfused] [--device gpu|cpu] [--arch ARCH]\n"
    "                  [--precision fp16|bf16|fp32|tf32] [--dim NAME=N]... [--input-shape NAME=1x128]...\n"
    "                  [--calibrate NAME=SOURCE]... [--input NAME=SOURCE]...\n"
    "                  [--iterations N] [--warmup N] [--csv FILE] [--plot FILE.png]\n"
    "                  [--layout auto|nchw|nhwc] [--range NAME=LO..HI]...\n"
    "                  [--tuning-db FILE] [--no-tuning-db]\n"
    "Compiles MODEL once per configuration, runs every bundle on the same inputs and\n"
    "prints, per configuration: compile time, steps and kernel launches, latency (median,\n"
    "min, p90 of --iterations runs, default 50, after --warmup runs, default 10), speedup\n"
    "over the baseline (unfused when compared, else the first configuration), device\n"
    "memory, and the largest difference of each output from the baseline's (max |a-b|\n"
    "over the output's range, and the cosine similarity).\n"
    "Configurations (--compare, comma-separated, default fused,unfused):\n"
    "  unfused    one op per kernel (kiln compile --no-fuse)\n"
    "  fused      the default compile (fusion on, --matmul-groups auto)\n"
    "  serial     fused, each kernel launched after the one before has finished (no\n"
    "             programmatic dependent launch: kiln run --no-programmatic-launch)\n"
    "  generated  fusion on, MatMul groups on kiln's generated GEMM (--matmul-groups generated)\n"
    "  library    fusion on, MatMul groups on cuBLASLt epilogues (--matmul-groups library)\n"
    "  cudnn-conv fusion on, conv groups as one cuDNN fused call (--conv-groups cudnn)\n"
    "  conv-expand fusion on, cuDNN convolution + a generated epilogue kernel (--conv-groups expand)\n"
    "  conv-generated fusion on, NHWC convs and their groups on kiln's kernels (--conv-groups generated)\n"
    "  nchw       fusion on, convs and pools in ONNX's layout (--layout nchw)\n"
    "  nhwc       fusion on, convs and pools channels-last (--layout nhwc)\n"
    "  dynamic    one bundle for the --range NAME=LO..HI ranges (kiln compile --dim\n"
    "             NAME=LO..HI), run at the sizes --dim NAME=N gives: a dynamic bundle\n"
    "             against static ones compiled for exactly those sizes\n"
    "  dynamic-kernels  the dynamic bundle with its size-only steps (masks, position\n"
    "             ids) run as kernels on every run instead of once per size on the host\n"
    "  dynamic-library  the dynamic bundle with its MatMul groups on cuBLASLt, planned\n"
    "             per run size (--matmul-groups library), instead of kiln's GEMMs\n"
    "On the GPU (the default when there is one) the latency is device time per run on\n"
    "data already in the arena (CUDA graph replay); device memory is what creating the\n"
    "session took (weights, arena, library workspaces: cudaMemGetInfo before and after).\n"
    "On the CPU backend (--device cpu) it is host time per run, and no memory column.\n"
    "Every configuration reads the GEMM tuning database as kiln compile does (--tuning-db\n"
    "FILE names another; --no-tuning-db: the heuristic only, to compare against a tuned\n"
    "compile on the same machine).\n"
    "On the GPU, where the driver's NVML library answers, the table also gives the board's\n"
    "mean SM clock (SM_MHz) and power (W) over the timed runs, sampled every 10 ms, and\n"
    "the energy a run took (mJ/run: mean power x mean time per run). A GPU at its power\n"
    "limit lowers its clock: configurations that differ there differ in energy per run\n"
    "rather than in work per clock. The power state of a long series needs a second or\n"
    "more of runs: raise --iterations (and --warmup) until the clock settles.\n"
    "--layout sets the layout of every configuration as kiln compile --layout does (the\n"
    "nchw/nhwc configurations override it).\n"
    "Inputs default to random:1 (uniform [0,1)); SOURCE as in kiln run.\n"
    "--csv FILE writes one row per configuration; --plot FILE.png draws the latencies with\n"
    "gnuplot (which must be installed: apt-get install gnuplot).";

struct Config {
  std::string name;
  CompileOptions options;
  bool programmatic_launch = true;  // GpuExecutorOptions::enable_programmatic_launch
  bool size_only_steps_on_host = true;  // GpuExecutorOptions::size_only_steps_on_host
};

struct Result {
  std::string config;
  double compile_s = 0;
  int steps = 0;
  // Kernel launches + library calls per inference (views excluded); on the GPU, what a
  // run enqueues, the copies of a dynamic bundle's size-only steps included.
  int launches = 0;
  std::string matmul_groups;
  std::vector<double> times_ms;
  double median_ms = 0, min_ms = 0, p90_ms = 0;
  int64_t device_bytes = -1;  // -1: not measured (CPU backend)
  int64_t arena_bytes = 0, weight_bytes = 0;
  std::vector<Tensor> outputs;
  double max_rel_diff = 0;  // vs the baseline configuration, max over outputs
  double min_cosine = 1;
  std::optional<PowerReading> power;  // during the timed runs (GPU, NVML)
  // The board's energy per run: mean power x mean time per run (millijoules).
  double MjPerRun() const {
    double sum = 0;
    for (double t : times_ms) sum += t;
    return power && !times_ms.empty() ? power->mean_watts * sum / static_cast<double>(times_ms.size()) : 0;
  }
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

absl::StatusOr<int> PositiveInt(const Args& args, const std::string& flag, int dflt) {
  if (!args.Has(flag)) return dflt;
  int v = 0;
  if (!absl::SimpleAtoi(args.Get(flag), &v) || v < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be a positive integer, got '", args.Get(flag), "'"));
  }
  return v;
}

// The dynamic configuration's options: `base` with each ranged dim compiled for its
// range instead of the --dim value the run uses, which must lie inside it.
absl::StatusOr<CompileOptions> DynamicOptions(const CompileOptions& base, const std::vector<DimSymbol>& ranges) {
  if (ranges.empty()) {
    return absl::InvalidArgumentError("--compare dynamic needs the ranges to compile for: --range NAME=LO..HI");
  }
  CompileOptions options = base;
  for (const DimSymbol& r : ranges) {
    auto it = options.dims.find(r.name);
    if (it == options.dims.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--range ", r.name, ": give the size the runs use with --dim ", r.name, "=N"));
    }
    if (it->second < r.min || it->second > r.max) {
      return absl::InvalidArgumentError(absl::StrCat("--dim ", r.name, "=", it->second, " is outside --range ", r.name,
                                                     "=", r.min, "..", r.max));
    }
    options.dims.erase(it);
  }
  options.dim_ranges = ranges;
  return options;
}

absl::StatusOr<std::vector<Config>> ParseConfigs(const std::string& spec, const CompileOptions& base,
                                                 const std::vector<DimSymbol>& ranges) {
  std::vector<Config> configs;
  for (absl::string_view part : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    Config c{std::string(part), base};
    if (c.name == "dynamic" || c.name == "dynamic-kernels" || c.name == "dynamic-library") {
      KILN_ASSIGN_OR_RETURN(c.options, DynamicOptions(base, ranges));
      c.size_only_steps_on_host = c.name != "dynamic-kernels";
      if (c.name == "dynamic-library") c.options.matmul_groups = codegen::MatMulGroups::kLibrary;
    } else if (c.name == "unfused") {
      c.options.fuse = false;
    } else if (c.name == "fused") {
    } else if (c.name == "serial") {
      c.programmatic_launch = false;
    } else if (c.name == "generated" || c.name == "library") {
      c.options.matmul_groups =
          c.name == "generated" ? codegen::MatMulGroups::kGenerated : codegen::MatMulGroups::kLibrary;
    } else if (c.name == "cudnn-conv") {
      c.options.conv_groups = codegen::ConvGroups::kCudnn;
    } else if (c.name == "conv-expand") {
      c.options.conv_groups = codegen::ConvGroups::kExpand;
    } else if (c.name == "conv-generated") {
      c.options.conv_groups = codegen::ConvGroups::kGenerated;
    } else if (c.name == "nchw" || c.name == "nhwc") {
      c.options.layout = c.name == "nchw" ? Layout::kNchw : Layout::kNhwc;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--compare: unknown configuration '", c.name,
                       "' (fused, unfused, serial, generated, library, cudnn-conv, conv-expand, ",
                       "conv-generated, nchw, nhwc, dynamic, dynamic-kernels, dynamic-library)"));
    }
    for (const Config& other : configs) {
      if (other.name == c.name) return absl::InvalidArgumentError(absl::StrCat("--compare names '", c.name, "' twice"));
    }
    configs.push_back(std::move(c));
  }
  if (configs.empty()) return absl::InvalidArgumentError("--compare needs at least one configuration");
  return configs;
}

// Max |a - b| over the range of `want`, and the cosine similarity of the two.
std::pair<double, double> Difference(const Tensor& got, const Tensor& want) {
  const std::vector<float> a = got.ToFloat(), b = want.ToFloat();
  double lo = INFINITY, hi = -INFINITY, max_abs = 0, dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    lo = std::min<double>(lo, b[i]);
    hi = std::max<double>(hi, b[i]);
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(a[i]) - b[i]));
    dot += static_cast<double>(a[i]) * b[i];
    na += static_cast<double>(a[i]) * a[i];
    nb += static_cast<double>(b[i]) * b[i];
  }
  const double range = hi > lo ? hi - lo : std::max(std::fabs(hi), 1.0);
  const double cosine = (na == 0 && nb == 0) ? 1.0 : dot / std::sqrt(std::max(na * nb, 1e-300));
  return {max_abs / range, cosine};
}

// Compiles `config` into `dir`, runs it `warmup` + `iterations` times on `feeds`; `meter`
// (may be null) samples the board during the timed GPU runs.
absl::StatusOr<Result> RunConfig(const std::string& onnx_path, const Config& config, const std::string& device,
                                 const TensorMap& feeds, int warmup, int iterations, const std::string& dir,
                                 const NvmlMeter* meter) {
  Result r;
  r.config = config.name;
  std::cerr << "kiln bench: compiling '" << config.name << "'...\n";
  const auto start = std::chrono::steady_clock::now();
  CompileOptions options = config.options;
  GemmTuneReport tuning;  // the tuning database's warnings (a file that does not load)
  options.tuning_report = &tuning;
  KILN_ASSIGN_OR_RETURN(BundleContents contents, Compile(onnx_path, options));
  for (const std::string& w : tuning.warnings) std::cerr << "kiln bench: warning: " << w << "\n";
  r.compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string path = (fs::path(dir) / (config.name + ".kiln")).string();
  KILN_RETURN_IF_ERROR(WriteBundle(std::move(contents), path));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Bundle> bundle, Bundle::Load(path));
  const bundle::Manifest& m = bundle->manifest();
  r.steps = m.steps_size();
  r.matmul_groups = m.compile_options().matmul_groups();
  for (const bundle::Step& step : m.steps()) {
    if (step.kernel() == "view") continue;
    r.launches += step.launches_size() > 0 ? LaunchesPerRun(step) : 1;
  }
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const CpuProgram> program, CpuProgram::Create(*bundle));
  r.weight_bytes = program->weight_bytes();
  std::cerr << "kiln bench: running '" << config.name << "' (" << warmup << " warm-up + " << iterations
            << " runs)...\n";
  if (device == "gpu") {
    KILN_ASSIGN_OR_RETURN(const int64_t before, DeviceMemoryInUse());
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<const GpuProgram> gpu_program, GpuProgram::Create(program));
    GpuExecutorOptions gpu_options;
    gpu_options.enable_programmatic_launch = config.programmatic_launch;
    gpu_options.size_only_steps_on_host = config.size_only_steps_on_host;
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<GpuExecutor> gpu, GpuExecutor::Create(gpu_program, gpu_options));
    KILN_ASSIGN_OR_RETURN(r.outputs, gpu->Run(feeds));  // captures the CUDA graph
    r.launches = gpu->launches_per_run();               // a dynamic bundle's at these sizes
    KILN_ASSIGN_OR_RETURN(const int64_t after, DeviceMemoryInUse());
    r.device_bytes = after - before;
    r.arena_bytes = gpu->arena_bytes();
    KILN_RETURN_IF_ERROR(gpu->TimeRuns(warmup).status());
    std::optional<PowerSampler> sampler;
    if (meter != nullptr) sampler.emplace(*meter);
    KILN_ASSIGN_OR_RETURN(r.times_ms, gpu->TimeRuns(iterations));
    if (sampler) {
      const PowerReading reading = sampler->Stop();
      if (reading.samples > 0) r.power = reading;
    }
  } else {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutor> cpu, CpuExecutor::Create(program));
    r.arena_bytes = cpu->arena_bytes();
    for (int i = 0; i < warmup + iterations; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      KILN_ASSIGN_OR_RETURN(r.outputs, cpu->Run(feeds));
      if (i >= warmup) {
        r.times_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    }
  }
  r.median_ms = Percentile(r.times_ms, 0.5);
  r.min_ms = Percentile(r.times_ms, 0.0);
  r.p90_ms = Percentile(r.times_ms, 0.9);
  return r;
}

std::string Mib(int64_t bytes) { return bytes < 0 ? "-" : absl::StrFormat("%.1f", bytes / 1048576.0); }

absl::Status WriteCsv(const std::string& file, const std::string& model, const std::string& device,
                      const std::vector<Result>& results, const Result& baseline) {
  std::ostringstream out;
  out << "model,device,config,matmul_groups,compile_s,steps,launches,median_ms,min_ms,p90_ms,speedup,"
         "device_bytes,arena_bytes,weight_bytes,max_rel_diff,min_cosine,sm_mhz,watts,mj_per_run\n";
  for (const Result& r : results) {
    out << absl::StrFormat("%s,%s,%s,%s,%.3f,%d,%d,%.4f,%.4f,%.4f,%.3f,%s,%d,%d,%.3g,%.6f,%s\n", model, device,
                           r.config, r.matmul_groups, r.compile_s, r.steps, r.launches, r.median_ms, r.min_ms, r.p90_ms,
                           baseline.median_ms / r.median_ms,
                           r.device_bytes < 0 ? "" : absl::StrCat(r.device_bytes), r.arena_bytes, r.weight_bytes,
                           r.max_rel_diff, r.min_cosine,
                           r.power ? absl::StrFormat("%.0f,%.1f,%.3f", r.power->mean_sm_mhz, r.power->mean_watts,
                                                     r.MjPerRun())
                                   : ",,");
  }
  KILN_RETURN_IF_ERROR(WriteFile(file, out.str(), "--csv"));
  std::cout << "csv -> " << file << "\n";
  return absl::OkStatus();
}

absl::Status Plot(const std::string& png, const std::string& model, const std::vector<Result>& results,
                  const std::string& dir) {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) {
    return absl::FailedPreconditionError(
        "--plot needs gnuplot, which is not installed (apt-get install gnuplot), or drop --plot and use --csv");
  }
  const std::string data = (fs::path(dir) / "plot.dat").string();
  const std::string script = (fs::path(dir) / "plot.gp").string();
  {
    std::ofstream d(data);
    for (const Result& r : results) d << absl::StrFormat("\"%s\" %.4f %.4f %.4f\n", r.config, r.median_ms, r.min_ms, r.p90_ms);
    std::ofstream s(script);
    s << "set terminal pngcairo size 800,480 noenhanced\n"
      << "set output '" << png << "'\n"
      << "set title 'kiln bench: " << fs::path(model).filename().string() << " (median ms, bars: min..p90)'\n"
      << "set ylabel 'ms per inference'\nset yrange [0:*]\nset style fill solid 0.6\nset boxwidth 0.6\n"
      << "unset key\nset grid ytics\n"
      << "plot '" << data << "' using 0:2:xtic(1) with boxes, '' using 0:2:3:4 with yerrorbars lc rgb 'black'\n";
  }
  const std::string cmd = absl::StrCat("gnuplot '", script, "' 2>&1");
  if (std::system(cmd.c_str()) != 0 || !fs::exists(png)) {
    return absl::InternalError(absl::StrCat("gnuplot failed to write ", png, " (script: ", script, ")"));
  }
  std::cout << "plot -> " << png << "\n";
  return absl::OkStatus();
}

}  // namespace

absl::Status BenchCommand(const std::vector<std::string>& argv) {
  KILN_ASSIGN_OR_RETURN(
      Args args, Args::Parse(argv,
                             {"compare", "device", "arch", "precision", "input-shape", "dim", "calibrate", "input",
                              "iterations", "warmup", "csv", "plot", "layout", "range", "tuning-db"},
                             {"help", "no-tuning-db"}));
  if (args.Has("help")) {
    std::cout << kUsage << "\n";
    return absl::OkStatus();
  }
  if (args.positional().size() != 1) return absl::InvalidArgumentError(absl::StrCat("expected one .onnx file\n", kUsage));
  const std::string path = args.positional()[0];
  KILN_ASSIGN_OR_RETURN(const int iterations, PositiveInt(args, "iterations", 50));
  KILN_ASSIGN_OR_RETURN(const int warmup, PositiveInt(args, "warmup", 10));
  std::string device = args.Get("device");
  if (!device.empty() && device != "gpu" && device != "cpu") {
    return absl::InvalidArgumentError(absl::StrCat("--device must be gpu or cpu, got '", device, "'"));
  }
  if (device.empty()) device = HasGpu() ? "gpu" : "cpu";
  if (device == "gpu") KILN_RETURN_IF_ERROR(LocalGpu().status());

  CompileOptions base;
  base.arch = args.Get("arch", DefaultArch());
  base.precision = args.Get("precision", "fp16");
  KILN_ASSIGN_OR_RETURN(base.layout, ParseLayout(args.Get("layout", "auto")));
  KILN_ASSIGN_OR_RETURN(base.input_shapes, ParseInputShapes(args.GetAll("input-shape")));
  KILN_ASSIGN_OR_RETURN(base.dims, ParseDims(args.GetAll("dim")));
  KILN_RETURN_IF_ERROR(ReadTuningDbFlags(args, base));
  if (!base.tuning_db_path.empty() && !fs::exists(base.tuning_db_path)) {
    std::cerr << "kiln bench: warning: --tuning-db " << base.tuning_db_path
              << " does not exist: every configuration takes the heuristic's GEMM configs\n";
  }
  KILN_RETURN_IF_ERROR(ValidateCompileOptions(base));
  std::map<std::string, std::string> calibration;
  for (const std::string& spec : args.GetAll("calibrate")) {
    KILN_ASSIGN_OR_RETURN(auto kv, SplitAssignment(spec, "calibrate"));
    calibration[kv.first] = kv.second;
  }
  if (!calibration.empty()) base.calibration = CalibrationInputs(calibration);
  // --range NAME=LO..HI: the dynamic configuration's ranges (ParseDims' range form).
  std::vector<DimSymbol> ranges;
  for (const std::string& spec : args.GetAll("range")) {
    absl::StatusOr<std::map<std::string, int64_t>> fixed = ParseDims({spec}, &ranges);
    if (!fixed.ok() || !fixed->empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--range ", spec, ": expected NAME=LO..HI with 1 <= LO <= HI"));
    }
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Config> configs, ParseConfigs(args.Get("compare", "fused,unfused"), base, ranges));

  // The inputs, from the imported graph's signature.
  ImportOptions import_options;
  import_options.input_shapes = base.input_shapes;
  import_options.dims = base.dims;
  auto graph = ImportOnnxFile(path, import_options);
  if (!graph.ok()) return absl::Status(graph.status().code(), absl::StrCat(path, ": ", graph.status().message()));
  std::map<std::string, std::string> sources;
  for (const std::string& spec : args.GetAll("input")) {
    KILN_ASSIGN_OR_RETURN(auto kv, SplitAssignment(spec, "input"));
    const Value* v = (*graph)->FindValue(kv.first);
    if (v == nullptr || !(*graph)->IsGraphInput(v)) {
      return absl::InvalidArgumentError(absl::StrCat("--input ", kv.first, ": the model has no such input"));
    }
    sources[kv.first] = kv.second;
  }
  TensorMap feeds;
  for (const Value* in : (*graph)->inputs()) {
    auto it = sources.find(in->name());
    KILN_ASSIGN_OR_RETURN(feeds[in->name()], MakeInput(in->name(), it == sources.end() ? "random:1" : it->second,
                                                      in->dtype(), in->shape()));
  }
  graph->reset();

  const fs::path dir = fs::temp_directory_path() / absl::StrCat("kiln-bench-", getpid());
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir.string(), ": ", ec.message()));
  std::unique_ptr<NvmlMeter> meter;
  if (device == "gpu") {
    absl::StatusOr<std::unique_ptr<NvmlMeter>> m = OpenCurrentDeviceMeter();
    if (m.ok()) {
      meter = *std::move(m);
    } else {
      std::cerr << "kiln bench: no power and clock columns: " << m.status().message() << "\n";
    }
  }
  std::vector<Result> results;
  absl::Status status;
  for (const Config& c : configs) {
    absl::StatusOr<Result> r = RunConfig(path, c, device, feeds, warmup, iterations, dir.string(), meter.get());
    if (!r.ok()) {
      status = absl::Status(r.status().code(), absl::StrCat("configuration '", c.name, "': ", r.status().message()));
      break;
    }
    results.push_back(*std::move(r));
  }
  if (status.ok()) {
    size_t b = 0;
    while (b < results.size() && results[b].config != "unfused") ++b;
    if (b == results.size()) b = 0;
    const Result baseline = results[b];
    for (Result& r : results) {
      for (size_t o = 0; o < r.outputs.size() && o < baseline.outputs.size(); ++o) {
        auto [rel, cosine] = Difference(r.outputs[o], baseline.outputs[o]);
        r.max_rel_diff = std::max(r.max_rel_diff, rel);
        r.min_cosine = std::min(r.min_cosine, cosine);
      }
    }
    std::cout << absl::StrFormat("%s on the %s (%s, %s, %d runs after %d warm-up)\n", path,
                                 device == "gpu" ? absl::StrCat("GPU ", LocalGpu()->name) : "CPU backend",
                                 base.arch, base.precision, iterations, warmup);
    const bool power = std::any_of(results.begin(), results.end(), [](const Result& r) { return r.power.has_value(); });
    std::cout << absl::StrFormat("  %-10s %9s %6s %8s %10s %10s %10s %8s %10s %10s %10s %9s", "config", "compile_s",
                                 "steps", "launches", "median_ms", "min_ms", "p90_ms", "speedup", "device_MiB",
                                 "arena_MiB", "max_diff", "cosine")
              << (power ? absl::StrFormat(" %7s %6s %8s", "SM_MHz", "W", "mJ/run") : "") << "\n";
    for (const Result& r : results) {
      std::cout << absl::StrFormat("  %-10s %9.2f %6d %8d %10.4f %10.4f %10.4f %7.2fx %10s %10s %10.2e %9.6f",
                                   r.config, r.compile_s, r.steps, r.launches, r.median_ms, r.min_ms, r.p90_ms,
                                   baseline.median_ms / r.median_ms, Mib(r.device_bytes), Mib(r.arena_bytes),
                                   r.max_rel_diff, r.min_cosine)
                << (!power    ? ""
                    : r.power ? absl::StrFormat(" %7.0f %6.1f %8.3f", r.power->mean_sm_mhz, r.power->mean_watts,
                                                r.MjPerRun())
                              : absl::StrFormat(" %7s %6s %8s", "-", "-", "-"))
                << "\n";
    }
    std::cout << absl::StrFormat("  (speedup: %s's median over each one's; max_diff: max |out - %s's out| over that "
                                 "output's range)\n", baseline.config, baseline.config);
    if (args.Has("csv")) status = WriteCsv(args.Get("csv"), path, device, results, baseline);
    if (status.ok() && args.Has("plot")) status = Plot(args.Get("plot"), path, results, dir.string());
  }
  fs::remove_all(dir, ec);
  return status;
}

}  // namespace kiln::cli
