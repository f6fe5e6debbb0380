// kiln_gemm_bench's workload: the fusion idioms and their cuBLAS peers, the problem
// sets (and the seed protocol's random problems), and the graphs of kiln's side of
// each idiom and of the unfused peers' separate kernels.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace kiln::gemm_bench {

enum class Idiom { kGemm, kBiasRelu, kBiasGelu, kReluGemm, kDualGemm, kBiasGeluErf, kBiasResidual };

const char* IdiomName(Idiom i);
// The two peers of each idiom ("" where there is only one).
const char* PeerA(Idiom i);
const char* PeerB(Idiom i);

struct Problem {
  std::string set;
  int64_t m, n, k;
};

std::vector<Problem> Squares();
// Token counts x the (N, K) of BERT-base/-large and GPT-2 projections and MLPs.
std::vector<Problem> Transformer();
// Few tokens (decode-like, issue 6 "Small M"): M in {1, 8, 16, 32, 64} x N, K in
// {768, 3072, 4096}.
std::vector<Problem> SmallM();
// The seed protocol: `count` problems, each of M, N, K a multiple of 128 in
// [128, 4096] drawn from mt19937_64(seed) (whose output the C++ standard fixes, so
// the list is the same on every platform): dim = 128 * (1 + draw % 32).
std::vector<Problem> Random(uint64_t seed, int count);
// Three small problems, one of them with partial tiles, to check the harness quickly.
std::vector<Problem> Smoke();

// Graphs: kiln's fused group for each idiom, and the nodes of the unfused peers'
// separate kernels. Inputs are fp16 (or `dt`) values named "a", "b", "a2", "b2", "bias", "y",
// "p", "q"; the result is always "out". Buffers are bound to kernels by these names.
struct Built {
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
  Node* node = nullptr;
};

// The group fusion forms for `idiom` on [M,K]·[K,N] (patterns of fusion/fuse_epilogue.cc,
// fuse_prologue.cc and fuse_siblings.cc). bias_gelu uses the tanh approximation, which
// is what cuBLASLt's GELU epilogue computes; bias_gelu_erf the exact (erf) form.
// `b_nk`: every B operand is stored [N, K] (MatMul's trans_b), else [K, N]. `tf32`:
// every MatMul carries tf32 = 1 (--precision tf32's mark, graph/tf32_math.h).
absl::StatusOr<Built> KilnGroup(Idiom idiom, int64_t m, int64_t n, int64_t k, bool b_nk, DType dt = DType::kFloat16,
                                bool tf32 = false);
// The unfused peers' separate kernel: out = act(y + bias) as a "pointwise" group
// (`idiom`: bias_relu, bias_gelu or bias_gelu_erf).
absl::StatusOr<Built> BiasActGroup(Idiom idiom, int64_t m, int64_t n, DType dt = DType::kFloat16);
// The bias_residual peer's separate kernel: out = y + bias + residual.
absl::StatusOr<Built> BiasResidualGroup(int64_t m, int64_t n, DType dt = DType::kFloat16);
// out = Relu(a) over [rows, cols] (a plain node).
absl::StatusOr<Built> ReluNode(int64_t rows, int64_t cols, DType dt = DType::kFloat16);
// out = p + q over [rows, cols] (a plain node).
absl::StatusOr<Built> AddNode(int64_t rows, int64_t cols, DType dt = DType::kFloat16);

}  // namespace kiln::gemm_bench
