// kiln_gemm_bench's results: one row per problem and idiom, printed as it is
// measured, and at the end the summary table and the CSV.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "benchmarks/gemm_bench_device.h"
#include "benchmarks/gemm_bench_options.h"
#include "benchmarks/gemm_bench_problems.h"

namespace kiln::gemm_bench {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Row {
  Problem p;
  Idiom idiom;
  std::string status;  // OK, FAIL, n/a
  std::string note;    // why n/a or FAIL
  std::string config;
  double kiln_ms = kNaN, a_ms = kNaN, b_ms = kNaN;
  double err = kNaN, peer_err = kNaN;
  Sustained kiln_s, a_s, b_s;  // --sustain (the *_ms above are then their per-launch times)

  double Flops() const { return (idiom == Idiom::kDualGemm ? 4.0 : 2.0) * p.m * p.n * p.k; }
  double BestPeerMs() const { return std::isnan(b_ms) ? a_ms : std::isnan(a_ms) ? b_ms : std::min(a_ms, b_ms); }
  double Speedup(double peer_ms) const { return status == "OK" ? peer_ms / kiln_ms : kNaN; }
};

// `v` with `precision` significant digits; "" for NaN (an empty CSV cell).
std::string Num(double v, int precision = 4);

// One row of the table (kiln's time, both peers', the speedups, the error, the status).
void PrintRow(const Row& r);
// --sustain: per measurement, energy per launch, mean SM clock and power, and kiln's
// energy per launch over each peer's.
void PrintSustained(const Row& r);
void WriteCsv(const std::string& path, const std::vector<Row>& rows, bool sustained);
// Per idiom and set (and "all" sets), the geomean, best and worst speedup over the rows
// that passed validation.
void PrintSummary(const std::vector<Row>& rows, const Options& o);

}  // namespace kiln::gemm_bench
