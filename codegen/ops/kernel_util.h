// Shared helpers of the per-node kernel generators (codegen/ops/*.cc): literals,
// typed loads and stores, index types, launch shapes, dim collapsing. Internal to
// codegen.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/op_kernels.h"
#include "graph/dim_expr.h"
#include "graph/graph.h"

namespace kiln::codegen::ops {

constexpr uint32_t kBlock = 256;
constexpr uint32_t kMaxGrid = 65535;
// Elements per thread per iteration of the element-wise kernels' scalar path.
constexpr int kScalarUnroll = 4;

// A float as exact CUDA source ("1.00000000e+00f"; inf/nan through bit casts).
std::string FloatLit(float v);
// An int64 as CUDA source ("-3LL").
std::string IntLit(int64_t v);

// The index type for a loop over `n` elements: "int" when n < 2^31, else kiln_index.
const char* IndexType(int64_t n);

// The dtype suffix of KILN_LOAD_* / KILN_STORE_* ("f32", "f16", "bf16").
const char* FloatSuffix(DType dtype);

// Value domains of generated expressions: fp32 registers, int64 registers, bool.
enum class Domain { kFloat, kInt, kBool };
// The natural domain of a storage dtype (float for f32/f16/bf16, int otherwise).
Domain DomainOf(DType dtype);
// "float", "kiln_i64", "bool".
const char* DomainType(Domain d);
// Expression reading element `idx` of pointer `ptr` (storage `dtype`) as `domain`.
std::string LoadAs(DType dtype, Domain domain, const std::string& ptr, const std::string& idx);
// Statement storing the `domain` expression `value` into element `idx` of `ptr`.
// Float to integer conversions truncate toward zero (NaN gives 0, saturating to
// int64 then wrapping), anything to bool is != 0, as kiln::ops::CastTensor.
std::string StoreFrom(DType dtype, Domain domain, const std::string& ptr, const std::string& idx,
                      const std::string& value);

// Kernel parameter declaration of a value: "kiln_f16* __restrict__ out0" / "const ... in1".
std::string Param(DType dtype, bool is_const, const std::string& name);

// A 1-D launch over `n` elements with a grid-stride loop (block kBlock).
void SetGrid1D(KernelLaunch& launch, int64_t n, uint32_t block = kBlock);

// Row-major strides.
std::vector<int64_t> DenseStrides(const Shape& shape);

// An iteration space with one stride vector per operand; Collapse() drops unit dims
// and merges neighbours that are contiguous for every operand.
struct StridedSpace {
  Shape shape;
  std::vector<std::vector<int64_t>> strides;  // [operand][dim]
  void Collapse();
};

// Code that decomposes linear index `i` (of type `index_type`) over `space.shape` and
// declares `<prefix><k>` = offset of operand k, for each operand k in `operands`.
// Operands whose strides are the dense strides of the space use `i` directly.
std::string OffsetCode(const StridedSpace& space, const std::vector<int>& operands, const std::string& i,
                       const std::string& index_type, const std::string& prefix);

// The body of a grid-stride loop over n elements in a kernel: "for (T i = ...; i < n; ...) {".
std::string GridStrideLoop(int64_t n, const std::string& var = "i");
// The same up to `count`, a C expression of type `index_type` (a run-time size).
std::string GridStrideLoop(const std::string& count, const char* index_type, const std::string& var = "i");

// The strides of a tensor of shape `view` broadcast (right-aligned, ONNX
// multidirectional broadcasting) into `shape`: its dense stride per dim of `shape`, 0
// where it has size 1 or no dim. False when `view` does not broadcast into `shape`.
bool BroadcastStrides(const Shape& view, const Shape& shape, std::vector<int64_t>* strides);

// Like OffsetCode, but an operand whose strides are c times the space's dense
// strides (c >= 0) gets `i * c` (0 for c = 0) without decomposing `i`: the offset of
// row `i` in a tensor of rows of c elements, or of a broadcast operand.
std::string LinearOffsetCode(const StridedSpace& space, const std::vector<int>& operands, const std::string& i,
                             const std::string& index_type, const std::string& prefix);

// The widest vector (elements per access, a power of two <= 8) that keeps every
// access of the given storage dtypes within 16 bytes.
int MaxVectorWidth(const std::vector<DType>& dtypes);

// An element-wise kernel over `shape` (dense outputs of that shape), shared by the
// per-op pointwise kernels and fused pointwise groups (codegen/ops/pointwise.cc).
// Operand k is read at `strides` (over `shape`; 0 where broadcast) into the register
// variable `var` of `domain`; `code` (statements) computes from those variables;
// each output stores its `expr`. Kernel parameters: the outputs, then the operands,
// named by `param`.
struct EwOperand {
  std::string param;
  DType dtype;
  Domain domain;
  std::string var;
  std::vector<int64_t> strides;
  int64_t offset = 0;  // element of the operand at index 0 (a Slice's start)
  // Run-time sizes (EwKernel::dims set): the strides as expressions, 0 where broadcast.
  std::vector<DimExpr> dim_strides;
};
struct EwOutput {
  std::string param;
  DType dtype;
  Domain domain;
  std::string expr;
};
struct EwKernel {
  std::string comment;  // one line, after "// "
  Shape shape;  // at the largest sizes when `dims` is set
  // Run-time sizes (a dynamic graph's node): the shape's dims as expressions over the
  // dim symbols; the operands' dim_strides replace their strides, and the kernel
  // takes kiln_dims (codegen/kernel_launch.h). Empty: every size is fixed.
  std::vector<DimExpr> dims;
  std::vector<EwOperand> operands;
  std::string code;
  std::vector<EwOutput> outputs;
};
// The source and launch shape (args are the caller's). Where the collapsed space
// allows it (every operand contiguous or broadcast along the innermost dim, its
// extent and every outer stride a multiple of V; or one flat dim, with a scalar
// tail) threads move V elements per load and store (16 bytes: 8 x fp16, 4 x fp32)
// and several vectors each; a run-time check of the pointers' alignment falls back
// to one element per thread, as do spaces that do not allow it.
KernelLaunch EmitElementwiseKernel(const EwKernel& kernel);
// The kernel with run-time sizes (kernel.dims set; codegen/ops/dynamic_elementwise.cc):
// the same loops with the extents, strides and element count read from kiln_dims,
// dims merged where every operand is contiguous across them for all sizes, vectors
// where the innermost extent and the outer strides are multiples of the width for all
// sizes (or one flat dim, with a tail).
KernelLaunch EmitDynamicElementwiseKernel(const EwKernel& kernel);

// out[out_base + offset(i)] = in[i] over `dims` (run-time sizes), `out_strides` the
// output's element strides per dim: a Concat input's block of the output.
KernelLaunch EmitDynamicStridedCopy(DType dtype, const std::vector<DimExpr>& dims, const std::vector<DimExpr>& out_strides,
                                    int64_t out_base, int64_t max_n, const std::string& comment);

// The loops of an element-wise kernel after its offsets and sizes are declared, shared
// by EmitElementwiseKernel and EmitDynamicElementwiseKernel, through the kernel's
// closing brace. `offsets(i)` declares o<k> for operand k >= 1 at linear index i;
// `count` is the element count as C code; with `vec` > 1 the vector loop comes first
// (`vecs_decl` declares kVecs; contiguous[l]: operand l is read a vector at a time,
// else one element per vector), then, with `tail`, the elements after the last whole
// vector; the scalar loop takes unaligned pointers (and every element when vec == 1).
std::string ElementwiseLoops(const EwKernel& k, const char* index_type, int vec, const std::vector<bool>& contiguous,
                             const std::string& vecs_decl, bool tail, const std::string& count,
                             const std::function<std::string(const std::string&)>& offsets);

// C code of a dim expression over kiln_dims: "(768*KILN_DIM(0)*KILN_DIM(1))".
std::string DimCode(const DimExpr& e);
// Row-major strides over dims, and the number of elements, as expressions.
std::vector<DimExpr> DenseDimStrides(const std::vector<DimExpr>& dims);
DimExpr DimsProduct(const std::vector<DimExpr>& dims);
// The dims of a value: its expressions in a dynamic graph, else its fixed sizes.
std::vector<DimExpr> ValueDims(const Value& v);
// Whether any input or output of `node` has dims that vary with the dim symbols.
bool HasDynamicValues(const Node& node);
// For a kernel that takes only its outermost dim (the batch) at run time: nullopt when
// `node`'s sizes are fixed, else `v`'s outermost dim; Unimplemented naming the form
// when another dim of `v` varies.
absl::StatusOr<std::optional<DimExpr>> VaryingOutermostDim(const Node& node, const Value& v);
// BroadcastStrides over expressions: an operand dim equal to the output's gets its
// dense stride, a fixed 1 gets 0; false for anything else.
bool DynamicBroadcastStrides(const std::vector<DimExpr>& view, const std::vector<DimExpr>& shape,
                             std::vector<DimExpr>* strides);
// Run-time sizes for a 1-D launch of SetGrid1D's shape: extent `n` elements (or
// vectors), `per_block` of them per block.
void SetDynamicGrid1D(KernelLaunch& launch, const DimExpr& n, int64_t per_block);

// Input `i` of `node` as arg index (outputs come first).
inline int InputArg(const Node& node, int i) { return node.num_outputs() + i; }

// Unimplemented("no generated GPU kernel for <Op> (<form>)").
absl::Status NoKernel(const Node& node, const std::string& form);

// The C expression of the element offset of (batch, row, col) in an operand of
// logical shape [batch..., R, C] whose dims have memory strides `strides` (0: the
// dim is broadcast); `batch` is the flat index over the batch dims. Used by the
// tensor-core templates' functors (GEMM epilogue and prologue, attention scores).
std::string BatchRowColOffset(const Shape& shape, const std::vector<int64_t>& strides);
// The same offset where the dims before the last are folded into one row index (a
// GEMM whose batch folds into M: `row` runs over batch * M and `batch` is 0): each
// of those dims' coordinates is `row` divided by the dims inside it, modulo its
// size; dims whose strides continue the row dim's densely merge into one term.
std::string FoldedRowColOffset(const Shape& shape, const std::vector<int64_t>& strides);

}  // namespace kiln::codegen::ops
