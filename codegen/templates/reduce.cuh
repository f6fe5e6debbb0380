// Reduction template (codegen/ops/reduce.cc). Needs vector.cuh. The generated prefix
// defines:
//   kiln_in_t, kiln_out_t, kiln_acc_t, kiln_idx_t     types
//   kRows, kLen                                       output count, reduced count
//   kRowMode, kThreads, kRowsPerBlock, kVec           form (below)
//   kiln_row_base(row), kiln_elem(j)                  input offsets of an output's first
//                                                     element and of reduced element j
//   kiln_load(p, off), kiln_identity(), kiln_map(x), kiln_combine(a, b),
//   kiln_store(out, row, acc)                         (applies the finishing map)
// kRowMode (the innermost non-unit dim is reduced): each output is combined by a
// group of kThreads threads, a power of two <= 32 (kRowsPerBlock outputs per block,
// warp shuffles) or the whole block (kThreads == blockDim.x > 32, shuffles then
// shared memory). With kVec > 1 the reduced elements are contiguous (kiln_elem(j) ==
// j), every row starts at a multiple of kVec and threads load kVec at a time.
// Otherwise one thread per output walks its reduced elements (adjacent threads read
// adjacent inputs when the innermost dim is kept).
struct kiln_red_combine {
  __device__ __forceinline__ kiln_acc_t operator()(kiln_acc_t a, kiln_acc_t b) const { return kiln_combine(a, b); }
};

template <int V>
static __device__ __forceinline__ void kiln_reduce_rows(kiln_out_t* __restrict__ out, const kiln_in_t* __restrict__ in,
                                                        kiln_idx_t rows) {
  __shared__ kiln_acc_t smem[32];
  const int sub = kThreads > 32 ? (int)threadIdx.x : (int)threadIdx.x % kThreads;
  const int local_row = kThreads > 32 ? 0 : (int)threadIdx.x / kThreads;
  for (kiln_idx_t r0 = (kiln_idx_t)blockIdx.x * kRowsPerBlock; r0 < rows; r0 += (kiln_idx_t)gridDim.x * kRowsPerBlock) {
    const kiln_idx_t row = r0 + local_row;
    kiln_acc_t acc = kiln_identity();
    if (row < rows) {
      const kiln_in_t* p = in + kiln_row_base(row);
      if constexpr (V > 1) {
#pragma unroll 4
        for (kiln_idx_t j = (kiln_idx_t)sub * V; j < kLen; j += (kiln_idx_t)kThreads * V) {
          const kiln_vec_pack<kiln_in_t, V> v = kiln_vec_ld<V>(p + j);
#pragma unroll
          for (int e = 0; e < V; ++e) acc = kiln_combine(acc, kiln_map(kiln_load(v.v, e)));
        }
      } else {
#pragma unroll 4
        for (kiln_idx_t j = sub; j < kLen; j += kThreads) acc = kiln_combine(acc, kiln_map(kiln_load(p, kiln_elem(j))));
      }
    }
    acc = kiln_vec_group_reduce<kThreads>(acc, kiln_red_combine(), smem);
    if (row < rows && sub == 0) kiln_store(out, row, acc);
  }
}

// `rows`: kRows, or fewer (a dynamic bundle's run, read from its kiln_dims).
static __device__ __forceinline__ void kiln_reduce(kiln_out_t* __restrict__ out, const kiln_in_t* __restrict__ in,
                                                   kiln_idx_t rows) {
  if constexpr (kRowMode) {
    if constexpr (kVec > 1) {
      if (kiln_vec_aligned(in, kVec * sizeof(kiln_in_t))) {
        kiln_reduce_rows<kVec>(out, in, rows);
        return;
      }
    }
    kiln_reduce_rows<1>(out, in, rows);
  } else {
    for (kiln_idx_t row = (kiln_idx_t)blockIdx.x * blockDim.x + threadIdx.x; row < rows;
         row += (kiln_idx_t)gridDim.x * blockDim.x) {
      const kiln_in_t* p = in + kiln_row_base(row);
      kiln_acc_t acc = kiln_identity();
      for (kiln_idx_t j = 0; j < kLen; ++j) acc = kiln_combine(acc, kiln_map(kiln_load(p, kiln_elem(j))));
      kiln_store(out, row, acc);
    }
  }
}
