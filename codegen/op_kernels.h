// Generated CUDA kernels for single graph nodes (the unfused baseline): for each op
// kiln runs with its own kernel, the CUDA C++ source of one or more launches, with
// every shape, stride and attribute baked in as a constant (shapes are static per
// bundle). The sources are compiled by NVRTC into the bundle's module (see
// codegen/nvrtc_module.h); the same generation and compile path serves fused groups.
//
// Source contract. A launch's `source` defines exactly one kernel,
//   extern "C" __global__ void KILN_KERNEL(<one pointer parameter per entry of args>)
// where KILN_KERNEL is a macro the module builder defines to a unique name. It may
// use everything in codegen/templates/prelude.cuh (included once per module) and
// must give any helper it defines internal linkage and a name derived from nothing
// but its content (static __device__ functions are fine: identical sources are
// deduplicated, different ones are wrapped in their own namespace).
//
// Parameters. Entry j of `args` names the tensor that parameter j points to:
// a value v < num_outputs is output v, else input (v - num_outputs). Pointers are
// typed by the value's storage dtype (kiln_f16*, float*, kiln_i64*, ...). Absent
// optional inputs are never passed.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace kiln::codegen {

struct KernelLaunch {
  std::string source;
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t shared_bytes = 0;
  std::vector<int> args;
};

struct KernelOptions {
  // FusedGroups anchored on a MatMul ("matmul+epilogue", ...) get kiln's sm_80-class
  // tensor-core GEMM template (codegen/templates/gemm_sm80.cuh) with the group's
  // epilogue generated into it. Off: they have no generated kernel (the caller uses
  // a library epilogue or expands them).
  bool gemm_template = false;
  // "conv+epilogue" groups run as one cudnnConvolutionBiasActivationForward call
  // (cudnn:FusedConv). Off by default: on the H100 that call measured slower than
  // cudnnConvolutionForward plus one generated pointwise kernel for the epilogue
  // (ResNet-50 batch 1: 0.833 ms fused this way vs 0.706 ms unfused; MobileNetV2
  // 0.381 vs 0.357). Off, the groups are expanded and their epilogue fused again as
  // a pointwise group (runtime/compiler.cc). `kiln compile --conv-groups cudnn`.
  bool cudnn_fused_conv = false;
};

// The launches that compute `node`'s outputs from its inputs, in order. `node` has
// static shapes and the dtypes it will run in (after precision lowering). An empty
// vector means the node needs no work (never the case today; views that the memory
// planner aliases are skipped by the caller). Unimplemented, naming the op and the
// form, when kiln has no generated kernel for it; MatMul, Gemm and Conv go through
// the vendor libraries instead (codegen/library_kernels.h).
absl::StatusOr<std::vector<KernelLaunch>> GenerateNodeKernels(const Node& node, const KernelOptions& options = {});

// Whether `node` is a FusedGroup the GEMM template takes (a MatMul anchor).
bool IsMatMulGroup(const Node& node);

// The C type name of a storage dtype in generated code: "float", "kiln_f16",
// "kiln_bf16", "kiln_i64", "kiln_i32", "kiln_i8", "kiln_u8", "kiln_bool".
const char* StorageTypeName(DType dtype);

}  // namespace kiln::codegen
