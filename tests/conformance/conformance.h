// Conformance runner: imports each ONNX backend test case, runs it on the CPU
// reference (or compiles it and runs the bundle on the GPU) and compares against the
// expected outputs.
//
// Layout understood (ONNX backend test data): <suite>/<case>/model.onnx with
// test_data_set_N/{input,output}_K.pb; and the "light" suite of whole models,
// light_<name>.onnx + light_<name>_output_0.pb, whose input is
// arange(n).reshape(shape) / n in float32 (as ONNX's own runner makes it).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kiln::conformance {

enum class Outcome { kPassed, kFailed, kUnsupported };

struct CaseResult {
  std::string suite;
  std::string name;
  Outcome outcome = Outcome::kFailed;
  std::vector<std::string> ops;  // op types in the model
  std::string detail;            // why it failed or is unsupported
  bool bound_inputs = false;     // inputs were bound as compile-time constants
  double seconds = 0;
};

struct Tolerance {
  double rtol;
  double atol;
};
// |actual - expected| <= atol + rtol * |expected|, per element; NaNs must match.
// f32 outputs: rtol 1e-3, atol 1e-5 (node tests) and 1e-4 (whole models);
// f16/bf16 outputs: rtol 1e-2, atol 1e-3.
Tolerance ToleranceFor(const std::string& suite, bool low_precision);

struct Counts {
  int passed = 0, failed = 0, unsupported = 0;
  int total() const { return passed + failed + unsupported; }
};

// Where a case runs: kiln's CPU reference on the imported graph, or a bundle compiled
// for the local GPU (fp32 storage, so the node tests' fp32 tolerances apply; fp16
// and bf16 models keep their dtypes) and run there.
enum class Device { kReference, kGpu };

// Runs every case under `data_dir/suite` whose name contains `filter`.
std::vector<CaseResult> RunSuite(const std::string& data_dir, const std::string& suite,
                                 const std::string& filter = "", bool verbose = false,
                                 Device device = Device::kReference);

// Per-suite and per-op tables as printable text.
std::string FormatReport(const std::vector<CaseResult>& results, bool per_op);

}  // namespace kiln::conformance
