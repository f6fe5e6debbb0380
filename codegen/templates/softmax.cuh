// Softmax / LogSoftmax template (codegen/ops/reduce.cc), numerically stable
// (max-subtracted), fp32 math. Needs vector.cuh. Two forms:
//
// kStrided (the axis is not the innermost dim): one thread per (outer, inner) row
// walks the axis with stride kInner; the prefix defines kiln_in_t, kiln_out_t,
// kRows (outer * inner), kLen, kInner, kiln_load(p, off), kiln_store(p, off, v).
//
// Otherwise rows of kLen contiguous elements (the last axis), each row handled by a
// group of kThreads threads: a power of two <= 32 (kRowsPerBlock rows per block,
// warp shuffles only) or the whole block (kThreads == blockDim.x > 32, one row per
// block, shuffles then shared memory). Each thread takes vectors of V elements at
// (sub + k * kThreads) * V. With kCache the row stays in registers (kNV vectors per
// thread): read once, written once; without it (very long rows) an online max/sum
// pass, then a pass that writes. The prefix defines kLen, kRows, kThreads,
// kRowsPerBlock, kVec, kCache, kLog, the kernel's argument struct kiln_args and
//   kiln_row_load<V, kFirst>(a, row, j, float (&x)[V])   elements j..j+V-1 of the
//       row (the group's element-wise prologue applied; kFirst: also stores the
//       group's other outputs),
//   kiln_row_store<V>(a, row, j, const float (&y)[V]),
//   kiln_vec_ok(a)   whether every pointer allows kVec-wide access.
#if KILN_SOFTMAX_STRIDED
static __device__ __forceinline__ void kiln_softmax_strided(kiln_out_t* __restrict__ out,
                                                            const kiln_in_t* __restrict__ in) {
  for (kiln_idx_t row = (kiln_idx_t)blockIdx.x * blockDim.x + threadIdx.x; row < kRows;
       row += (kiln_idx_t)gridDim.x * blockDim.x) {
    const kiln_idx_t base = (row / kInner) * kLen * kInner + row % kInner;
    float m = -__int_as_float(0x7f800000);
    for (kiln_idx_t j = 0; j < kLen; ++j) m = fmaxf(m, kiln_load(in, base + j * kInner));
    float s = 0.f;
    for (kiln_idx_t j = 0; j < kLen; ++j) s += expf(kiln_load(in, base + j * kInner) - m);
    const float ls = logf(s);
    for (kiln_idx_t j = 0; j < kLen; ++j) {
      const float x = kiln_load(in, base + j * kInner) - m;
      kiln_store(out, base + j * kInner, kLog ? x - ls : expf(x) / s);
    }
  }
}
#else
template <int V, bool kCached>
static __device__ __forceinline__ void kiln_softmax_rows(const kiln_args& a) {
  // kLen % V == 0; kLen may be read at run time (a dynamic bundle's), at most kMaxLen.
  const kiln_idx_t kVecs = kLen / V;
  constexpr int kNV = kMaxLen / V > 0 ? (int)((kMaxLen / V + kThreads - 1) / kThreads) : 1;
  __shared__ float smem[32];
  const int sub = kThreads > 32 ? (int)threadIdx.x : (int)threadIdx.x % kThreads;
  const int local_row = kThreads > 32 ? 0 : (int)threadIdx.x / kThreads;
  const float kNegInf = -__int_as_float(0x7f800000);
  for (kiln_idx_t r0 = (kiln_idx_t)blockIdx.x * kRowsPerBlock; r0 < kRows; r0 += (kiln_idx_t)gridDim.x * kRowsPerBlock) {
    const kiln_idx_t row = r0 + local_row;
    const bool live = row < kRows;
    if constexpr (kCached) {
      float x[kNV][V];
      float m = kNegInf;
#pragma unroll
      for (int k = 0; k < kNV; ++k) {
        const kiln_idx_t jv = sub + (kiln_idx_t)k * kThreads;
        if (live && jv < kVecs) {
          kiln_row_load<V, true>(a, row, jv * V, x[k]);
#pragma unroll
          for (int e = 0; e < V; ++e) m = fmaxf(m, x[k][e]);
        }
      }
      m = kiln_vec_group_reduce<kThreads>(m, kiln_vec_max(), smem);
      float s = 0.f;
#pragma unroll
      for (int k = 0; k < kNV; ++k) {
        const kiln_idx_t jv = sub + (kiln_idx_t)k * kThreads;
        if (live && jv < kVecs) {
#pragma unroll
          for (int e = 0; e < V; ++e) {
            const float d = x[k][e] - m;
            const float p = expf(d);
            s += p;
            x[k][e] = kLog ? d : p;
          }
        }
      }
      s = kiln_vec_group_reduce<kThreads>(s, kiln_vec_sum(), smem);
      const float t = kLog ? logf(s) : 1.f / s;
#pragma unroll
      for (int k = 0; k < kNV; ++k) {
        const kiln_idx_t jv = sub + (kiln_idx_t)k * kThreads;
        if (live && jv < kVecs) {
#pragma unroll
          for (int e = 0; e < V; ++e) x[k][e] = kLog ? x[k][e] - t : x[k][e] * t;
          kiln_row_store<V>(a, row, jv * V, x[k]);
        }
      }
    } else {
      // Online max and sum: s is the sum of exp(x - m) for the running max m.
      float m = kNegInf, s = 0.f;
      if (live) {
        for (kiln_idx_t jv = sub; jv < kVecs; jv += kThreads) {
          float x[V];
          kiln_row_load<V, true>(a, row, jv * V, x);
#pragma unroll
          for (int e = 0; e < V; ++e) {
            if (x[e] > m) {
              s = s * expf(m - x[e]) + 1.f;
              m = x[e];
            } else {
              s += m == kNegInf ? 1.f : expf(x[e] - m);  // x == m == -inf: counted, weighs 0 later
            }
          }
        }
      }
      const float mr = kiln_vec_group_reduce<kThreads>(m, kiln_vec_max(), smem);
      s = kiln_vec_group_reduce<kThreads>(m == mr ? s : s * expf(m - mr), kiln_vec_sum(), smem);
      const float t = kLog ? logf(s) : 1.f / s;
      if (live) {
        for (kiln_idx_t jv = sub; jv < kVecs; jv += kThreads) {
          float x[V];
          kiln_row_load<V, false>(a, row, jv * V, x);
#pragma unroll
          for (int e = 0; e < V; ++e) x[e] = kLog ? x[e] - mr - t : expf(x[e] - mr) * t;
          kiln_row_store<V>(a, row, jv * V, x);
        }
      }
    }
  }
}

// Unaligned pointers (a view at an odd offset) take the compact streaming form.
static __device__ __forceinline__ void kiln_softmax(const kiln_args& a) {
  if constexpr (kVec > 1) {
    if (!kiln_vec_ok(a)) {
      kiln_softmax_rows<1, false>(a);
      return;
    }
  }
  kiln_softmax_rows<kVec, kCache>(a);
}
#endif
