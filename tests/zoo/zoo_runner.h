// The model zoo runner: real exports of transformers / torchvision models (both torch
// exporters) in the ONNX backend test-data layout, compiled by kiln and run on the CPU
// backend or the GPU against onnxruntime's outputs.
//
// Layout (made by shared/zoo/export_zoo.py):
//   DIR/NAME.EXPORTER/model.onnx
//   DIR/NAME.EXPORTER/test_data_set_0/input_K.pb, output_K.pb  (named TensorProtos)
// Inputs with dynamic dims (the legacy exporter's batch / seq) take the shapes of the
// data set's inputs.
//
// A case is correct when every output has the expected shape and, over the output,
// max |got - want| <= kZooMaxRelDiff * max |want| and cosine(got, want) >=
// kZooMinCosine (fp16 storage, fp32 math).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/op_kernels.h"
#include "graph/tensor.h"

namespace kiln::zoo {

inline constexpr double kZooMaxRelDiff = 2e-2;
inline constexpr double kZooMinCosine = 0.9999;

enum class ZooDevice { kCpu, kGpu };

struct ZooOptions {
  ZooDevice device = ZooDevice::kCpu;
  std::string arch = "sm_90a";
  std::string precision = "fp16";
  codegen::MatMulGroups matmul_groups = codegen::MatMulGroups::kAuto;
  // Where the bundles are written ("": a folder under the system's temp dir).
  std::string work_dir;
};

struct ZooResult {
  std::string name;  // NAME.EXPORTER
  bool compiled = false;
  bool gpu_runnable = false;  // every step has a GPU kernel
  bool ran = false;
  bool correct = false;
  std::string detail;  // the first error, or the comparison's worst output
  double compile_seconds = 0;
  double max_rel_diff = 0;  // worst over the outputs: max |got - want| / max |want|
  double min_cosine = 1;    // worst over the outputs
  int kernels_unfused = 0;  // kernels per inference of the unfused baseline
  int kernels_fused = 0;    // steps of the fused bundle that launch work (no views)
  // Generated kernel launches whose body does not begin with the grid-dependency wait
  // (bundle::Launch.grid_dependency_wait): they are launched without overlap.
  int launches_without_wait = 0;
  std::map<std::string, int> groups;  // fused groups by pattern ("attention", ...)
};

// One tensor of a data set, with its TensorProto name.
struct Named {
  std::string name;
  Tensor tensor;
};
// input_K.pb / output_K.pb (prefix "input_" / "output_") of a data set folder, in K
// order.
absl::StatusOr<std::vector<Named>> ReadDataSet(const std::string& set_dir, const std::string& prefix);

// How close `got` is to `want`: max |got - want| / max |want| and the cosine.
struct Comparison {
  double rel_diff = 0;
  double cosine = 1;
  bool close() const { return rel_diff <= kZooMaxRelDiff && cosine >= kZooMinCosine; }
};
Comparison Compare(const Tensor& got, const Tensor& want);

// The case folders under `dir` (those holding a model.onnx), sorted by name.
std::vector<std::string> ListZooCases(const std::string& dir);

// Compiles `dir/name/model.onnx` and runs it on options.device against the expected
// outputs. Never fails: errors land in the result.
ZooResult RunZooCase(const std::string& dir, const std::string& name, const ZooOptions& options);

// One line per case: compiled, GPU-runnable, correct, error, cosine, kernels
// unfused -> fused, groups by kind; then the totals.
std::string FormatZooTable(const std::vector<ZooResult>& results, ZooDevice device);

// `data` resized to `shape` by repeating it along every dim (index i of a dim reads
// element i mod the data's size there): a truncated or tiled real input, for runs of
// a dynamic bundle at other sizes than the data set's.
Tensor ResizeByRepeating(const Tensor& data, const Shape& shape);

}  // namespace kiln::zoo
