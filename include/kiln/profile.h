// Per-step profile of a kiln Session (Session::Profile) and its table / JSON forms.
#pragma once

#include <string>
#include <vector>

namespace kiln {

struct StepProfile {
  int index = 0;                        // step index in execution order
  std::string kernel;                   // e.g. "cpu_ref:MatMul"
  std::string op_type;                  // the step's op
  std::vector<std::string> onnx_nodes;  // the ONNX nodes it came from
  double median_ms = 0;                 // median over the iterations: GPU time (CUDA events
                                        // between steps run back to back), CPU: wall time
  double share = 0;                     // median_ms / steps_total_ms (0..1)
};

struct ProfileReport {
  std::string model_path;
  std::string device;           // "cpu"
  int iterations = 0;
  double run_median_ms = 0;     // median of whole Run calls (includes input/output copies)
  double steps_total_ms = 0;    // sum of the steps' medians (the shares' denominator)
  std::vector<StepProfile> steps;  // in step order
};

// One line per step sorted by time (slowest first): step, ms, %, kernel, ONNX nodes;
// then the total.
std::string FormatProfileTable(const ProfileReport& report);
// The same data as JSON: {"model", "device", "iterations", "run_median_ms",
// "steps_total_ms", "steps": [{"index", "kernel", "op_type", "onnx_nodes",
// "median_ms", "share"}...]} with steps sorted as in the table.
std::string ProfileToJson(const ProfileReport& report);

}  // namespace kiln
