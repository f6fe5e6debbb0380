// What one generated kernel launch is: its CUDA C++ source, grid, block, shared
// memory, parameters, TMA tensor maps and workspace. The compiler fills it
// (codegen/op_kernels.h), the bundle stores it, the runtime launches it
// (runtime/tensor_map.h). Types only: the runtime includes this header without
// linking code generation.
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
// optional inputs are never passed. After the pointer parameters come the launch's
// `tensor_maps`, one parameter each, in order: a CUtensorMap passed by value,
//   const __grid_constant__ kiln_tensor_map name
// where kiln_tensor_map is a 64-byte aligned struct of 128 bytes the kernel's
// template defines (no CUDA headers: see codegen/templates/gemm_sm90.cuh). The host
// encodes each map from its TensorMapSpec and the tensor's address
// (runtime/tensor_map.h), once per session (buffer addresses are fixed then).
//
// Run-time sizes (bundles compiled for dim ranges, docs/dynamic_shapes.md). A
// launch with `dim_param` takes one more parameter, the last of all,
//   const kiln_dims kiln_dims_
// (codegen/templates/prelude.cuh): the run's value of each dim symbol, in the graph's
// (and Manifest.dim_symbols') order, read as KILN_DIM(k). Its `grid` is the grid at the
// largest sizes; an axis with grid_per_block[a] > 0 launches
//   min(grid[a], max(1, ceil(grid_extents[a] / grid_per_block[a])))
// blocks at the run's sizes, so a kernel with a grid-stride loop may cap its grid.
// A launch with `size_boxes` is one variant of its step's kernel (a tile config for
// some sizes): it runs only where the symbols' values lie in one of its boxes; one with
// `size_ranges`, where the value of `size_select` (an expression over the symbols: a
// GEMM's rows) lies in one of them; with both, where both hold. The step's variants
// cover every size in the ranges exactly once.
//
// Workspace. A launch with `semaphores` > 0 or `scratch_bytes` > 0 takes two more
// parameters after the tensor maps (both, whichever is non-zero),
//   unsigned int* kiln_semaphores, float* kiln_scratch
// (the kernel may declare the scratch pointer with another pointee type). The
// semaphores are `semaphores` uint32 counters that are zero when the kernel starts
// and that it must leave zero when it ends; the scratch is `scratch_bytes` bytes,
// 256-byte aligned, with no content guarantee. The runner (runtime/gpu_executor.h:
// per session) gives every launch the same two areas, each sized for the largest
// request among its launches and separate from any library's workspace: launches
// on one stream run in order, so they never use the areas at the same time, and a
// CUDA graph replays them as they were captured because the semaphores come back to
// zero. A pointer whose area has size zero may be null. Split-K GEMMs use both
// (codegen/templates/gemm_sm80.cuh).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "graph/dim_expr.h"
#include "graph/dtype.h"

namespace kiln::codegen {

// A TMA tensor map over one tensor of the launch (cuTensorMapEncodeTiled's
// arguments but the address): a tiled view of `rank` dims, innermost first, with
// 128-byte swizzle or none and zero fill out of bounds. TMA needs the tensor's
// address and every stride 16-byte aligned; generators only emit maps whose strides
// are (and route other shapes to kernels without TMA), and buffers are 256-byte
// aligned.
struct TensorMapSpec {
  int tensor = 0;  // as an entry of `args`: output v, or input v - num_outputs
  int rank = 0;    // 1..5
  std::array<uint64_t, 5> dims{};           // elements, innermost first
  std::array<uint64_t, 4> strides_bytes{};  // of dims 1..rank-1
  std::array<uint32_t, 5> box{};            // elements per TMA copy, each <= 256
  DType dtype = DType::kFloat16;            // element type (f16, bf16, f32)
  int swizzle_bytes = 128;                  // 0 (none), 32, 64 or 128
};

// The most dim symbols a kernel's kiln_dims parameter holds.
inline constexpr int kMaxKernelDims = 8;
// kiln_dims as the host passes it.
struct KernelDims {
  int64_t v[kMaxKernelDims] = {};
};

struct KernelLaunch {
  std::string source;
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t shared_bytes = 0;
  std::vector<int> args;
  std::vector<TensorMapSpec> tensor_maps;  // kernel parameters after the pointers
  // Workspace (see "Workspace" above): zeroed uint32 counters, scratch bytes.
  uint32_t semaphores = 0;
  uint64_t scratch_bytes = 0;
  // The kernel family that generated it, for reports: "gemm_sm80", "gemm_sm90", or
  // "" for the others.
  std::string family;
  // How the GEMM's tile config was chosen, for kernel dumps (the bundle's launch
  // config): "sm90 128x128 p2x2 s5 (heuristic, epilogue work: light)", or the sm_80
  // template's "32x64x32 w1x2 s4 (tuning database)" (GemmChoice::Describe); "" for
  // the others.
  std::string config;
  // Run-time sizes (see above).
  bool dim_param = false;
  std::array<DimExpr, 3> grid_extents;
  std::array<int64_t, 3> grid_per_block{0, 0, 0};  // 0: the axis is fixed
  // Size variants (see above): each box is a [lo, hi] range per dim symbol, in the
  // graph's symbol order. Empty: every size.
  std::vector<std::vector<std::array<int64_t, 2>>> size_boxes;
  // Size variants by one expression's value: [lo, hi] ranges of `size_select`.
  DimExpr size_select;
  std::vector<std::array<int64_t, 2>> size_ranges;
};

}  // namespace kiln::codegen
