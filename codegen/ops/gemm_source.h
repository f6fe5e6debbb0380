// Source pieces shared by the generators that instantiate the tensor-core GEMM
// template (codegen/templates/gemm_sm80.cuh): the MatMul groups of
// codegen/ops/gemm.cc and the implicit-GEMM convolutions of codegen/ops/conv.cc
// (whose depthwise kernel uses the same epilogue functor). Internal to codegen.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ops/families.h"
#include "codegen/ops/pointwise_spec.h"
#include "graph/graph.h"

namespace kiln::codegen::ops {

// The template's GEMM_*_MODE of a load kind (0 cp.async ... 4 im2col register-staged).
int GemmLoadMode(GemmLoad load);

// The epilogue functor's group-input loads as kernel code: one parameter e<l> per
// load (", const kiln_f16* __restrict__ e0"), the matching arguments (", e0") and the
// statements declaring g<l> (the load's domain) at element (row, col, batch): all of
// them (`loads`), load l's alone (`load[l]`), and its offset expression (`offset[l]`).
struct GemmEpilogueSource {
  std::string params, args, loads;
  std::vector<std::string> load, offset;
};
// The C offset expression of a load of shape `view` at (row, col, batch), or an
// error (Unimplemented) when it does not broadcast into the output.
using GemmLoadOffset = std::function<absl::StatusOr<std::string>(const Shape& view)>;
// Appends `loads` (group inputs of `node`) to `out` and their arguments to `launch`.
absl::Status AppendGemmEpilogueLoads(const Node& node, const std::vector<ElementwiseLoad>& loads,
                                     const GemmLoadOffset& offset, GemmEpilogueSource& out, KernelLaunch& launch);
// The definition of kiln_epilogue(acc, row, col, batch KILN_EPILOGUE_PARAMS): the
// loads, then `code` (statements from `acc`), returning `result`.
std::string GemmEpilogueFunction(const GemmEpilogueSource& epilogue, const std::string& code,
                                 const std::string& result);
// The grid and workspace of a launch of the template with `config` over `tiles`
// output tiles per batch entry (or conv group) and `batch` of them: grid (tiles,
// split_k, batch); without a split no workspace, with split_k = S one semaphore per
// (batch, tile) and S fp32 BM x BN partial tiles per (batch, tile) of scratch.
// InvalidArgument when the scratch would exceed kGemmMaxScratchBytes or the
// semaphores 2^31 (only a forced config on a large problem can).
inline constexpr uint64_t kGemmMaxScratchBytes = uint64_t{1} << 30;
absl::Status SetGemmGridAndWorkspace(const GemmConfig& config, int64_t tiles, int64_t batch, KernelLaunch& launch);

// Everything after a GEMM kernel's problem #defines (GEMM_BF16 ... GEMM_PROLOGUE_B,
// GEMM_DUAL / GEMM_CONV and theirs): the tile config, the output type and store,
// GEMM_SPLIT_K when split_k > 1 (so unsplit sources are unchanged), the prologue
// and epilogue parameters, `functors` (prologue structs), the epilogue function, then
// gemm_split.cuh when split, mma_sm80.cuh and gemm_sm80.cuh or with `simt`
// gemm_simt.cuh (fp32 operands), and gemm_undef.cuh.
std::string GemmSourceTail(const GemmConfig& config, DType out_dtype, const std::string& prologue_params,
                           const std::string& functors, const GemmEpilogueSource& epilogue,
                           const std::string& epilogue_code, const std::string& result, bool simt = false);

}  // namespace kiln::codegen::ops
