// Kernel assignment: views, library calls, generated kernels (compiled by NVRTC).
#include "compiler/assign_kernels.h"

#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "codegen/kernel_choice.h"
#include "codegen/nvrtc_module.h"
#include "codegen/op_kernels.h"
#include "codegen/ops/gemm_sm90.h"
#include "compiler/kernel_dump.h"
#include "compiler/memory_planner.h"
#include "common/status_macros.h"
#include "runtime/bundle.h"

namespace kiln {
namespace {

bool IsViewOp(const std::string& op) {
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity";
}

// Every output of the node has a static shape of zero elements (e.g. a batch of 0):
// the step computes nothing, whatever its op.
bool WritesNothing(const Node& node) {
  int typed = 0;
  for (const Value* v : node.outputs()) {
    if (v == nullptr) continue;
    if (!v->has_type() || v->is_dynamic() || v->numel() != 0) return false;
    ++typed;
  }
  return typed > 0;
}

// The step's outputs are bytes of its data input (the planner aliased them): a view
// op's output at the input's offset, or each piece of a Split that the planner may
// alias (SplitViewOffsets: contiguous, 256-byte aligned pieces) at the input's offset
// plus the piece's. Nothing runs for such a step.
bool IsAliasedView(const bundle::Step& step, const Node& node) {
  if (step.inputs_size() < 1 || step.outputs_size() < 1) return false;
  const bundle::Binding& in = step.inputs(0);
  if (in.kind() != bundle::Binding::ARENA) return false;
  if (IsViewOp(step.op_type())) {
    const bundle::Binding& out = step.outputs(0);
    return step.outputs_size() == 1 && out.kind() == bundle::Binding::ARENA && in.offset() == out.offset();
  }
  if (step.op_type() != "Split") return false;
  const std::optional<std::vector<int64_t>> pieces = SplitViewOffsets(node);
  if (!pieces || static_cast<int>(pieces->size()) != step.outputs_size()) return false;
  for (int o = 0; o < step.outputs_size(); ++o) {
    const bundle::Binding& out = step.outputs(o);
    if (out.kind() != bundle::Binding::ARENA || out.offset() != in.offset() + (*pieces)[o]) return false;
  }
  return true;
}

// A launch with run-time sizes (codegen/kernel_launch.h): the flag and each axis's
// extent over the bundle's dim symbols.
absl::Status SetRunTimeSizes(const codegen::KernelLaunch& kl, const std::vector<DimSymbol>& symbols,
                             const Node& node, bundle::Launch* launch) {
  if (!kl.dim_param) return absl::OkStatus();
  if (static_cast<int>(symbols.size()) > codegen::kMaxKernelDims) {
    return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "': the GPU kernels take at most ",
                                                   codegen::kMaxKernelDims, " dim ranges, the model has ",
                                                   symbols.size(), "; fix some with --dim NAME=N"));
  }
  launch->set_dim_param(true);
  for (int a = 0; a < 3; ++a) {
    const bool varies = kl.grid_per_block[a] > 0;
    launch->add_grid_extents(varies ? kl.grid_extents[a].ToString(symbols) : "");
    launch->add_grid_per_block(varies ? static_cast<uint64_t>(kl.grid_per_block[a]) : 0);
  }
  for (const std::vector<std::array<int64_t, 2>>& box : kl.size_boxes) {
    if (box.size() != symbols.size()) {
      return absl::InternalError(absl::StrCat("node '", node.name(), "': a size variant's box has ", box.size(),
                                              " ranges for ", symbols.size(), " dim symbols"));
    }
    for (const auto& [lo, hi] : box) {
      launch->add_size_boxes(lo);
      launch->add_size_boxes(hi);
    }
  }
  if (!kl.size_ranges.empty()) launch->set_size_select(kl.size_select.ToString(symbols));
  for (const auto& [lo, hi] : kl.size_ranges) {
    launch->add_size_ranges(lo);
    launch->add_size_ranges(hi);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<KernelAssignmentStats> AssignKernels(const std::vector<Node*>& nodes,
                                                    const std::vector<codegen::KernelChoice>& choices,
                                                    const std::string& arch,
                                                    const codegen::KernelOptions& kernel_options,
                                                    BundleContents* contents,
                                                    const KernelCompileOptions& compile_options) {
  bundle::Manifest& m = contents->manifest;
  if (static_cast<int>(nodes.size()) != m.steps_size() || choices.size() != nodes.size()) {
    return absl::InternalError("AssignKernels: one node and one kernel choice per step expected");
  }
  KernelAssignmentStats stats;
  const std::vector<DimSymbol> symbols = DimSymbolsOf(m);
  std::vector<codegen::ModuleKernel> unique;           // in first-use order
  absl::flat_hash_map<std::string, int> unique_index;  // source -> index into unique
  std::vector<std::pair<bundle::Launch*, int>> pending;  // launch, unique index

  for (int s = 0; s < m.steps_size(); ++s) {
    bundle::Step* step = m.mutable_steps(s);
    const Node& node = *nodes[s];
    step->clear_launches();
    step->clear_gpu_unsupported();
    step->clear_choice();
    if (IsAliasedView(*step, node)) {
      step->set_kernel("view");
      ++stats.view_steps;
      continue;
    }
    if (WritesNothing(node)) {  // a library call or generator would be given no work
      step->set_kernel("empty");
      ++stats.view_steps;
      continue;
    }
    const codegen::KernelChoice& choice = choices[s];
    step->set_choice(choice.Describe());
    if (choice.kind == codegen::KernelKind::kLibrary) {
      step->set_kernel(choice.library);
      ++stats.library_steps;
      continue;
    }
    absl::StatusOr<std::vector<codegen::KernelLaunch>> launches;
    const bool gemm = choice.kind == codegen::KernelKind::kGemm;
    if (gemm) {
      // The family and tile config the selector chose (the sm90 family on sm_90a where
      // it takes the group, else the sm_80 template; the tuning database's or the
      // heuristic's config).
      launches = choice.gemm.ok() ? codegen::GenerateChosenGemm(node, *choice.gemm, kernel_options.sm_count)
                                  : absl::StatusOr<std::vector<codegen::KernelLaunch>>(choice.gemm.status());
    } else {
      launches = codegen::GenerateNodeKernels(node, kernel_options);
    }
    if (!launches.ok()) {
      if (launches.status().code() != absl::StatusCode::kUnimplemented) {
        return absl::Status(launches.status().code(),
                            absl::StrCat("generating the GPU kernel of node '", node.name(), "' (", node.op_type(),
                                         "): ", launches.status().message()));
      }
      step->set_kernel(absl::StrCat("cpu_ref:", node.op_type()));
      step->set_gpu_unsupported(std::string(launches.status().message()));
      ++stats.unsupported_steps;
      continue;
    }
    if (launches->empty()) {  // outputs of zero elements: nothing to run
      step->set_kernel("empty");
      ++stats.view_steps;
      continue;
    }
    ++stats.generated_steps;
    if (gemm) {
      ++stats.gemm_steps;
      if (choice.gemm->from_db) ++stats.gemm_tuned_steps;
    }
    for (size_t j = 0; j < launches->size(); ++j) {
      codegen::KernelLaunch& kl = (*launches)[j];
      auto [it, inserted] = unique_index.try_emplace(kl.source, static_cast<int>(unique.size()));
      if (inserted) {
        unique.push_back({absl::StrCat("k", unique.size(), "_", node.op_type()), std::move(kl.source)});
      }
      bundle::Launch* launch = step->add_launches();
      launch->set_function(unique[it->second].function);
      for (uint32_t g : kl.grid) launch->add_grid(g);
      for (uint32_t b : kl.block) launch->add_block(b);
      launch->set_shared_bytes(kl.shared_bytes);
      for (int a : kl.args) launch->add_args(a);
      launch->set_config(kl.config);
      launch->set_grid_dependency_wait(codegen::KernelBodyStart(unique[it->second].source) != std::string::npos);
      KILN_RETURN_IF_ERROR(SetRunTimeSizes(kl, symbols, node, launch));
      SetLaunchTensorMaps(kl, launch);
      pending.emplace_back(launch, it->second);
    }
    step->set_kernel(absl::StrCat("nvrtc:", step->launches(0).function()));
  }
  stats.unique_kernels = static_cast<int>(unique.size());
  // Kernel u lands in module u / kKernelsPerModule (codegen::CompileModules).
  const int first_module = static_cast<int>(contents->kernels.size());
  for (auto& [launch, u] : pending) launch->set_module(first_module + u / kKernelsPerModule);
  if (!compile_options.dump_dir.empty()) {
    absl::StatusOr<KernelDumpStats> dumped = WriteKernelDump(compile_options.dump_dir, nodes, choices, m, unique, arch);
    if (!dumped.ok()) return dumped.status();
  }
  if (unique.empty()) return stats;

  codegen::CompileModulesOptions module_options;
  module_options.max_per_module = kKernelsPerModule;
  module_options.cache = compile_options.cache;
  module_options.progress = compile_options.progress;
  absl::StatusOr<std::vector<std::string>> cubins =
      codegen::CompileModules(unique, arch, module_options, &stats.modules);
  if (!cubins.ok()) return cubins.status();
  stats.nvrtc_seconds = stats.modules.seconds;
  for (size_t c = 0; c < cubins->size(); ++c) {
    contents->kernels.push_back(KernelImage{absl::StrCat("module", c), arch, std::move((*cubins)[c])});
  }
  return stats;
}

}  // namespace kiln
