// ONNX importer: .onnx file (with external data beside it) -> kiln Graph with
// every value statically typed and constant subgraphs folded.
//
// Steps: parse; check the opset range (1..21); fix dynamic input dims from
// `input_shapes`; rewrite Upsample and Ifs on constants (frontend/proto_rewrites.h);
// expand ONNX function ops kiln lacks into their bodies (frontend/expand_functions.h); report every unsupported op at once; run the ONNX
// checker on the model as given (when
// the model's opset is within what the installed ONNX library knows); build the
// graph (initializers -> constants, weights listed as graph inputs -> constants);
// rewrite older-opset node forms (frontend/legacy_ops.h); kiln shape inference
// with constant folding; then ONNX shape inference as a cross-check (only after
// kiln's accepted the graph: ONNX 1.12's crashes on some malformed models);
// dead-code elimination; the verifier.
//
// float64 is computed in float32: DOUBLE inputs, outputs, initializers, constants
// and Cast targets import as f32 (the bundle's signature says f32).
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "onnx/onnx_pb.h"

namespace kiln {

struct ImportOptions {
  // Static shapes for inputs with dynamic dims, e.g. {"input_ids": {1, 128}}.
  std::map<std::string, Shape> input_shapes;
  // Values of named dynamic dims, e.g. {"batch": 2, "seq": 64}: every input dim of
  // that name (ONNX dim_param) takes it. A name no dynamic dim has is an error, and
  // so is a dim left unknown (the error names all of them).
  std::map<std::string, int64_t> dims;
  // Named dynamic dims compiled for a range of values (`--dim seq=1..512`, issue 34):
  // every input dim of that name is the symbol, and the graph is dynamic
  // (graph/symbolic_shapes.h). Names must be identifiers; 1 <= min <= max.
  std::vector<DimSymbol> dim_ranges;
  // Inputs given a shape with ranges (`--input-shape input_ids=1..32x1..512`): per
  // dim {min, max, opt}, min == max for a fixed size. A ranged dim is the symbol its ONNX
  // dim_param names (so inputs sharing `seq` share it), or `<input>_<d>` for an
  // unnamed one, and joins dim_ranges; the model must leave that dim dynamic.
  std::map<std::string, std::vector<SizeRange>> input_shape_ranges;
  // Inputs bound to fixed values at compile time: they become constants and are
  // no longer graph inputs (needed where a model computes shapes from an input).
  std::map<std::string, Tensor> constant_inputs;
  // Run ONNX's own checker and shape inference first.
  bool run_onnx_checker = true;
};

inline constexpr int64_t kMinOpset = 1;
inline constexpr int64_t kMaxOpset = 21;

// Reads and parses an .onnx file; errors name the file.
absl::StatusOr<onnx::ModelProto> ReadOnnxModel(const std::string& path);

// Imports a model; `base_dir` is where external-data files are looked up.
absl::StatusOr<std::unique_ptr<Graph>> ImportOnnxModel(onnx::ModelProto model, const std::string& base_dir,
                                                       const ImportOptions& options = {});

// ReadOnnxModel + ImportOnnxModel; every error message starts with the file path.
absl::StatusOr<std::unique_ptr<Graph>> ImportOnnxFile(const std::string& path,
                                                      const ImportOptions& options = {});

// The folder of a model file, where its external data lives ("." for a bare name).
std::string ModelDir(const std::string& path);

// The default-domain opset a model imports (ONNX semantics: 1 when absent).
int64_t DefaultOpset(const onnx::ModelProto& model);

// Ops of the model that kiln cannot import, grouped by (domain, op type): ops kiln
// has no definition of, after ONNX function ops are expanded into their bodies
// (frontend/expand_functions.h; a body's unsupported ops are reported under their
// own names).
struct UnsupportedOp {
  std::string domain;
  std::string op_type;
  int64_t opset = 0;
  std::vector<std::string> node_names;
};
std::vector<UnsupportedOp> FindUnsupportedOps(const onnx::ModelProto& model);
// A multi-line report of FindUnsupportedOps (empty when there are none).
std::string FormatUnsupportedOps(const std::vector<UnsupportedOp>& ops);

// Parses "1x128" into {1, 128}.
absl::StatusOr<Shape> ParseShapeSpec(const std::string& text);

}  // namespace kiln
