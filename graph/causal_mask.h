// Causal masks as data: the masks attention reads to hide the keys after each query
// row. Shared by the attention codegen (a constant mask is computed from col <= row
// instead of loaded) and fusion's mark-causal-masks (a mask built from the sizes
// alone, checked at sampled sizes).
#pragma once

#include <optional>

#include "graph/tensor.h"

namespace kiln {

struct CausalMask {
  bool additive = false;
  float fill = 0;  // the additive mask's value past the diagonal
};

// Whether `t` ([..., rows, cols], rank >= 2) hides exactly the keys after each query
// row, in every plane of its leading dims: a condition (bool or int64), 1 where col <=
// row and 0 elsewhere (torch's tril masks under a Where), or an additive mask (a
// floating dtype), 0 where col <= row and one value <= -1e30 elsewhere (torch's SDPA
// masks in -inf, or fp32's least; fp16's least, -65504, is not taken). `*fill` is that value: when it holds one, the
// mask's must equal it; when it is empty and the mask has a place past the diagonal
// it takes the mask's (a mask of one column has none: it is all zeros).
bool MatchesCausalMask(const Tensor& t, bool* additive, std::optional<float>* fill);

}  // namespace kiln
