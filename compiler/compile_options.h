// The options of `kiln compile` (CompileOptions), their validation, and the codegen
// options they resolve to.
#pragma once

#include <functional>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/compile_progress.h"
#include "codegen/op_kernels.h"
#include "compiler/gemm_tuner.h"
#include "graph/evaluate.h"
#include "graph/graph.h"

namespace kiln {

struct PassTiming;  // compiler/pipeline.h

// Activation layout of 2-D convs and pools (graph/to_channels_last.h).
enum class Layout {
  kAuto,  // nhwc when the graph has a 2-D Conv, else nchw
  kNchw,  // ONNX's layout throughout
  kNhwc,  // channels-last inside the model, transposes only at its boundary
};
// "auto", "nchw", "nhwc" (--layout) and back; the parser's error names the values.
absl::string_view LayoutName(Layout layout);
absl::StatusOr<Layout> ParseLayout(absl::string_view text);

// The target archs `--arch` accepts, and the precisions `--precision` accepts: fp16,
// bf16, fp32 storage, and tf32 (fp32 storage, TF32 tensor-core math in the matrix
// products: graph/tf32_math.h).
const std::vector<std::string>& SupportedArchs();
const std::vector<std::string>& SupportedPrecisions();
// The arch compiled for when none is named: the local GPU's when kiln can target it
// (compute capability 9.0 -> sm_90a, 8.9, 8.6, 8.0), else sm_90a.
std::string DefaultArch();

// fp16 storage keeps a node in f32 when it reads or writes a value larger than this
// on the calibration inputs (a quarter of fp16's largest finite value, 65504: room
// for inputs that differ from the calibration ones).
inline constexpr float kFloat16SafeMagnitude = 16384.f;

struct CompileOptions {
  std::string arch = "sm_90a";
  std::string precision = "fp16";
  // Static shapes for inputs with dynamic dims (see ImportOptions::input_shapes), and
  // values of named dynamic dims (ImportOptions::dims: `--dim batch=8`).
  std::map<std::string, Shape> input_shapes;
  std::map<std::string, int64_t> dims;
  // Named dims compiled for a range (ImportOptions::dim_ranges: `--dim seq=1..512`).
  // The bundle is dynamic: the passes that fix sizes are skipped, and it runs at any
  // sizes inside the ranges (docs/dynamic_shapes.md).
  std::vector<DimSymbol> dim_ranges;
  // Inputs given shapes with ranges (ImportOptions::input_shape_ranges:
  // `--input-shape input_ids=1..32x1..512`).
  std::map<std::string, std::vector<SizeRange>> input_shape_ranges;
  // fp16 only, optional: builds calibration inputs for the imported graph (every
  // graph input, exact dtype and shape). The graph runs once on the CPU reference
  // with them, and every node that reads or writes a value beyond
  // kFloat16SafeMagnitude stays in f32 (LowerPrecision's f32 islands; the manifest
  // lists them in compile_options.float32_nodes).
  std::function<absl::StatusOr<TensorMap>(const Graph&)> calibration;
  // Fusion (compiler/pipeline.h); false (--no-fuse): canonicalisation only, one op per
  // kernel (the unfused baseline).
  bool fuse = true;
  // Which kernels run fused MatMul groups, and convs and their groups
  // (codegen::MatMulGroups, codegen::ConvGroups: --matmul-groups, --conv-groups).
  codegen::MatMulGroups matmul_groups = codegen::MatMulGroups::kAuto;
  codegen::ConvGroups conv_groups = codegen::ConvGroups::kAuto;
  // Activation layout of 2-D convs and pools (--layout).
  Layout layout = Layout::kAuto;
  // Called after every pass of the pipeline (compiler/pipeline.h) with the graph:
  // --dump-after.
  std::function<void(const std::string& pass, const Graph& graph)> after_pass;
  // Verifies the graph (structure and types) after every pass; the error names the
  // pass that broke it. Tests turn it on.
  bool verify_passes = false;
  // --time-passes: receives each pass's runs, wall time and node count, and the
  // later stages' times (tuning, memory plan, kernels); not owned; nullptr: none.
  std::vector<PassTiming>* pass_timings = nullptr;
  // The on-disk cache of compiled kernel modules (codegen/kernel_cache.h); false:
  // compile every module (--no-kernel-cache).
  bool kernel_cache = true;
  // Its directory; "": codegen::DefaultKernelCacheDir() ($KILN_CACHE_DIR, else
  // $XDG_CACHE_HOME/kiln, else ~/.cache/kiln; no cache when none is set).
  std::string kernel_cache_dir;
  // Receives the progress of the NVRTC compile and its warnings (a cache directory
  // that cannot be written); not owned; nullptr: silent. The kiln tool passes a
  // codegen::TerminalProgress on stderr.
  codegen::CompileProgress* progress = nullptr;
  // --dump-kernels DIR: what each step runs, written to DIR (compiler/kernel_dump.h);
  // "": no dump.
  std::string dump_kernels_dir;
  // GEMM tile configs: every compile looks each generated GEMM's problem up in the
  // tuning database (codegen/tuning_db.h; no GPU needed) and falls back to the shape
  // heuristic; false (--no-tuning-db): the heuristic only.
  bool tuning_db = true;
  // The database file; "": codegen::DefaultTuningDbPath(kernel_cache_dir)
  // ($KILN_TUNING_DB, else tuning.tsv in the kernel cache's directory).
  std::string tuning_db_path;
  // --tune: before kernel assignment, measure the candidate configs of every distinct
  // GEMM problem on the local GPU, which must be of `arch`, within
  // tune_budget_seconds, and store the winners in the database (compiler/gemm_tuner.h).
  // FailedPrecondition without a GPU.
  bool tune = false;
  double tune_budget_seconds = 60;
  // Receives the tuning table, the database used and its warnings (lines skipped);
  // not owned; nullptr: none.
  GemmTuneReport* tuning_report = nullptr;
};

// InvalidArgument naming the bad value and the accepted ones.
absl::Status ValidateCompileOptions(const CompileOptions& options);

// The codegen options `options` resolve to (matmul_groups for its arch).
codegen::KernelOptions KernelOptionsFor(const CompileOptions& options);

}  // namespace kiln
