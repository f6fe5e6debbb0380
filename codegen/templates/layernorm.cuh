// LayerNormalization template (codegen/ops/reduce.cc): rows of kSize contiguous
// elements (the normalised dims), fp32 math, two-pass mean and variance as the CPU
// reference, y = (x - mean) * inv_std * scale + bias. With kRms (RMSNormalization)
// the mean is 0: one pass for mean(x^2), y = x * inv_rms * scale. Needs vector.cuh.
//
// Each row is handled by a group of kThreads threads: a power of two <= 32
// (kRowsPerBlock rows per block, warp shuffles only) or the whole block (kThreads ==
// blockDim.x > 32, one row per block, shuffles then shared memory). Each thread
// takes vectors of V elements at (sub + k * kThreads) * V. With kCache the row stays
// in registers (read once: x, and for a residual group the sum it computes and
// stores, never come back from memory); without it (very long rows) three passes.
// The prefix defines kSize, kRows, kThreads, kRowsPerBlock, kVec, kCache, kEpsilon,
// kRms, kHasBias, kHasStats, the kernel's argument struct kiln_args and
//   kiln_row_load<V, kFirst>(a, row, j, float (&x)[V])   x's elements j..j+V-1 (the
//       group's element-wise prologue applied; kFirst: also stores the group's other
//       outputs, e.g. the residual sum),
//   kiln_load_scale<V>(a, j, float (&s)[V]), kiln_load_bias<V>(a, j, float (&b)[V]),
//   kiln_row_store<V>(a, row, j, const float (&y)[V]),
//   kiln_store_stats(a, row, mean, inv_std)   (when kHasStats),
//   kiln_vec_ok(a)   whether every pointer allows kVec-wide access.
template <int V>
static __device__ __forceinline__ void kiln_ln_finish(const kiln_args& a, kiln_idx_t row, kiln_idx_t j, float mu,
                                                      float inv, float (&x)[V]) {
  float s[V];
  kiln_load_scale<V>(a, j, s);
  float b[V];
  if constexpr (kHasBias) kiln_load_bias<V>(a, j, b);
#pragma unroll
  for (int e = 0; e < V; ++e) {
    x[e] = (x[e] - mu) * inv * s[e];
    if constexpr (kHasBias) x[e] += b[e];
  }
  kiln_row_store<V>(a, row, j, x);
}

template <int V, bool kCached>
static __device__ __forceinline__ void kiln_layernorm_rows(const kiln_args& a) {
  constexpr kiln_idx_t kVecs = kSize / V;  // kSize % V == 0
  constexpr int kNV = kVecs > 0 ? (int)((kVecs + kThreads - 1) / kThreads) : 1;
  __shared__ float smem[32];
  const int sub = kThreads > 32 ? (int)threadIdx.x : (int)threadIdx.x % kThreads;
  const int local_row = kThreads > 32 ? 0 : (int)threadIdx.x / kThreads;
  for (kiln_idx_t r0 = (kiln_idx_t)blockIdx.x * kRowsPerBlock; r0 < kRows; r0 += (kiln_idx_t)gridDim.x * kRowsPerBlock) {
    const kiln_idx_t row = r0 + local_row;
    const bool live = row < kRows;
    float mu, inv;
    if constexpr (kCached) {
      float x[kNV][V];
      float s = 0.f;
#pragma unroll
      for (int k = 0; k < kNV; ++k) {
        const kiln_idx_t jv = sub + (kiln_idx_t)k * kThreads;
        if (live && jv < kVecs) {
          kiln_row_load<V, true>(a, row, jv * V, x[k]);
#pragma unroll
          for (int e = 0; e < V; ++e) s += x[k][e];
        }
      }
      if constexpr (kRms) {
        mu = 0.f;
      } else {
        mu = kiln_vec_group_reduce<kThreads>(s, kiln_vec_sum(), smem) / (float)kSize;
      }
      float q = 0.f;
#pragma unroll
      for (int k = 0; k < kNV; ++k) {
        const kiln_idx_t jv = sub + (kiln_idx_t)k * kThreads;
        if (live && jv < kVecs) {
#pragma unroll
          for (int e = 0; e < V; ++e) {
            const float d = x[k][e] - mu;
            q += d * d;
          }
        }
      }
      inv = 1.f / sqrtf(kiln_vec_group_reduce<kThreads>(q, kiln_vec_sum(), smem) / (float)kSize + kEpsilon);
#pragma unroll
      for (int k = 0; k < kNV; ++k) {
        const kiln_idx_t jv = sub + (kiln_idx_t)k * kThreads;
        if (live && jv < kVecs) kiln_ln_finish<V>(a, row, jv * V, mu, inv, x[k]);
      }
    } else {
      float s = 0.f;
      if constexpr (kRms) {
        mu = 0.f;
      } else {
        if (live) {
          for (kiln_idx_t jv = sub; jv < kVecs; jv += kThreads) {
            float x[V];
            kiln_row_load<V, true>(a, row, jv * V, x);
#pragma unroll
            for (int e = 0; e < V; ++e) s += x[e];
          }
        }
        mu = kiln_vec_group_reduce<kThreads>(s, kiln_vec_sum(), smem) / (float)kSize;
      }
      float q = 0.f;
      if (live) {
        for (kiln_idx_t jv = sub; jv < kVecs; jv += kThreads) {
          float x[V];
          kiln_row_load<V, kRms>(a, row, jv * V, x);
#pragma unroll
          for (int e = 0; e < V; ++e) {
            const float d = x[e] - mu;
            q += d * d;
          }
        }
      }
      inv = 1.f / sqrtf(kiln_vec_group_reduce<kThreads>(q, kiln_vec_sum(), smem) / (float)kSize + kEpsilon);
      if (live) {
        for (kiln_idx_t jv = sub; jv < kVecs; jv += kThreads) {
          float x[V];
          kiln_row_load<V, false>(a, row, jv * V, x);
          kiln_ln_finish<V>(a, row, jv * V, mu, inv, x);
        }
      }
    }
    if constexpr (kHasStats) {
      if (live && sub == 0) kiln_store_stats(a, row, mu, inv);
    }
  }
}

// Unaligned pointers (a view at an odd offset) take the compact streaming form.
static __device__ __forceinline__ void kiln_layernorm(const kiln_args& a) {
  if constexpr (kVec > 1) {
    if (!kiln_vec_ok(a)) {
      kiln_layernorm_rows<1, false>(a);
      return;
    }
  }
  kiln_layernorm_rows<kVec, kCache>(a);
}
