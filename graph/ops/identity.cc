// Identity: the output is the input.
#include "graph/op_registry.h"
#include "graph/ops/data_movement.h"
#include "graph/ops/infer_common.h"

KILN_OP_FILE(identity) {
  registry.Register({.name = "Identity", .infer = ops::InferSameAsInput, .eval = ops::EvalView, .is_view = true});
}
