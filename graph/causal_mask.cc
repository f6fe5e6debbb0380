#include "graph/causal_mask.h"

#include <vector>

namespace kiln {

bool MatchesCausalMask(const Tensor& t, bool* additive, std::optional<float>* fill) {
  const Shape& s = t.shape();
  if (s.size() < 2) return false;
  const int64_t rows = s[s.size() - 2], cols = s.back(), plane = rows * cols;
  if (plane == 0 || t.numel() % plane != 0) return false;
  const int64_t planes = t.numel() / plane;
  if (t.dtype() == DType::kBool || t.dtype() == DType::kInt64) {
    *additive = false;
    const std::vector<int64_t> data = t.ToInt64();
    for (int64_t p = 0; p < planes; ++p) {
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          if (data[p * plane + i * cols + j] != (j <= i ? 1 : 0)) return false;
        }
      }
    }
    return true;
  }
  if (!IsFloating(t.dtype())) return false;
  *additive = true;
  const std::vector<float> data = t.ToFloat();
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        const float x = data[p * plane + i * cols + j];
        if (j <= i) {
          if (x != 0.f) return false;
          continue;
        }
        if (!fill->has_value()) {
          if (!(x <= -1e30f)) return false;
          *fill = x;
        }
        if (x != **fill) return false;
      }
    }
  }
  return true;
}

}  // namespace kiln
