// `kiln compile --dump-kernels DIR`: what every step of a bundle runs, written out for
// people to read. Works without a GPU (NVRTC compiles on the host).
//
// Layout of DIR:
//   index.md                      every step (what it runs) and every file with its size
//   steps/NNNN_<node>/            one folder per step that runs generated code (a fused
//                                 group, or one op with --no-fuse), NNNN = step index:
//     subgraph.txt                the group's body graph with its member ONNX node names,
//                                 or the single node as a kiln text graph (graph/text_format.h)
//     launch.txt                  the kernel selector's decision, then per launch:
//                                 function, module, grid, block, dynamic shared
//                                 memory, what each pointer parameter is, the GEMM tile
//                                 configuration (the #defines of the source) and the
//                                 resource use ptxas reported (registers, shared memory,
//                                 stack, spill stores/loads)
//     <function>.cu               the CUDA C++ exactly as NVRTC compiled it for the dump:
//                                 the prelude, then the kernel (a module of one kernel)
//     <function>.ptx              the PTX of that compile (per kernel)
//     <function>.sass             cuobjdump -sass of its cubin, when cuobjdump exists
//     <function>.cubin            the cubin
//     <function>.ptxas.txt        NVRTC's log with ptxas' -v report
//     <function>.error.txt        instead of the above when NVRTC rejects the kernel
// Library steps (cuBLASLt/cuDNN), views and steps without a GPU kernel have no folder:
// the index says what they call, on which tensors.
//
// The bundle packs up to kKernelsPerModule kernels per module
// (compiler/assign_kernels.h); the dump compiles each kernel on its own (same NVRTC
// options plus --ptxas-options=-v) so that every file describes one kernel. Kernels
// share nothing across a module (each sits in a namespace of its own, helpers have
// internal linkage), so the code is the same whatever the module size.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "codegen/kernel_choice.h"
#include "codegen/nvrtc_module.h"
#include "graph/graph.h"
#include "runtime/bundle.h"

namespace kiln {

struct KernelDumpStats {
  int step_folders = 0;   // steps that run generated code
  int kernels = 0;        // distinct kernels compiled for the dump
  int failed = 0;         // kernels NVRTC rejected (their .error.txt says why)
  std::string sass_note;  // where cuobjdump was found, or why there is no SASS
};

// Writes the dump of `manifest`'s steps into `dir` (created if missing). `nodes[i]` is
// the node of step i and `choices[i]` what the kernel selector decided for it
// (codegen/kernel_choice.h; shown per step); `kernels` holds the source of every
// function the launches name.
// `dir` must be new, empty or an earlier kiln dump (whose index.md and steps/ are
// replaced); anything else is FailedPrecondition, so that no user file is lost.
// Errors: I/O, naming the path.
absl::StatusOr<KernelDumpStats> WriteKernelDump(const std::string& dir, const std::vector<Node*>& nodes,
                                                const std::vector<codegen::KernelChoice>& choices,
                                                const bundle::Manifest& manifest,
                                                const std::vector<codegen::ModuleKernel>& kernels,
                                                const std::string& arch);

// `name` made safe as one path component: [A-Za-z0-9._-] kept, runs of anything else
// become one '_', no leading '.' or '-', at most `max_size` bytes; "_" when empty.
std::string SafeFileName(absl::string_view name, size_t max_size = 64);

// The cuobjdump to disassemble with: the first in $PATH, else
// /usr/local/cuda/bin/cuobjdump; "" when neither exists.
std::string FindCuobjdump();

}  // namespace kiln
