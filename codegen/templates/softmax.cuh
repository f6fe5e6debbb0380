// Softmax / LogSoftmax template (codegen/ops/reduce.cc), numerically stable
// (max-subtracted). The generated prefix defines kiln_in_t, kiln_out_t, kiln_idx_t,
// kRows (outer * inner), kLen (softmax axis), kInner (stride of the axis), kLog,
// kBlockPerRow (kInner == 1: one block per row, blockDim.x a power of two <= 1024;
// else one thread per row), kiln_load(p, off) -> float, kiln_store(p, off, float).
static __device__ __forceinline__ float kiln_sm_block(float v, float* smem, bool is_max) {
  smem[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float a = smem[threadIdx.x], b = smem[threadIdx.x + s];
      smem[threadIdx.x] = is_max ? fmaxf(a, b) : a + b;
    }
    __syncthreads();
  }
  const float r = smem[0];
  __syncthreads();
  return r;
}

static __device__ __forceinline__ void kiln_softmax(kiln_out_t* __restrict__ out, const kiln_in_t* __restrict__ in) {
  if constexpr (kBlockPerRow) {
    __shared__ float smem[1024];
    for (kiln_idx_t row = blockIdx.x; row < kRows; row += gridDim.x) {
      const kiln_idx_t base = row * kLen;
      float m = -__int_as_float(0x7f800000);
      for (kiln_idx_t j = threadIdx.x; j < kLen; j += blockDim.x) m = fmaxf(m, kiln_load(in, base + j));
      m = kiln_sm_block(m, smem, true);
      float s = 0.f;
      for (kiln_idx_t j = threadIdx.x; j < kLen; j += blockDim.x) s += expf(kiln_load(in, base + j) - m);
      s = kiln_sm_block(s, smem, false);
      const float ls = logf(s);
      for (kiln_idx_t j = threadIdx.x; j < kLen; j += blockDim.x) {
        const float x = kiln_load(in, base + j) - m;
        kiln_store(out, base + j, kLog ? x - ls : expf(x) / s);
      }
    }
  } else {
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
}
