// Builds one NVRTC module (a cubin) out of many generated kernels: the prelude once,
// then each distinct kernel source in a namespace of its own with KILN_KERNEL defined
// to its function name. Runs on machines without a GPU (NVRTC needs no driver).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::codegen {

struct ModuleKernel {
  std::string function;  // extern "C" name, unique within the module
  std::string source;    // see the source contract in codegen/op_kernels.h
};

// The complete CUDA C++ text of a module (what CompileModule hands to NVRTC).
std::string ModuleSource(const std::vector<ModuleKernel>& kernels);

// Compiles the kernels for `arch` ("sm_90a", "sm_89", "sm_86", "sm_80") and returns
// the cubin. InvalidArgument for an unknown arch; Internal with NVRTC's log (and the
// offending source lines) when compilation fails.
absl::StatusOr<std::string> CompileModule(const std::vector<ModuleKernel>& kernels, absl::string_view arch);

// Splits `kernels` into chunks of at most `max_per_module` and compiles them in
// parallel; returns one cubin per chunk, kernel i lands in cubin i / max_per_module.
absl::StatusOr<std::vector<std::string>> CompileModules(const std::vector<ModuleKernel>& kernels,
                                                        absl::string_view arch, int max_per_module);

// The NVRTC version, "13.0".
std::string NvrtcVersion();

}  // namespace kiln::codegen
