// Global and windowed pools: inference.
#include "graph/ops/pooling.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {

absl::Status InferGlobalPool(Node& node) {
  const Value* x = node.input(0);
  KILN_RETURN_IF_ERROR(RequireFloat(node, 0));
  if (x->rank() < 2) {
    return node.Error(absl::StrCat("input X must be [N, C, spatial...], got ", x->TypeString()));
  }
  Shape out = x->shape();
  for (size_t i = 2; i < out.size(); ++i) out[i] = 1;
  node.output(0)->SetType(x->dtype(), out);
  return absl::OkStatus();
}

}  // namespace kiln::ops
