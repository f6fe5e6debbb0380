// Parsing of --input-shape, --input and --bind values shared by the subcommands.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/dtype.h"
#include "graph/evaluate.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace kiln::cli {

// "name=1x128" values -> map; errors name the bad value. With `ranges`, also shapes
// with ranges, "input_ids=1..32x1..512" (ImportOptions::input_shape_ranges: per dim
// {min, max, opt}: "1..512:128" tunes for 128); without, a range is an error saying
// where ranges go.
absl::StatusOr<std::map<std::string, Shape>> ParseInputShapes(
    const std::vector<std::string>& specs, std::map<std::string, std::vector<SizeRange>>* ranges = nullptr);
// --dim NAME=N values (named dynamic dims, ImportOptions::dims). With `ranges`, also
// NAME=LO..HI or NAME=LO..HI:OPT (a dim compiled for a range, ImportOptions::dim_ranges;
// OPT the size to tune for), in the order given; without, a range is an error saying
// where ranges go.
absl::StatusOr<std::map<std::string, int64_t>> ParseDims(const std::vector<std::string>& specs,
                                                         std::vector<DimSymbol>* ranges = nullptr);

// "name=SOURCE" -> (name, SOURCE).
absl::StatusOr<std::pair<std::string, std::string>> SplitAssignment(const std::string& spec, const char* flag);

// A tensor for an input of type (dtype, shape) from SOURCE: a .npy or .pb file, or
// a generator: `arange` (arange(n)/n, as ONNX's backend runner feeds the light
// models), `zeros`, `ones`, `random[:SEED]` (uniform [0, 1)).
absl::StatusOr<Tensor> MakeInput(const std::string& name, const std::string& source, DType dtype, const Shape& shape);
// Whether SOURCE names a generator (arange, zeros, ones, random[:SEED]) rather than a file.
bool IsInputGenerator(const std::string& source);
// A tensor read from the file `source` as an input of type (dtype, shape): float data
// converted to the input's float dtype; InvalidArgument naming the input otherwise.
absl::StatusOr<Tensor> ConformInput(const std::string& name, const std::string& source, Tensor t, DType dtype,
                                    const Shape& shape);

// The calibration inputs of `kiln compile --calibrate NAME=SOURCE` (CompileOptions::
// calibration): a function that builds every input of the imported graph from
// `sources` (name -> SOURCE as for MakeInput); InvalidArgument naming an unknown or a
// missing input.
std::function<absl::StatusOr<TensorMap>(const Graph&)> CalibrationInputs(std::map<std::string, std::string> sources);

}  // namespace kiln::cli
