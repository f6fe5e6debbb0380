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
// optional inputs are never passed. After the pointer parameters come the launch's
// `tensor_maps`, one parameter each, in order: a CUtensorMap passed by value,
//   const __grid_constant__ kiln_tensor_map name
// where kiln_tensor_map is a 64-byte aligned struct of 128 bytes the kernel's
// template defines (no CUDA headers: see codegen/templates/gemm_sm90.cuh). The host
// encodes each map from its TensorMapSpec and the tensor's address
// (runtime/tensor_map.h), once per session (buffer addresses are fixed then).
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

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace kiln::codegen {

class TuningDb;      // codegen/tuning_db.h
struct TuningEntry;  // codegen/tuning_db.h

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
  // template's "32x64x32 w1x2 s4 (tuning database)" (GenerateMatMulGroupWithDb); "" for
  // the others.
  std::string config;
};

struct KernelOptions {
  // FusedGroups anchored on a MatMul ("matmul+epilogue", ...) get kiln's sm_80-class
  // tensor-core GEMM template (codegen/templates/gemm_sm80.cuh) with the group's
  // epilogue generated into it. Off: they have no generated kernel (the caller uses
  // a library epilogue or expands them).
  bool gemm_template = false;
  // With gemm_template and hopper: only the MatMul groups the Hopper family takes
  // (ops::Sm90Eligible) get generated kernels; the others stay on the library
  // (cuBLASLt's fused epilogue, or expanded: cuBLASLt's GEMM and a pointwise kernel)
  // rather than the sm_80 template, which reaches 0.35-0.55x cuBLASLt on the H100.
  // `--matmul-groups auto` on sm_90a.
  bool gemm_template_sm90_only = false;
  // "conv+epilogue" groups run as one cudnnConvolutionBiasActivationForward call
  // (cudnn:FusedConv). On the H100 that call is slower than cudnnConvolutionForward
  // plus one generated pointwise kernel in NCHW (ResNet-50 batch 1: 0.833 vs 0.706
  // ms) and much faster in NHWC (0.327 vs 0.486 ms; batch 128: 5.98 vs 11.74 ms), the
  // layout convs run in by default (graph/to_channels_last.h). Off, the groups are
  // expanded and their epilogue fused again as a pointwise group
  // (runtime/compiler.cc). On with `--conv-groups auto` (default) and `cudnn`.
  bool cudnn_fused_conv = false;
  // NHWC Conv nodes (channels_last = 1) and "conv+epilogue" groups anchored on one
  // get kiln's generated conv kernels (codegen/ops/conv.cc): implicit GEMM on the
  // tensor-core template for group == 1, a direct depthwise kernel for group == C ==
  // OC, the group's epilogue generated into either. NCHW and other grouped convs stay
  // on cuDNN (ConvKernelFits says why). `kiln compile --conv-groups generated`.
  bool conv_template = false;
  // The default (`--conv-groups auto`, with cudnn_fused_conv): of the above, only
  // depthwise convs and their groups, and the conv groups cuDNN's fused call cannot
  // take (a Clip/ReLU6 or BatchNorm-like epilogue: MobileNetV2, DenseNet), which would
  // otherwise run as cuDNN's convolution plus a pointwise kernel. Measured on the
  // H100, fp16 NHWC: MobileNetV2 batch 1 runs 0.219 ms with every conv generated
  // against 0.443 ms with cuDNN's fused call (0.467 expanded), while ResNet-50 (bias
  // + residual + ReLU epilogues cuDNN takes) runs 0.327 ms (batch 1) and 5.98 ms
  // (batch 128) on cuDNN's fused call against 0.555 and 11.50 ms on the implicit GEMM.
  // Lone Convs with a bias (ResNet's downsample projections: cuDNN's convolution plus
  // a cudnnAddTensor pass) stay on cuDNN: generated, ResNet-50 batch 128 measured
  // 5.28 ms against 5.21.
  bool conv_template_auto = false;
  // The target is sm_90a (IsHopperArch(CompileOptions::arch)): MatMul groups the
  // Hopper family takes (codegen/ops/gemm_sm90.h: TMA-readable fp16/bf16 operands, no
  // prologue or dual mainloop) get it instead of the sm_80 template (with
  // gemm_template on).
  bool hopper = false;
  // Multiprocessors of the target GPU: the Hopper family's persistent grid size
  // (0: 132, an H100 SXM).
  int sm_count = 0;
  // The tuning database (codegen/tuning_db.h), or nullptr: MatMul groups on the
  // generated GEMM take its tile config for their problem (GenerateMatMulGroupWithDb),
  // and with gemm_template_sm90_only (auto on sm_90a) a group cuBLASLt can run in one
  // call goes to cuBLASLt where `kiln compile --tune` measured cuBLASLt faster than
  // the family (LibraryMeasuredFaster).
  const TuningDb* tuning_db = nullptr;
};
// The arch that runs the Hopper GEMM family (KernelOptions::hopper), and the test.
inline constexpr absl::string_view kHopperArch = "sm_90a";
inline bool IsHopperArch(absl::string_view arch) { return arch == kHopperArch; }

// The launches that compute `node`'s outputs from its inputs, in order. `node` has
// static shapes and the dtypes it will run in (after precision lowering). An empty
// vector means the node needs no work (never the case today; views that the memory
// planner aliases are skipped by the caller). Unimplemented, naming the op and the
// form, when kiln has no generated kernel for it; MatMul, Gemm and Conv go through
// the vendor libraries instead (codegen/library_kernels.h).
absl::StatusOr<std::vector<KernelLaunch>> GenerateNodeKernels(const Node& node, const KernelOptions& options = {});

// Whether `node` is a FusedGroup the GEMM template takes (a MatMul anchor).
bool IsMatMulGroup(const Node& node);
// Whether the options give `node`, a MatMul group, a generated GEMM: gemm_template,
// and with gemm_template_sm90_only a group the Hopper family takes on a Hopper target.
bool GeneratesMatMulGroup(const Node& node, const KernelOptions& options);
// Why a MatMul group that auto mode (gemm_template_sm90_only) wanted generated gets
// none: the Hopper family refused it (its reason), the target is not Hopper, or the
// tuning database measured cuBLASLt faster on it (LibraryTuningEntry). "" when
// GeneratesMatMulGroup holds, for other modes, and for other nodes.
std::string Sm90OnlyRefusal(const Node& node, const KernelOptions& options);
// How Sm90OnlyRefusal's reason starts when the tuning database sent the group to
// cuBLASLt (so that reports can count such groups).
inline constexpr absl::string_view kTunedToLibraryReason = "kiln compile --tune measured cuBLASLt faster";
// In auto mode on sm_90a (gemm_template_sm90_only, hopper), for a MatMul group the
// family takes and cuBLASLt can run in one call (LibraryKernelName): options.tuning_db's
// entry for it when that entry measured cuBLASLt faster (LibraryMeasuredFaster), else
// nullptr.
const TuningEntry* LibraryTuningEntry(const Node& node, const KernelOptions& options);

// Whether `node` is a "conv+epilogue" FusedGroup (a Conv anchor).
bool IsConvGroup(const Node& node);
// OK when the generated conv kernels (KernelOptions::conv_template) take `node`, a
// Conv or a conv group; else Unimplemented saying why (an NCHW conv, an fp32 conv
// that is not depthwise, ...): cuDNN runs it.
absl::Status ConvKernelFits(const Node& node);
// Whether the options send `node` (a Conv or conv group) to the generated conv
// kernels: conv_template, or conv_template_auto and a depthwise conv or a conv group
// that cuDNN's fused call does not take.
bool ConvTemplateTakes(const Node& node, const KernelOptions& options);

// The C type name of a storage dtype in generated code: "float", "kiln_f16",
// "kiln_bf16", "kiln_i64", "kiln_i32", "kiln_i8", "kiln_u8", "kiln_bool".
const char* StorageTypeName(DType dtype);

}  // namespace kiln::codegen
