// kiln_gemm_bench's measurement of one problem: its inputs filled, the peers and
// kiln's kernels of every idiom run and checked once, then all of them timed together.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "benchmarks/gemm_bench_device.h"
#include "benchmarks/gemm_bench_options.h"
#include "benchmarks/gemm_bench_problems.h"
#include "benchmarks/gemm_bench_report.h"

namespace kiln::gemm_bench {

// Everything generated for one problem, before any GPU work.
struct ProblemKernels {
  std::map<Idiom, absl::StatusOr<Generated>> kiln;
  absl::StatusOr<Generated> bias_relu = absl::UnknownError(""), bias_gelu = absl::UnknownError("");
  absl::StatusOr<Generated> bias_gelu_erf = absl::UnknownError(""), bias_residual = absl::UnknownError("");
  absl::StatusOr<Generated> relu_a = absl::UnknownError(""), add = absl::UnknownError("");
};

// What the measurement of every problem shares.
struct Bench {
  const Options& o;
  const KernelTable& table;
  std::map<std::string, void*>& buf;
  cudaStream_t stream;
  const Blas& blas;
  Timer& timer;
  Device& dev;
};

// Measures problem `index` of the list (`p`, whose kernels are `pk`), prints its rows
// and appends them to `rows`. False after the message of a harness failure (the
// bench's exit status is then 1).
bool MeasureProblem(const Bench& bench, size_t index, const Problem& p, const ProblemKernels& pk,
                    std::vector<Row>& rows);

}  // namespace kiln::gemm_bench
