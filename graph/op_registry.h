// Op definitions: for each op type, its arity, attribute checks + shape inference,
// and its CPU reference evaluation. One op per file under graph/ops/.
//
// An op file registers itself with
//   KILN_OP_FILE(file_stem) { registry.Register({...}); }
// where file_stem is the file's name without ".cc"; the build generates the list
// that calls every file's registration function (see graph/CMakeLists.txt).
#pragma once

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace kiln {

// Checks attributes and input types of `node` and sets the dtype and static shape of
// each output. Input values are typed; constant inputs carry their data
// (Value::constant_or_null), which ops such as Reshape need. Errors name the node.
using InferFn = absl::Status (*)(Node& node);

// Computes the outputs on the CPU. `inputs[i]` is nullptr for an absent optional
// input; `outputs` arrive allocated (zero-filled) with the types inference gave.
// Floating-point math is done in fp32 (f16/bf16 are converted on load and store).
using EvalFn = absl::Status (*)(const Node& node, absl::Span<const Tensor* const> inputs,
                                absl::Span<Tensor> outputs);

struct OpDef {
  std::string name;
  int min_inputs = 1;
  int max_inputs = 1;  // kVariadic for no limit
  int min_outputs = 1;
  int max_outputs = 1;
  InferFn infer = nullptr;
  EvalFn eval = nullptr;
  // The output is the input's bytes under another shape (Reshape, Flatten, ...);
  // the memory planner may alias them.
  bool is_view = false;
  // Output element i depends only on input element i (after broadcasting).
  bool is_elementwise = false;

  static constexpr int kVariadic = 1 << 20;
};

class OpRegistry {
 public:
  // The registry with every op of graph/ops/ registered.
  static const OpRegistry& Global();

  void Register(OpDef def);
  const OpDef* Find(absl::string_view op_type) const;
  std::vector<const OpDef*> All() const;  // sorted by name

 private:
  absl::flat_hash_map<std::string, OpDef> ops_;
};

// Checks arity against the definition, then runs its inference.
absl::Status InferNode(Node& node);

}  // namespace kiln

#define KILN_OP_FILE(stem) \
  namespace kiln {         \
  void KilnRegisterOpFile_##stem(OpRegistry& registry);  \
  }                        \
  void kiln::KilnRegisterOpFile_##stem(OpRegistry& registry)
