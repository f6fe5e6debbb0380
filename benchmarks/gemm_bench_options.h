// kiln_gemm_bench's options: what its command line sets (gemm_bench.cc parses it),
// read by the kernel generation, the timer and the report.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "benchmarks/gemm_bench_problems.h"

namespace kiln::gemm_bench {

struct Options {
  std::vector<std::string> sets = {"squares", "transformer", "random"};
  // The five idioms of issue 5 (bias_gelu_erf is asked for by name).
  std::vector<Idiom> idioms = {Idiom::kGemm, Idiom::kBiasRelu, Idiom::kBiasGelu, Idiom::kReluGemm, Idiom::kDualGemm};
  int reps = 20;
  int warmup = 3;
  bool flush = true;
  bool sequential = false;  // --sequential: time each measurement's runs back to back (Timer::MedianMs)
  bool fixed_order = false;  // --fixed-order: every round in the same order (Timer::MedianMs)
  uint64_t seed = 20240805;
  int count = 100;
  double tolerance = 1e-2;
  std::string csv = "gemm.csv";
  std::string arch;  // default: the device's
  bool compile_only = false;
  std::string family = "sm80";  // GEMM family of kiln's kernels: sm80, or sm90 (sm_90a only)
  std::string sm90_config;      // forced sm90 tile config ("" : the heuristic)
  std::string config;           // forced sm_80 / SIMT template tile config ("" : the heuristic)
  int sm_count = 0;             // the device's (the sm90 family's persistent grid)
  bool b_nk = false;            // --b-layout nk: B operands stored [N, K]
  std::vector<Problem> shapes;  // --shapes: these problems instead of the sets
  std::string dump_dir;         // --dump-kernels: write the kernels' sources and cubins here
  int sustain_ms = 0;           // --sustain: back-to-back launches for this long per measurement
  bool fp32 = false;            // --precision fp32 or tf32: fp32 operands and results (kiln's SIMT template)
  bool tf32 = false;            // --precision tf32: fp32 operands read as TF32 (the sm90 family's tf32 wgmma)
  int ElementBytes() const { return fp32 ? 4 : 2; }
};

// Whether `i` is one of the idioms to measure.
inline bool Has(const Options& o, Idiom i) { return std::find(o.idioms.begin(), o.idioms.end(), i) != o.idioms.end(); }

}  // namespace kiln::gemm_bench
