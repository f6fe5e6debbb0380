// CompileOptions: validation and the codegen options they resolve to.
#include "compiler/compile_options.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/cuda_util.h"

namespace kiln {

absl::string_view LayoutName(Layout layout) {
  switch (layout) {
    case Layout::kAuto: return "auto";
    case Layout::kNchw: return "nchw";
    case Layout::kNhwc: return "nhwc";
  }
  return "?";
}

absl::StatusOr<Layout> ParseLayout(absl::string_view text) {
  for (Layout l : {Layout::kAuto, Layout::kNchw, Layout::kNhwc}) {
    if (LayoutName(l) == text) return l;
  }
  return absl::InvalidArgumentError(absl::StrCat("unsupported --layout '", text, "': choose auto, nchw or nhwc"));
}

codegen::KernelOptions KernelOptionsFor(const CompileOptions& options) {
  codegen::KernelOptions k;
  k.matmul_groups = options.matmul_groups;
  k.conv_groups = options.conv_groups;
  // sm_90a: the Hopper GEMM family (TMA + wgmma) for the MatMul groups it takes.
  // Its persistent grid is sized for the local GPU's multiprocessors when that GPU is
  // of the target arch (an H100 PCIe has 114, where 132 CTAs would leave 18 for a
  // second wave), else for an H100 SXM's 132 (sm_count 0).
  k.hopper = codegen::IsHopperArch(options.arch);
  k.arch = options.arch;
  if (k.hopper) {
    absl::StatusOr<GpuInfo> gpu = LocalGpu();
    if (gpu.ok() && gpu->arch == options.arch) k.sm_count = gpu->sm_count;
  }
  return k;
}

const std::vector<std::string>& SupportedArchs() {
  static const auto* archs = new std::vector<std::string>{"sm_90a", "sm_89", "sm_86", "sm_80"};
  return *archs;
}

const std::vector<std::string>& SupportedPrecisions() {
  static const auto* precisions = new std::vector<std::string>{"fp16", "bf16", "fp32", "tf32"};
  return *precisions;
}

std::string DefaultArch() {
  absl::StatusOr<GpuInfo> gpu = LocalGpu();
  if (gpu.ok() && !gpu->arch.empty()) return gpu->arch;
  return "sm_90a";
}

absl::Status ValidateCompileOptions(const CompileOptions& options) {
  const auto& archs = SupportedArchs();
  if (std::find(archs.begin(), archs.end(), options.arch) == archs.end()) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported --arch '", options.arch,
                                                   "': kiln compiles for ", absl::StrJoin(archs, ", ")));
  }
  if (options.tune && !options.tuning_db) {
    return absl::InvalidArgumentError("--tune stores its results in the tuning database: drop --no-tuning-db");
  }
  if (options.tune && !(options.tune_budget_seconds > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tune-budget must be a positive number of seconds, got ", options.tune_budget_seconds));
  }
  const auto& precisions = SupportedPrecisions();
  if (std::find(precisions.begin(), precisions.end(), options.precision) == precisions.end()) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported --precision '", options.precision,
                                                   "': choose one of ", absl::StrJoin(precisions, ", ")));
  }
  return absl::OkStatus();
}

}  // namespace kiln
