// Kernel assignment, the last stage of `kiln compile`: for each step of the unfused
// baseline, decide what the GPU runs and compile the generated kernels.
//
// Per step, in this order:
//   "view"            a Reshape/Flatten/Squeeze/Unsqueeze/Identity whose output the
//                     memory planner placed on its input's bytes, or a Split whose
//                     pieces it placed inside its input (SplitViewOffsets): nothing
//                     to run;
//   "cublaslt:<Op>"   MatMul/Gemm, "cudnn:Conv" and the fused groups the libraries
//                     can run in one call (codegen/library_kernels.h), where
//                     codegen::ChooseKernel gives them the library (the step's
//                     KernelChoice, decided once by the driver);
//   "nvrtc:<fn>"      generated kernels (codegen/op_kernels.h), recorded as launches;
//                     a MatMul group's GEMM takes its tile config from the tuning
//                     database when it has one (KernelOptions::tuning_db,
//                     codegen/tuning_db.h), and the launch records which
//                     (bundle::Launch.config);
//   "cpu_ref:<Op>"    no GPU kernel: Step.gpu_unsupported says why; the bundle still
//                     runs on the CPU backend and a GPU session refuses it by name.
// Identical kernel sources are compiled once and shared by their steps. Kernels are
// compiled by NVRTC in parallel, in modules of at most kKernelsPerModule, each a
// KernelImage of the bundle; modules found in the kernel cache are not recompiled
// (KernelCompileOptions). With a dump directory the steps are dumped
// (compiler/kernel_dump.h) before the modules are compiled, so that a kernel NVRTC
// rejects can be read there.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "codegen/compile_progress.h"
#include "codegen/kernel_cache.h"
#include "codegen/kernel_choice.h"
#include "codegen/op_kernels.h"
#include "codegen/tuning_db.h"
#include "graph/graph.h"
#include "runtime/bundle.h"

namespace kiln {

// One module per distinct kernel: NVRTC compiles the modules in parallel (TBB), so
// a model's first compile is bounded by its slowest kernel rather than by a module of
// many (docs/gpu.md, "NVRTC").
inline constexpr int kKernelsPerModule = 1;

struct KernelAssignmentStats {
  int generated_steps = 0;   // steps running generated kernels
  int library_steps = 0;     // cuBLASLt / cuDNN
  int view_steps = 0;        // nothing to run
  int unsupported_steps = 0; // no GPU kernel
  int unique_kernels = 0;    // distinct generated kernels compiled
  int gemm_steps = 0;        // MatMul groups on the generated GEMM
  int gemm_tuned_steps = 0;  // ... whose config came from the tuning database
  double nvrtc_seconds = 0;  // wall time of the NVRTC compiles (cache lookups included)
  codegen::ModuleCompileStats modules;  // compiled vs cached modules, warnings
};

// How the generated kernels are compiled (beyond what they are: KernelOptions).
struct KernelCompileOptions {
  const codegen::KernelCache* cache = nullptr;  // nullptr: compile every module
  codegen::CompileProgress* progress = nullptr;  // nullptr: silent
  std::string dump_dir;                          // "": no --dump-kernels
};

// `nodes[i]` is the node of contents->manifest.steps(i) (bindings already set) and
// `choices[i]` the decision codegen::ChooseKernel made for it. Sets each step's
// kernel, launches and gpu_unsupported, and appends the compiled modules to
// contents->kernels. Errors: NVRTC failures (Internal, with the log), generator
// errors other than Unimplemented, dump I/O errors.
absl::StatusOr<KernelAssignmentStats> AssignKernels(const std::vector<Node*>& nodes,
                                                    const std::vector<codegen::KernelChoice>& choices,
                                                    const std::string& arch,
                                                    const codegen::KernelOptions& kernel_options,
                                                    BundleContents* contents,
                                                    const KernelCompileOptions& compile_options = {});

}  // namespace kiln
