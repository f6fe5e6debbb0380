// The parts of the fused attention kernels that do not depend on how the products
// are computed (attention_sm80.cuh: mma.sync; attention_sm90.cuh: wgmma): the cp.async
// tile copy, the rows' initial state, the score functor with the online softmax of one
// block of keys, P as the A fragments of the P V product, and the store of O / l. A
// warp holds 16 query rows of the scores and of O in the m16n8 accumulator layout of
// mma.sync, which is also the layout of each warp's 16 rows of a wgmma m64nN
// accumulator: element e of n8 block j sits at row lane / 4 (+ 8 for e >= 2) and
// column 8 j + 2 (lane % 4) + (e & 1). Uses the generator's ATTN_BF16, ATTN_BM,
// ATTN_BN, ATTN_DV, ATTN_DVP, ATTN_O_LD, ATTN_T, ATTN_CAUSAL_LIMIT, KILN_ATTN_PARAMS /
// KILN_ATTN_ARGS and kiln_attn_score (attention_sm80.cuh lists them).

constexpr bool kiln_attn_bf16 = ATTN_BF16 != 0;

static __device__ __forceinline__ float kiln_attn_neg_inf() { return __int_as_float(0xff800000); }

// 2^x in one MUFU.EX2 (ex2.approx.ftz; exp2f's ex2.approx without ftz costs three more
// instructions to keep results below 2^-126 subnormal). Flushing those to zero
// changes no softmax: P and alpha are at most 1, the row's largest term is exactly 1,
// and P reaches the P V product as fp16/bf16. 2^-inf = +0.
static __device__ __forceinline__ float kiln_attn_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// A tile of ROWS x COLS elements of a matrix of lim_r x lim_c with rows PITCH elements
// apart, from (r0, c0), copied by the CTA's THREADS threads with cp.async in 16-byte
// chunks (lim_c and PITCH multiples of 8, so a chunk is all in or all out and aligned),
// out-of-range chunks zero-filled. The limits are the sequence lengths, run-time values
// in a kernel with run-time sizes (constants after inlining otherwise). Stored as rows
// of COLS + 8 elements (SWIZZLED false: the mma.sync kernel's ldmatrix tiles) or as
// wgmma's 128-byte-swizzled blocks [COLS / 64][ROWS][64], 16-byte chunk c of row r at
// chunk c ^ (r % 8).
template <int ROWS, int COLS, int PITCH, int THREADS, bool SWIZZLED>
static __device__ __forceinline__ void kiln_attn_copy_tile(void* s, const kiln_mma_t* __restrict__ g, int r0, int c0,
                                                           int lim_r, int lim_c) {
  constexpr int kChunks = ROWS * COLS / 8;
  constexpr int kIters = (kChunks + THREADS - 1) / THREADS;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int c = threadIdx.x + it * THREADS;
    if (kChunks % THREADS != 0 && c >= kChunks) break;
    const int r = c / (COLS / 8), k = (c % (COLS / 8)) * 8;  // the chunk's row and first column
    const bool ok = r0 + r < lim_r && c0 + k < lim_c;
    const kiln_mma_t* src = ok ? g + (kiln_index)(r0 + r) * PITCH + (c0 + k) : g;
    if constexpr (SWIZZLED) {
      kiln_mma_cp16(static_cast<unsigned char*>(s) + ((k / 64) * ROWS + r) * 128 + (((k / 8) % 8) ^ (r % 8)) * 16,
                    src, ok ? 16 : 0);
    } else {
      kiln_mma_cp16(static_cast<kiln_mma_t*>(s) + r * (COLS + 8) + k, src, ok ? 16 : 0);
    }
  }
}

// The end of the keys a CTA whose rows start at m0 sweeps: all of them, or (the causal
// skip, ATTN_CAUSAL_LIMIT) those up to its last row.
static __device__ __forceinline__ int kiln_attn_key_end(int m0, int sk_n) {
#if ATTN_CAUSAL_LIMIT
  return min(sk_n, m0 + ATTN_BM);
#else
  return sk_n;
#endif
}

// A thread's two rows before the first block: running max -inf (log2 domain), partial
// row sums and output accumulators 0.
static __device__ __forceinline__ void kiln_attn_init_rows(float (&row_max)[2], float (&row_sum)[2],
                                                           float (&acc_o)[ATTN_DVP / 8][4]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_max[r] = kiln_attn_neg_inf();
    row_sum[r] = 0.f;
  }
#pragma unroll
  for (int j = 0; j < ATTN_DVP / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_o[j][e] = 0.f;
}

// One block of ATTN_BN keys from key n0 for the thread's two rows row0 and row0 + 8:
// the score functor on the in-range scores (the rest -inf), scaled into the log2
// domain; the running row max; s becomes P = exp2(s - max); the row sums are rescaled
// by alpha = exp2(max_old - max_new), which the output accumulators still need
// (kiln_attn_rescale), and take P's.
static __device__ __forceinline__ void kiln_attn_softmax_stats(float (&s)[ATTN_BN / 8][4], float (&row_max)[2],
                                                               float (&row_sum)[2], float (&alpha)[2], int row0,
                                                               int n0, int sq_n, int sk_n, int lane,
                                                               int batch KILN_ATTN_PARAMS) {
  float mx[2] = {kiln_attn_neg_inf(), kiln_attn_neg_inf()};
#pragma unroll
  for (int j = 0; j < ATTN_BN / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = row0 + (e >= 2 ? 8 : 0);
      const int col = n0 + j * 8 + 2 * (lane % 4) + (e & 1);
      float x = kiln_attn_neg_inf();
      if (row < sq_n && col < sk_n) {
        x = kiln_attn_score(s[j][e], row, col, batch KILN_ATTN_ARGS) * 1.4426950408889634f;
      }
      s[j][e] = x;
      mx[e >> 1] = fmaxf(mx[e >> 1], x);
    }
  }
  float base[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    const float m_new = fmaxf(row_max[r], mx[r]);
    // A row with no finite score yet keeps exp2 arguments at -inf (P = 0), not NaN.
    base[r] = m_new == kiln_attn_neg_inf() ? 0.f : m_new;
    alpha[r] = kiln_attn_exp2(row_max[r] - base[r]);
    row_max[r] = m_new;
  }
  float sum[2] = {0.f, 0.f};
#pragma unroll
  for (int j = 0; j < ATTN_BN / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float p = kiln_attn_exp2(s[j][e] - base[e >> 1]);
      s[j][e] = p;
      sum[e >> 1] += p;
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) row_sum[r] = row_sum[r] * alpha[r] + sum[r];
}

// The output accumulators of the thread's two rows times their alpha.
static __device__ __forceinline__ void kiln_attn_rescale(float (&acc_o)[ATTN_DVP / 8][4], const float (&alpha)[2]) {
#pragma unroll
  for (int j = 0; j < ATTN_DVP / 8; ++j) {
    acc_o[j][0] *= alpha[0];
    acc_o[j][1] *= alpha[0];
    acc_o[j][2] *= alpha[1];
    acc_o[j][3] *= alpha[1];
  }
}

// Both, for a kernel that adds the block's P V after them.
static __device__ __forceinline__ void kiln_attn_softmax_block(float (&s)[ATTN_BN / 8][4], float (&row_max)[2],
                                                               float (&row_sum)[2], float (&acc_o)[ATTN_DVP / 8][4],
                                                               int row0, int n0, int sq_n, int sk_n, int lane,
                                                               int batch KILN_ATTN_PARAMS) {
  float alpha[2];
  kiln_attn_softmax_stats(s, row_max, row_sum, alpha, row0, n0, sq_n, sk_n, lane, batch KILN_ATTN_ARGS);
  kiln_attn_rescale(acc_o, alpha);
}

// P's n8 blocks 2 kk and 2 kk + 1 as the m16k16 A fragment of k16 block kk (the C
// layout of two neighbouring n8 blocks is the A layout), rounded to the storage type.
static __device__ __forceinline__ void kiln_attn_p_fragment(unsigned (&a)[4], const float (&s)[ATTN_BN / 8][4], int kk) {
  a[0] = kiln_mma_pack<kiln_attn_bf16>(s[2 * kk][0], s[2 * kk][1]);
  a[1] = kiln_mma_pack<kiln_attn_bf16>(s[2 * kk][2], s[2 * kk][3]);
  a[2] = kiln_mma_pack<kiln_attn_bf16>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
  a[3] = kiln_mma_pack<kiln_attn_bf16>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

// O / l into `o` (the batch entry's output, `sq_n` rows): the quad's partial row sums
// add up to the row's; a row without any weight (l = 0) is stored as zeros.
static __device__ __forceinline__ void kiln_attn_store_o(ATTN_T* o, const float (&acc_o)[ATTN_DVP / 8][4],
                                                         const float (&row_sum)[2], int row0, int lane, int sq_n) {
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = row_sum[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    inv[r] = l > 0.f ? 1.f / l : 0.f;
  }
#pragma unroll
  for (int j = 0; j < ATTN_DVP / 8; ++j) {
    const int col = j * 8 + 2 * (lane % 4);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + r * 8;
      if (row < sq_n && col < ATTN_DV) {
        *reinterpret_cast<unsigned*>(o + (kiln_index)row * ATTN_O_LD + col) =
            kiln_mma_pack<kiln_attn_bf16>(acc_o[j][2 * r] * inv[r], acc_o[j][2 * r + 1] * inv[r]);
      }
    }
  }
}

