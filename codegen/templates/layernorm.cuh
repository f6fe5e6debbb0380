// LayerNormalization template (codegen/ops/reduce.cc): one block per row of kSize
// contiguous elements (blockDim.x a power of two <= 1024); two-pass mean and variance
// in fp32, then y = (x - mean) * inv_std * scale + bias. The generated prefix defines
// kiln_x_t, kiln_y_t, kiln_scale_t, kiln_bias_t, kiln_stat_t, kiln_idx_t, kRows, kSize,
// kEpsilon, kHasBias, kHasMean, kHasInvStd, kiln_load_x, kiln_load_scale(p, j),
// kiln_load_bias(p, j) (j: index in the normalised shape, broadcast inside),
// kiln_store_y, kiln_store_stat.
static __device__ __forceinline__ float kiln_ln_sum(float v, float* smem) {
  smem[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) smem[threadIdx.x] += smem[threadIdx.x + s];
    __syncthreads();
  }
  const float r = smem[0];
  __syncthreads();
  return r;
}

static __device__ __forceinline__ void kiln_layernorm(kiln_y_t* __restrict__ y, kiln_stat_t* __restrict__ mean,
                                                      kiln_stat_t* __restrict__ inv_std,
                                                      const kiln_x_t* __restrict__ x,
                                                      const kiln_scale_t* __restrict__ scale,
                                                      const kiln_bias_t* __restrict__ bias) {
  __shared__ float smem[1024];
  for (kiln_idx_t row = blockIdx.x; row < kRows; row += gridDim.x) {
    const kiln_idx_t base = row * kSize;
    float s = 0.f;
    for (kiln_idx_t j = threadIdx.x; j < kSize; j += blockDim.x) s += kiln_load_x(x, base + j);
    const float mu = kiln_ln_sum(s, smem) / (float)kSize;
    float q = 0.f;
    for (kiln_idx_t j = threadIdx.x; j < kSize; j += blockDim.x) {
      const float d = kiln_load_x(x, base + j) - mu;
      q += d * d;
    }
    const float inv = 1.f / sqrtf(kiln_ln_sum(q, smem) / (float)kSize + kEpsilon);
    for (kiln_idx_t j = threadIdx.x; j < kSize; j += blockDim.x) {
      float v = (kiln_load_x(x, base + j) - mu) * inv * kiln_load_scale(scale, j);
      if constexpr (kHasBias) v += kiln_load_bias(bias, j);
      kiln_store_y(y, base + j, v);
    }
    if (threadIdx.x == 0) {
      if constexpr (kHasMean) kiln_store_stat(mean, row, mu);
      if constexpr (kHasInvStd) kiln_store_stat(inv_std, row, inv);
    }
  }
}
