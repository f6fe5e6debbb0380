// The kiln compiler driver: .onnx -> bundle. Imports the model, runs the pass
// pipeline (compiler/pipeline.h), tunes GEMMs (--tune), plans memory, assigns and
// compiles every step's kernel (compiler/assign_kernels.h) and assembles the bundle.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "compiler/compile_options.h"
#include "graph/graph.h"
#include "runtime/bundle.h"

namespace kiln {

// Builds the bundle contents of an imported graph (nodes topologically ordered, every
// value typed): canonicalisation, precision lowering (with calibration), fusion,
// memory plan, steps, kernel assignment. `source_path`/`source_bytes` describe the
// .onnx it came from. The fusion report lands in the manifest.
absl::StatusOr<BundleContents> BuildBundle(const Graph& graph, const CompileOptions& options,
                                           const std::string& source_path, const std::string& source_bytes);

// Imports `onnx_path` and builds its bundle.
absl::StatusOr<BundleContents> Compile(const std::string& onnx_path, const CompileOptions& options);

// Compile + WriteBundle(output_path).
absl::Status CompileToFile(const std::string& onnx_path, const std::string& output_path,
                           const CompileOptions& options);

}  // namespace kiln
