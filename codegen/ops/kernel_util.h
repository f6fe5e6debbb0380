// Shared helpers of the per-node kernel generators (codegen/ops/*.cc): literals,
// typed loads and stores, index types, launch shapes, dim collapsing. Internal to
// codegen.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/op_kernels.h"
#include "graph/graph.h"

namespace kiln::codegen::ops {

constexpr uint32_t kBlock = 256;
constexpr uint32_t kMaxGrid = 65535;

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

// Input `i` of `node` as arg index (outputs come first).
inline int InputArg(const Node& node, int i) { return node.num_outputs() + i; }

// Unimplemented("no generated GPU kernel for <Op> (<form>)").
absl::Status NoKernel(const Node& node, const std::string& form);

}  // namespace kiln::codegen::ops
