// Reduction template (codegen/ops/reduce.cc). The generated prefix defines:
//   kiln_in_t, kiln_out_t, kiln_acc_t, kiln_idx_t     types
//   kRows, kLen, kBlockPerRow                         output count, reduced count, form
//   kiln_row_base(row), kiln_elem(j)                  input offsets of an output's first
//                                                     element and of reduced element j
//   kiln_load(p, off), kiln_identity(), kiln_map(x), kiln_combine(a, b),
//   kiln_store(out, row, acc)                         (applies the finishing map)
// kBlockPerRow: one block per output, threads stride over the reduced elements and
// combine through shared memory (blockDim.x is a power of two <= 1024). Otherwise one
// thread per output walks its reduced elements (adjacent threads read adjacent
// inputs when the innermost dim is kept).
static __device__ __forceinline__ kiln_acc_t kiln_block_combine(kiln_acc_t v, kiln_acc_t* smem) {
  smem[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) smem[threadIdx.x] = kiln_combine(smem[threadIdx.x], smem[threadIdx.x + s]);
    __syncthreads();
  }
  const kiln_acc_t r = smem[0];
  __syncthreads();
  return r;
}

static __device__ __forceinline__ void kiln_reduce(kiln_out_t* __restrict__ out, const kiln_in_t* __restrict__ in) {
  if constexpr (kBlockPerRow) {
    __shared__ kiln_acc_t smem[1024];
    for (kiln_idx_t row = blockIdx.x; row < kRows; row += gridDim.x) {
      const kiln_in_t* p = in + kiln_row_base(row);
      kiln_acc_t acc = kiln_identity();
      for (kiln_idx_t j = threadIdx.x; j < kLen; j += blockDim.x) acc = kiln_combine(acc, kiln_map(kiln_load(p, kiln_elem(j))));
      acc = kiln_block_combine(acc, smem);
      if (threadIdx.x == 0) kiln_store(out, row, acc);
    }
  } else {
    for (kiln_idx_t row = (kiln_idx_t)blockIdx.x * blockDim.x + threadIdx.x; row < kRows;
         row += (kiln_idx_t)gridDim.x * blockDim.x) {
      const kiln_in_t* p = in + kiln_row_base(row);
      kiln_acc_t acc = kiln_identity();
      for (kiln_idx_t j = 0; j < kLen; ++j) acc = kiln_combine(acc, kiln_map(kiln_load(p, kiln_elem(j))));
      kiln_store(out, row, acc);
    }
  }
}
