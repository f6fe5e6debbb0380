// Builds one NVRTC module (a cubin) out of many generated kernels: the prelude once,
// then each distinct kernel source in a namespace of its own with KILN_KERNEL defined
// to its function name. Runs on machines without a GPU (NVRTC needs no driver).
// CompileModules compiles modules in parallel (TBB), takes them from the on-disk
// kernel cache where it can (codegen/kernel_cache.h) and reports progress
// (codegen/compile_progress.h). InspectModule compiles one for `--dump-kernels`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "codegen/compile_progress.h"
#include "codegen/kernel_cache.h"

namespace kiln::codegen {

struct ModuleKernel {
  std::string function;  // extern "C" name, unique within the module
  std::string source;    // see the source contract in codegen/op_kernels.h
};

// Where the body of the kernel a source defines begins: just after the `{` that
// follows `KILN_KERNEL(...)`. npos when the source has no such entry, or two.
size_t KernelBodyStart(absl::string_view source);

// The complete CUDA C++ text of a module (what CompileModule hands to NVRTC). Each
// kernel's body starts with KILN_GRID_DEPENDENCY_WAIT() (codegen/templates/prelude.cuh)
// where KernelBodyStart finds it: such a kernel may be launched with programmatic
// stream serialization (bundle::Launch.grid_dependency_wait).
std::string ModuleSource(const std::vector<ModuleKernel>& kernels);

// Compiles the kernels for `arch` ("sm_90a", "sm_89", "sm_86", "sm_80") and returns
// the cubin. InvalidArgument for an unknown arch; Internal with NVRTC's log (and the
// offending source lines) when compilation fails.
absl::StatusOr<std::string> CompileModule(const std::vector<ModuleKernel>& kernels, absl::string_view arch);

// NVRTC's options for a module compiled for `arch` (part of the cache key).
std::vector<std::string> NvrtcOptions(absl::string_view arch);

struct CompileModulesOptions {
  int max_per_module = 48;
  const KernelCache* cache = nullptr;  // nullptr: no cache
  CompileProgress* progress = nullptr;  // nullptr: silent
};

// Splits `kernels` into chunks of at most `max_per_module` and compiles them in
// parallel; returns one cubin per chunk, kernel i lands in cubin i / max_per_module.
// With a cache, each chunk is looked up first and every compiled one is stored; a
// cache that cannot be written adds a warning to *stats, never an error.
absl::StatusOr<std::vector<std::string>> CompileModules(const std::vector<ModuleKernel>& kernels,
                                                        absl::string_view arch, const CompileModulesOptions& options,
                                                        ModuleCompileStats* stats = nullptr);
// Without cache or progress.
absl::StatusOr<std::vector<std::string>> CompileModules(const std::vector<ModuleKernel>& kernels,
                                                        absl::string_view arch, int max_per_module);

// A module compiled for inspection (kiln compile --dump-kernels): the same options
// as CompileModule plus ptxas' verbose report (--ptxas-options=-v, which changes
// the log only, not the code), with the PTX and the log kept.
struct ModuleInspection {
  std::string source;                // exactly the text NVRTC compiled
  std::vector<std::string> options;  // exactly the options it was given
  std::string ptx;
  std::string cubin;
  std::string log;                   // NVRTC's program log (ptxas' report included)
};
// Errors as CompileModule's (the log is in the message).
absl::StatusOr<ModuleInspection> InspectModule(const std::vector<ModuleKernel>& kernels, absl::string_view arch);

// Per kernel function, what ptxas reported with -v; -1 where the log said nothing.
struct KernelResources {
  std::string function;
  int registers = -1;
  int barriers = -1;
  int64_t shared_bytes = 0;     // static shared memory ("smem"); dynamic shared memory is the launch's
  int64_t constant_bytes = -1;  // cmem[0] (kernel parameters and constants), when reported
  int64_t stack_bytes = -1;     // stack frame
  int64_t spill_store_bytes = -1;
  int64_t spill_load_bytes = -1;
};
// Parses ptxas' -v report ("Compiling entry function 'f' for 'sm_90a'", "Function
// properties for f", "N bytes stack frame, N bytes spill stores, N bytes spill
// loads", "Used N registers, used N barriers, N bytes smem, N bytes cmem[0]"), one
// entry per entry function, in the log's order.
std::vector<KernelResources> ParsePtxasResources(absl::string_view log);

// The NVRTC version, "13.0".
std::string NvrtcVersion();

}  // namespace kiln::codegen
