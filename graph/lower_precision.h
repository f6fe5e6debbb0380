// LowerPrecision ("lower-precision"): lowers a graph's f32 storage to f16 or bf16
// (the bundle's --precision), so that the memory plan, the weight section and every
// backend see one lowered graph. Math stays fp32 in the evaluators and kernels: only
// what is stored (activations, weights) changes.
//
// Preconditions: every value typed (InferShapes has run), nodes in topological
// order. Storage kFloat32 is a no-op, and so is a graph without f32 values (Run
// returns false). Node order is kept; inserted Casts sit next to their value.
//
// Rules, for a storage type S (kFloat16 or kBFloat16):
//  - Every f32 value inside the graph becomes S: node outputs are retyped by
//    re-running inference (InferShapes, fold_constants = false), f32 constants are
//    converted (round to nearest even). A constant that some use must keep in f32
//    (see below) keeps its name and data and gets an S twin "<name>_f16"/"_bf16".
//  - The API boundary keeps its dtypes. An f32 graph input x stays f32 and a
//    Cast(to = S) "<x>_f16" after it feeds its consumers. An f32 graph output y keeps
//    its name and f32 type: its producer writes "<y>_f16" (which other consumers
//    read) and a final Cast(to = FLOAT) writes y. Graph inputs or constants that are
//    graph outputs are left alone.
//  - Attributes that give an output dtype are rewritten from FLOAT to S: Cast `to`,
//    ConstantOfShape `value` (also its default f32 zero), Constant `value` /
//    `value_float` / `value_floats`, and LayerNormalization `stash_type` when the
//    Mean/InvStdDev outputs exist. (graph/ops has no EyeLike/Random* ops.) Such a
//    node is left in f32 when every use of its output is a kept-f32 input below.
//  - Inputs that ONNX types separately from the data, and that must keep full
//    precision, stay f32 (a Cast(to = FLOAT) "<v>_f32" is inserted when their value
//    is lowered):
//      Resize    roi (1), scales (2)   coordinates: fp16 would shift sample points
//      Pow       exponent (1)          errors in the exponent scale with log(x)
//      OneHot    indices (0), depth (1)  integers above 2048 are not exact in fp16
//      Dropout   ratio (1)             a probability, not data
//    BatchNormalization's scale/B/mean/var (T1/T2 since opset 15) are lowered like
//    other weights: per-channel, well inside fp16 range, and epsilon (an attribute)
//    keeps the variance away from fp16's small values.
//
// f32 islands (fp16 range). Nodes named in `float32_nodes` run in f32: they read
// the f32 form of their floating inputs (a Cast to FLOAT is inserted where the value
// is lowered), write f32 outputs, and lowered readers of those outputs read a
// Cast(to = S) "<y>_f16" of them. NodesOutsideRange finds such nodes by running the
// graph on calibration inputs: kiln compile --precision fp16 --calibrate.
//
// Index arithmetic also stays f32: the element-wise chain that computes a float
// value which a Cast turns into integers (T5's relative-position buckets: a distance
// cast to float, divided, its log scaled, cast back to an index). Rounding each step
// to f16 moves values across the integer boundaries, so the index, not just the
// value, changes. Run adds those nodes to the islands (IndexArithmeticNodes).
//
// Afterwards no f32 value remains except graph inputs/outputs, kept constants and
// the outputs of inserted or kept Casts; Run fails (Internal) naming any other, and
// fails with the verifier's message if the result is structurally broken.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/dtype.h"
#include "absl/container/flat_hash_set.h"
#include "graph/evaluate.h"
#include "graph/graph.h"

namespace kiln {

class LowerPrecision {
 public:
  // `storage`: kFloat16, kBFloat16, or kFloat32 (no-op). Other dtypes make Run fail.
  explicit LowerPrecision(DType storage, absl::flat_hash_set<std::string> float32_nodes = {})
      : storage_(storage), float32_nodes_(std::move(float32_nodes)) {}
  absl::string_view name() const { return "lower-precision"; }
  absl::StatusOr<bool> Run(Graph& graph);

  // True when input `index` of an `op_type` node keeps f32 (the table above).
  static bool KeepsFloat32(absl::string_view op_type, int index);

 private:
  DType storage_;
  absl::flat_hash_set<std::string> float32_nodes_;
};

// The element-wise nodes (and Casts to float) whose f32 output flows, through
// element-wise nodes only, into a Cast to an integer or bool type.
absl::flat_hash_set<std::string> IndexArithmeticNodes(const Graph& graph);

// The names of the nodes that read or write a floating value whose largest
// magnitude exceeds `limit` when `graph` runs on the CPU reference with `feeds`
// (the calibration inputs). With limit 16384 (a quarter of fp16's largest finite
// value, 65504) these are the nodes to keep in f32 under fp16 storage.
absl::StatusOr<absl::flat_hash_set<std::string>> NodesOutsideRange(const Graph& graph, const TensorMap& feeds,
                                                                   float limit);

}  // namespace kiln
