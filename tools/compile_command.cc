// `kiln compile model.onnx -o model.kiln`: compiles an ONNX model into a bundle.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "codegen/compile_progress.h"
#include "common/status_macros.h"
#include "runtime/bundle.h"
#include "compiler/pipeline.h"
#include "graph/text_format.h"
#include "compiler/compiler.h"
#include "compiler/gemm_tuner.h"
#include "compiler/kernel_dump.h"
#include "tools/args.h"
#include "tools/compile_flags.h"
#include "tools/commands.h"

namespace kiln::cli {
namespace {

constexpr char kUsage[] =
    "usage: kiln compile MODEL.onnx -o|--output MODEL.kiln [--arch sm_90a|sm_89|sm_86|sm_80]\n"
    "                    [--precision fp16|bf16|fp32|tf32] [--dim NAME=N|NAME=LO..HI[:OPT]]... [--input-shape "
    "NAME=1x128]...\n"
    "                    [--calibrate NAME=SOURCE]... [--no-fuse] [--report]\n"
    "                    [--dump-after PASS|all|help] [--time-passes]\n"
    "                    [--matmul-groups auto|library|generated]\n"
    "                    [--conv-groups auto|cudnn|expand|generated] [--layout auto|nchw|nhwc]\n"
    "                    [--no-kernel-cache] [--dump-kernels DIR]\n"
    "                    [--tune [--tune-budget SECONDS]] [--tuning-db FILE] [--no-tuning-db]\n"
    "Compiles the model into a bundle (manifest, kernels, weights) for the named GPU arch.\n"
    "Works without a GPU (kernels are compiled by NVRTC). The default arch is the local\n"
    "GPU's, else sm_90a; the default precision is fp16 (storage of activations and weights;\n"
    "math in fp32; inputs and outputs keep their ONNX dtypes); tf32 stores fp32 and runs\n"
    "MatMul, Gemm and Conv on TF32 tensor cores (fp32 accumulation). The graph is canonicalised\n"
    "and fused (docs/fusion.md); each step then runs a generated kernel (fused groups,\n"
    "other ops), cuBLASLt (MatMul/Gemm and their fused epilogues) or cuDNN (Conv).\n"
    "--dim NAME=N: every input dim named NAME (ONNX dim_param: batch, seq, ...) becomes N;\n"
    "--input-shape NAME=DxD fixes one input's whole shape. A dim left dynamic is an error\n"
    "that names all of them. --dim NAME=LO..HI compiles one bundle for every size in the\n"
    "range (passes that would fix a size are skipped; it runs at the sizes kiln run\n"
    "--dim NAME=N picks, on the GPU where every step has a kernel with run-time sizes, else\n"
    "on the CPU backend; docs/dynamic_shapes.md); NAME=LO..HI:OPT names the size to tune\n"
    "for (--tune measures the GEMMs with run-time rows at the OPT sizes, the largest where\n"
    "none is given, and those rows take the tuned tile); --input-shape\n"
    "NAME=1..32x1..512:128 gives ranges per input (a ranged dim is the one the model names\n"
    "there, or NAME_D).\n"
    "--calibrate (fp16): runs the model once on the CPU reference with these inputs (SOURCE\n"
    "as in kiln run: FILE.npy|.pb, arange, zeros, ones, random[:SEED]) and keeps in fp32\n"
    "every node that reads or writes a value beyond +-16384 there, so that activations\n"
    "too large for fp16 do not overflow.\n"
    "--no-fuse: canonicalisation only, one op per kernel (the unfused baseline).\n"
    "--report: the fusion report (groups with their ONNX nodes, rejected candidates and why).\n"
    "--dump-after PASS: the graph in kiln's text form after PASS (its last run), or after\n"
    "every pass with 'all'; the passes in order, with why: kiln compile --dump-after help.\n"
    "--time-passes: a table on stderr of every pass (runs, whether it changed the graph,\n"
    "milliseconds, nodes after it) and of tuning, memory planning and kernel assignment.\n"
    "--matmul-groups: fused MatMul groups run kiln's generated tensor-core GEMM with their\n"
    "prologues and epilogue (generated), or cuBLASLt with the bias/activation epilogue it\n"
    "has, the rest of the group fused again as pointwise work (library); auto (default):\n"
    "generated for sm_80/86/89; for sm_90a the Hopper GEMM family for the groups it takes\n"
    "(fp16/bf16, 16-byte aligned rows) and library for the others (sm90+library), and\n"
    "for groups --tune measured faster on cuBLASLt or, untuned, with at most 32 output\n"
    "columns over 65536 rows or more.\n"
    "--conv-groups: auto (default): depthwise convs run kiln's generated kernel with their\n"
    "epilogue, the other conv+epilogue groups one cuDNN fused conv-bias-activation call\n"
    "(the fastest mix measured on the H100 in NHWC); cudnn: every group as that call;\n"
    "expand: cuDNN's convolution plus one generated pointwise kernel for the epilogue;\n"
    "generated: NHWC convs and their groups run kiln's kernels with the epilogue fused\n"
    "(implicit GEMM on the tensor-core template, a direct kernel for depthwise convs).\n"
    "NCHW and other grouped convs stay on cuDNN (--report says why).\n"
    "--layout: activation layout of 2-D convs and pools: nhwc (channels-last inside the\n"
    "model, one transpose where an NCHW value enters or leaves it; cuDNN's fast path),\n"
    "nchw (ONNX's layout throughout), or auto (default): nhwc when the model has a 2-D conv.\n"
    "Inputs and outputs keep their ONNX shapes either way.\n"
    "--no-kernel-cache: compile every kernel module with NVRTC. By default compiled modules\n"
    "are cached on disk, keyed by source, arch, NVRTC version and options, in $KILN_CACHE_DIR,\n"
    "else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.\n"
    "--dump-kernels DIR: per step that runs generated code, its .cu source, PTX, SASS (when\n"
    "cuobjdump is found), launch configuration, registers/shared memory/spills and subgraph\n"
    "with its ONNX node names; DIR/index.md lists every step and file. DIR must be new, empty\n"
    "or an earlier dump.\n"
    "--tune: measure candidate tile configs of every distinct generated GEMM (MatMul groups\n"
    "with --matmul-groups generated or auto) on the local GPU, which must be of --arch,\n"
    "within --tune-budget seconds (default 60; '90s' works too), print heuristic vs best,\n"
    "and store the winners in the tuning database; with auto on sm_90a also time cuBLASLt on\n"
    "the groups it can run in one call, which later auto compiles give to cuBLASLt where it\n"
    "measured at least 1% faster. Every compile, with or without a GPU, takes the\n"
    "database's config for a GEMM it holds, else the shape heuristic's; the\n"
    "database is $KILN_TUNING_DB, else tuning.tsv beside the kernel cache (--tuning-db FILE\n"
    "names another; --no-tuning-db: the heuristic only).";

// What the bundle holds, after `kiln compile`: fusion, kernels, fp16 islands, GEMM
// configs, and a warning when a step has no GPU kernel.
void PrintSummary(const bundle::Manifest& m, const CompileOptions& options, const GemmTuneReport& tuning,
                  bool report) {
  const bundle::FusionReport& fr = m.fusion();
  int groups_expanded = 0;
  for (const auto& g : fr.groups()) groups_expanded += g.note().empty() ? 0 : 1;
  std::cout << absl::StrFormat(
      "  fusion: %s; kernels per inference: %d unfused, %d fused, %d in the bundle (%d "
      "groups formed, %d expanded for want of a fused GPU kernel, %d candidates rejected; "
      "matmul groups: %s)\n",
      !fr.enabled()              ? "off (--no-fuse)"
      : m.dim_symbols_size() > 0 ? "on (dim ranges: the groups with kernels that take run-time sizes)"
                                 : "on",
      fr.nodes_before(), fr.nodes_fused(), fr.nodes_after(), fr.groups_size(), groups_expanded, fr.rejections_size(),
      m.compile_options().matmul_groups());
  if (report) std::cout << FusionReportText(fr);
  if (!options.dump_kernels_dir.empty()) {
    const std::string cuobjdump = FindCuobjdump();
    std::cout << "  kernel dump: " << (std::filesystem::path(options.dump_kernels_dir) / "index.md").string()
              << (cuobjdump.empty() ? " (no SASS: cuobjdump not found in PATH or /usr/local/cuda/bin)" : "") << "\n";
  }
  if (m.compile_options().float32_nodes_size() > 0) {
    std::cout << absl::StrFormat("  fp16: %d node%s kept in fp32 (values beyond +-16384 on the calibration inputs)\n",
                                 m.compile_options().float32_nodes_size(),
                                 m.compile_options().float32_nodes_size() == 1 ? "" : "s");
  } else if (options.calibration) {
    std::cout << "  fp16: every value stays within +-16384 on the calibration inputs\n";
  }
  // What the GPU will run, and which ops (if any) keep the bundle on the CPU backend.
  int generated = 0, library = 0, views = 0, empty = 0, launches = 0;
  std::map<std::string, int> unsupported;
  for (const bundle::Step& step : m.steps()) {
    launches += LaunchesPerRun(step);
    if (absl::StartsWith(step.kernel(), "nvrtc:")) ++generated;
    if (absl::StartsWith(step.kernel(), "cublaslt:") || absl::StartsWith(step.kernel(), "cudnn:")) ++library;
    if (step.kernel() == "view") ++views;
    if (step.kernel() == "empty") ++empty;
    if (absl::StartsWith(step.kernel(), "cpu_ref:")) ++unsupported[step.op_type()];
  }
  std::cout << absl::StrFormat(
      "  GPU kernels: %d steps generated (%d launches, %d kernel module%s), %d library "
      "(cuBLASLt/cuDNN), %d views%s\n",
      generated, launches, m.kernels_size(), m.kernels_size() == 1 ? "" : "s", library, views,
      empty > 0 ? absl::StrCat(", ", empty, " with no elements to compute") : "");
  int gemms = 0, tuned = 0;
  for (const bundle::Step& step : m.steps()) {
    for (const bundle::Launch& l : step.launches()) {
      if (l.config().empty()) continue;
      ++gemms;
      if (absl::StrContains(l.config(), "(tuning database")) ++tuned;
    }
  }
  if (gemms > 0) {
    std::cout << absl::StrFormat("  GEMM tile configs: %d of %d from the tuning database%s, the rest from the "
                                 "heuristic\n",
                                 tuned, gemms, tuning.db_path.empty() ? " (none used)" : " " + tuning.db_path);
  }
  if (const int to_library = GroupsTunedToLibrary(m); to_library > 0) {
    std::cout << absl::StrFormat("  %d MatMul group%s on cuBLASLt, which --tune measured faster than kiln's kernel "
                                 "(kiln compile --report says which)\n",
                                 to_library, to_library == 1 ? "" : "s");
  }
  if (m.dim_symbols_size() > 0) {
    std::vector<std::string> inputs;
    for (const bundle::TensorSignature& in : m.inputs()) {
      inputs.push_back(absl::StrCat(in.name(), " ", in.dtype(), "[", absl::StrJoin(in.dims(), ", "), "]"));
    }
    std::cout << "  dynamic: " << DimRangesText(m) << " (inputs " << absl::StrJoin(inputs, ", ")
              << "); passes that would fix a size were skipped (kiln compile --dump-after help lists them); "
                 "it runs at any sizes in the ranges (kiln run --dim NAME=N)\n";
  }
  if (!unsupported.empty()) {
    std::vector<std::string> parts;
    for (const auto& [op, n] : unsupported) parts.push_back(absl::StrCat(op, " x", n));
    std::cout << "  warning: no GPU kernel for " << absl::StrJoin(parts, ", ")
              << ": this bundle runs on the CPU backend only (kiln inspect shows why)\n";
  }
}

}  // namespace

absl::Status CompileCommand(const std::vector<std::string>& argv) {
  // "-o FILE" is the short form of "--output FILE" (Args knows only long flags).
  std::vector<std::string> expanded;
  for (const std::string& a : argv) {
    if (a == "-o") {
      expanded.push_back("--output");
    } else if (absl::StartsWith(a, "-o") && !absl::StartsWith(a, "--")) {
      expanded.push_back(absl::StrCat("--output=", a.substr(2)));
    } else {
      expanded.push_back(a);
    }
  }
  std::set<std::string> value_flags = CompileValueFlags();
  value_flags.insert({"output", "dump-after"});
  std::set<std::string> bool_flags = CompileBoolFlags();
  bool_flags.insert({"help", "report", "time-passes"});
  KILN_ASSIGN_OR_RETURN(Args args, Args::Parse(expanded, value_flags, bool_flags));
  if (args.Has("help")) {
    std::cout << kUsage << "\n";
    return absl::OkStatus();
  }
  if (args.Get("dump-after") == "help") {
    std::cout << PipelineHelp();
    return absl::OkStatus();
  }
  if (args.positional().size() != 1) return absl::InvalidArgumentError(absl::StrCat("expected one .onnx file\n", kUsage));
  const std::string input = args.positional()[0];
  const std::string output = args.Get("output");
  if (output.empty()) return absl::InvalidArgumentError(absl::StrCat("missing -o MODEL.kiln\n", kUsage));
  std::vector<std::string> notes;
  KILN_ASSIGN_OR_RETURN(CompileOptions options, CompileOptionsFromArgs(args, &notes));
  for (const std::string& note : notes) std::cout << "note: " << note << "\n";
  GemmTuneReport tuning;
  options.tuning_report = &tuning;
  std::vector<PassTiming> timings;
  if (args.Has("time-passes")) options.pass_timings = &timings;
  // A progress bar on a terminal; one summary line on stderr otherwise.
  std::unique_ptr<codegen::TerminalProgress> progress = codegen::TerminalProgress::ForStderr();
  options.progress = progress.get();
  const std::string dump_after = args.Get("dump-after");
  std::map<std::string, std::string> dumps;  // pass -> the graph after its last run
  if (!dump_after.empty()) {
    if (dump_after != "all") KILN_RETURN_IF_ERROR(CheckPassName(dump_after));
    options.after_pass = [&dumps, dump_after](const std::string& pass, const Graph& graph) {
      if (dump_after == "all" || dump_after == pass) dumps[pass] = PrintGraph(graph);
    };
  }
  const auto start = std::chrono::steady_clock::now();
  KILN_RETURN_IF_ERROR(CompileToFile(input, output, options));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const std::string& w : tuning.warnings) std::cerr << "kiln: warning: " << w << "\n";
  if (args.Has("time-passes")) std::cerr << PassTimingTable(timings);
  std::cout << GemmTuneTable(tuning);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Bundle> bundle, Bundle::Load(output));
  const bundle::Manifest& m = bundle->manifest();
  std::cout << absl::StrFormat("%s -> %s: %s, %s, %d steps, %d weights, arena %d bytes (lower bound %d), %d bytes, %.2fs\n",
                               input, output, m.target_arch(), m.precision(), m.steps_size(), m.weights_size(),
                               m.memory_plan().arena_bytes(), m.memory_plan().lower_bound_bytes(),
                               bundle->file_bytes(), seconds);
  for (const Pass& p : Pipeline()) {
    if (auto it = dumps.find(p.name); it != dumps.end()) std::cout << "// after " << p.name << "\n" << it->second;
  }
  if (!dump_after.empty() && dumps.empty()) std::cout << "// " << dump_after << " did not run\n";
  PrintSummary(m, options, tuning, args.Has("report"));
  return absl::OkStatus();
}

}  // namespace kiln::cli
