// Size variants of a kernel with run-time sizes (codegen/kernel_launch.h,
// KernelLaunch::size_boxes): where the best configuration of a kernel depends on the
// sizes (the attention's tile rows and key groups), the bundle holds one launch per
// configuration and the runtime takes the one whose boxes hold the run's sizes. The
// ranges are cut at powers of two and each box's configuration is picked at its
// geometric middle. Internal to codegen.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "graph/dim_expr.h"

namespace kiln::codegen::ops {

struct SizeBox {
  std::vector<std::array<int64_t, 2>> ranges;  // [lo, hi] per dim symbol
  std::vector<int64_t> middle;                 // the value each symbol is picked at
};

// The boxes covering `symbols`' ranges once: each symbol that one of `exprs` depends on
// is cut at powers of two ([1, 1], [2, 3], [4, 7], ...), the others keep their range.
std::vector<SizeBox> PowerOfTwoBoxes(const std::vector<DimSymbol>& symbols, const std::vector<DimExpr>& exprs);

}  // namespace kiln::codegen::ops
