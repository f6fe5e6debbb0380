// Fused attention on Hopper (sm_90a; wgmma), the loop of attention_sm80.cuh with
// warpgroup MMAs:
//   O[b] = softmax_rows(kiln_attn_score(Q[b] K[b]^T)) V[b]
// One CTA takes ATTN_BM query rows (one warpgroup per 64) of one batch entry and
// sweeps the keys in blocks of ATTN_BN. Per block, each warpgroup computes its
// 64 x BN scores with wgmma.m64nBNk16 (Q and K from shared memory), runs the score
// functor and the online softmax on them in registers (attention_common.cuh: a warp
// holds 16 rows of a wgmma accumulator in mma.sync's layout) and adds P V with the
// register-A form of wgmma.m64nDVk16 (P from the score registers, V from shared
// memory). K and V are double-buffered; all threads copy with cp.async into the
// 128-byte-swizzled layouts wgmma reads (below).
//
// Defined by codegen/ops/attention.cc before this text, as for attention_sm80.cuh
// (ATTN_BF16, ATTN_SQ, ATTN_SK, ATTN_D, ATTN_DV, ATTN_*_LD, ATTN_K_TRANS, ATTN_BM,
// ATTN_BN, ATTN_Q_PROLOGUE, ATTN_CAUSAL_LIMIT, ATTN_T, KILN_ATTN_PARAMS / ARGS and
// the functions kiln_attn_{q,k,v,o}_offset, kiln_attn_score, kiln_attn_q_prologue),
// with these differences:
//   ATTN_DP, ATTN_DVP    D and Dv rounded up to 64 (one 128-byte swizzle row of
//                        16-bit elements per 64); the padded columns are zero-filled
//   ATTN_BM              64, 128 or 192 (one warpgroup per 64 rows); ATTN_BN 64 or 128
//   ATTN_OVERLAP         1: each warpgroup issues block j + 1's Q K^T with block j's
//                        P V and runs j + 1's softmax while P V runs (FlashAttention-3's
//                        intra-warpgroup overlap; below); 0: one block after the other
//   K is always copied with cp.async (ATTN_K_ASYNC 1: the generator checks it)
// and, from wgmma_sm90.cuh and the generator (WgmmaFunction):
//   kiln_attn_wgmma_qk(float (&s)[ATTN_BN / 8][4], desc_q, desc_k)      S += Q K^T
//   kiln_attn_wgmma_pv(float (&o)[ATTN_DVP / 8][4], const unsigned (&p)[4], desc_v)
// Kernel parameters: (O, Q, K, V KILN_ATTN_PARAMS). Grid (ceil(Sq / ATTN_BM), batch);
// block ATTN_BM * 2 threads; dynamic shared memory 1024 (alignment) + Q tile + 2 K
// tiles + 2 V tiles (AttentionSharedBytes).
//
// Shared-memory tiles (16-bit elements, 128-byte rows, 16-byte chunk c of row r at
// chunk c ^ (r % 8): the 128-byte swizzle). A matrix of R rows and C columns (C a
// multiple of 64) is stored as C / 64 blocks of [R][64]:
//   Q  [DP / 64][BM][64]   K-major A: descriptor SBO 1024 (8 rows), the k16 step
//                          +32 bytes within a block, the next block BM x 128 bytes on
//   K  [DP / 64][BN][64]   (ATTN_K_TRANS 1, keys by rows) K-major B, the same
//   K' [BN / 64][DP][64]   (ATTN_K_TRANS 0, head dim by rows) N-major B: SBO 1024 (8
//                          rows of d), LBO DP x 128 (the next 64 keys), the k16 step
//                          +2048 bytes (16 rows)
//   V  [DVP / 64][BN][64]  N-major B of P V: SBO 1024, LBO BN x 128, k16 step +2048
// cp.async writes through the generic proxy: each thread fences to the async proxy
// after its copies land, before the barrier that precedes the wgmmas.

#define ATTN_WARPGROUPS (ATTN_BM / 64)
#define ATTN_THREADS (ATTN_WARPGROUPS * 128)
#define ATTN_Q_BYTES (ATTN_BM * ATTN_DP * 2)
#define ATTN_K_BYTES (ATTN_BN * ATTN_DP * 2)
#define ATTN_V_BYTES (ATTN_BN * ATTN_DVP * 2)

// Issue the copies of the ATTN_BN keys from `n0` (of `sk_n`) into a K tile (load_k)
// or a V tile (load_v).
static __device__ __forceinline__ void kiln_attn90_load_k(unsigned char* sk, const kiln_mma_t* __restrict__ k, int n0,
                                                          int sk_n) {
#if ATTN_K_TRANS
  kiln_attn_copy_tile<ATTN_BN, ATTN_DP, ATTN_K_LD, ATTN_THREADS, true>(sk, k, n0, 0, sk_n, ATTN_D);
#else
  kiln_attn_copy_tile<ATTN_DP, ATTN_BN, ATTN_K_LD, ATTN_THREADS, true>(sk, k, 0, n0, ATTN_D, sk_n);
#endif
}
static __device__ __forceinline__ void kiln_attn90_load_v(unsigned char* sv, const kiln_mma_t* __restrict__ v, int n0,
                                                          int sk_n) {
  kiln_attn_copy_tile<ATTN_BN, ATTN_DVP, ATTN_V_LD, ATTN_THREADS, true>(sv, v, n0, 0, sk_n, ATTN_DV);
}

// Waits for this thread's copies but the newest `N` groups, shows them to the async
// proxy, and waits for every thread's.
template <int N>
static __device__ __forceinline__ void kiln_attn90_tiles_landed() {
  kiln_mma_wait<N>();
  kiln_sm90_fence_proxy_async();
  __syncthreads();
}

#if ATTN_Q_PROLOGUE
// kiln_attn_q_prologue on the Q tile in shared memory (element (r, c) at its
// swizzled place), then the fence that shows the writes to wgmma.
static __device__ __forceinline__ void kiln_attn90_q_prologue(unsigned char* sq, int m0, int sq_n,
                                                              int batch KILN_ATTN_PARAMS) {
  for (int e = threadIdx.x; e < ATTN_BM * ATTN_D; e += ATTN_THREADS) {
    const int r = e / ATTN_D, c = e % ATTN_D;
    if (m0 + r < sq_n) {
      kiln_mma_t* p = reinterpret_cast<kiln_mma_t*>(sq + ((c / 64) * ATTN_BM + r) * 128 +
                                                     ((((c % 64) / 8) ^ (r % 8)) * 16)) +
                      c % 8;
      *p = kiln_mma_from_f32<kiln_attn_bf16>(
          kiln_attn_q_prologue(kiln_mma_to_f32<kiln_attn_bf16>(*p), m0 + r, c, batch KILN_ATTN_ARGS));
    }
  }
  kiln_sm90_fence_proxy_async();
  __syncthreads();
}
#endif

// Keeps the compiler from moving reads or writes of wgmma operands in registers
// across a wgmma fence or wait (the accumulators, P's fragments).
template <int N, int M>
static __device__ __forceinline__ void kiln_attn90_fence_operands(float (&x)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < M; ++j) asm volatile("" : "+f"(x[i][j])::"memory");
}
template <int N, int M>
static __device__ __forceinline__ void kiln_attn90_fence_operands(unsigned (&x)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < M; ++j) asm volatile("" : "+r"(x[i][j])::"memory");
}

// Issues S = Q K^T for the warpgroup's 64 rows (its Q block at `q_rows`) x ATTN_BN
// keys of the K tile at `kt`, from zero, as one wgmma group; s is not to be touched
// until the group is waited for (then kiln_attn90_fence_operands(s)).
static __device__ __forceinline__ void kiln_attn90_issue_qk(float (&s)[ATTN_BN / 8][4], unsigned q_rows, unsigned kt) {
#pragma unroll
  for (int j = 0; j < ATTN_BN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[j][e] = 0.f;
  kiln_attn90_fence_operands(s);  // zeros in registers, not folded into the wgmma
  const unsigned long long dq = kiln_sm90_desc(q_rows, 16, 1024);
#if ATTN_K_TRANS
  const unsigned long long dk = kiln_sm90_desc(kt, 16, 1024);
#else
  const unsigned long long dk = kiln_sm90_desc(kt, ATTN_DP * 128, 1024);
#endif
  kiln_sm90_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < ATTN_DP / 16; ++kk) {
    // 16-byte units: 2 per k16 step within a 64-column block, a block of BM (BN) rows.
    const unsigned q_step = (kk % 4) * 2 + (kk / 4) * ATTN_BM * 8;
#if ATTN_K_TRANS
    const unsigned k_step = (kk % 4) * 2 + (kk / 4) * ATTN_BN * 8;
#else
    const unsigned k_step = kk * 128;
#endif
    kiln_attn_wgmma_qk(s, kiln_sm90_desc_add(dq, q_step), kiln_sm90_desc_add(dk, k_step));
  }
  kiln_sm90_wgmma_commit();
}

// Issues O += P V for the warpgroup's rows as one wgmma group: P's fragments as
// register A, V's tile at `vt`; acc_o and p are not to be touched until it is waited
// for.
static __device__ __forceinline__ void kiln_attn90_issue_pv(float (&acc_o)[ATTN_DVP / 8][4],
                                                            unsigned (&p)[ATTN_BN / 16][4], unsigned vt) {
  const unsigned long long dv = kiln_sm90_desc(vt, ATTN_BN * 128, 1024);
  kiln_attn90_fence_operands(acc_o);
  kiln_attn90_fence_operands(p);
  kiln_sm90_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < ATTN_BN / 16; ++kk) kiln_attn_wgmma_pv(acc_o, p[kk], kiln_sm90_desc_add(dv, kk * 128));
  kiln_sm90_wgmma_commit();
}

// P (the scores after the softmax) as the register-A fragments of P V.
static __device__ __forceinline__ void kiln_attn90_pack_p(unsigned (&p)[ATTN_BN / 16][4],
                                                          const float (&s)[ATTN_BN / 8][4]) {
#pragma unroll
  for (int kk = 0; kk < ATTN_BN / 16; ++kk) kiln_attn_p_fragment(p[kk], s, kk);
}

extern "C" __global__ void __launch_bounds__(ATTN_THREADS, 1)
    KILN_KERNEL(ATTN_T* __restrict__ O, const ATTN_T* __restrict__ Q, const ATTN_T* __restrict__ K,
                const ATTN_T* __restrict__ V KILN_ATTN_PARAMS) {
  extern __shared__ __align__(128) unsigned char kiln_attn_smem_raw[];
  // wgmma's 128-byte swizzle repeats every 1024 bytes: the tiles start 1024-aligned.
  unsigned char* sq = kiln_attn_smem_raw + ((1024 - kiln_sm90_smem(kiln_attn_smem_raw) % 1024) % 1024);
  unsigned char* sk = sq + ATTN_Q_BYTES;      // 2 K tiles
  unsigned char* sv = sk + 2 * ATTN_K_BYTES;  // 2 V tiles
  const int m0 = blockIdx.x * ATTN_BM;
  const int batch = blockIdx.y;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int wg = warp / 4;
  const int sq_n = ATTN_SQ, sk_n = ATTN_SK;
  const kiln_mma_t* q = reinterpret_cast<const kiln_mma_t*>(Q) + kiln_attn_q_offset(batch KILN_ATTN_ARGS);
  const kiln_mma_t* k = reinterpret_cast<const kiln_mma_t*>(K) + kiln_attn_k_offset(batch KILN_ATTN_ARGS);
  const kiln_mma_t* v = reinterpret_cast<const kiln_mma_t*>(V) + kiln_attn_v_offset(batch KILN_ATTN_ARGS);

  // At least one (zero-filled) block: the overlap's last P V reads a V tile that was copied.
  const int blocks = max(1, (kiln_attn_key_end(m0, sk_n) + ATTN_BN - 1) / ATTN_BN);

  // This thread's two rows (lane / 4 and + 8 of its warp's 16): running max (log2
  // domain), partial row sum over its columns, output accumulators.
  const int row0 = m0 + warp * 16 + lane / 4;
  float row_max[2], row_sum[2], acc_o[ATTN_DVP / 8][4];
  kiln_attn_init_rows(row_max, row_sum, acc_o);
  const unsigned q_rows = kiln_sm90_smem(sq) + wg * 64 * 128;
  float s[ATTN_BN / 8][4];
  unsigned p[ATTN_BN / 16][4];

  kiln_attn_copy_tile<ATTN_BM, ATTN_DP, ATTN_Q_LD, ATTN_THREADS, true>(sq, q, m0, 0, sq_n, ATTN_D);
  kiln_attn90_load_k(sk, k, 0, sk_n);
#if !ATTN_OVERLAP
  // Block jb's K and V in tiles jb % 2; block jb + 1's copies run while jb is computed.
  kiln_attn90_load_v(sv, v, 0, sk_n);
  kiln_mma_commit();
  for (int jb = 0; jb < blocks; ++jb) {
    if (jb + 1 < blocks) {
      kiln_attn90_load_k(sk + ((jb + 1) & 1) * ATTN_K_BYTES, k, (jb + 1) * ATTN_BN, sk_n);
      kiln_attn90_load_v(sv + ((jb + 1) & 1) * ATTN_V_BYTES, v, (jb + 1) * ATTN_BN, sk_n);
    }
    kiln_mma_commit();
    kiln_attn90_tiles_landed<1>();  // block jb (and Q)
#if ATTN_Q_PROLOGUE
    if (jb == 0) kiln_attn90_q_prologue(sq, m0, sq_n, batch KILN_ATTN_ARGS);
#endif
    kiln_attn90_issue_qk(s, q_rows, kiln_sm90_smem(sk + (jb & 1) * ATTN_K_BYTES));
    kiln_sm90_wgmma_wait<0>();
    kiln_attn90_fence_operands(s);
    kiln_attn_softmax_block(s, row_max, row_sum, acc_o, row0, jb * ATTN_BN, sq_n, sk_n, lane, batch KILN_ATTN_ARGS);
    kiln_attn90_pack_p(p, s);
    kiln_attn90_issue_pv(acc_o, p, kiln_sm90_smem(sv + (jb & 1) * ATTN_V_BYTES));
    kiln_sm90_wgmma_wait<0>();
    kiln_attn90_fence_operands(acc_o);
    kiln_attn90_fence_operands(p);
    __syncthreads();  // every warpgroup is done with this block's tiles before they are refilled
  }
#else
  // The softmax of block jb + 1 runs while the tensor cores add block jb's P V:
  // S_{jb+1} = Q K_{jb+1}^T and O += P_jb V_jb are issued together, the softmax waits
  // for the first group only, and O is rescaled once the second is done. K_j sits in
  // K tile j % 2, V_j in V tile j % 2; at the top of iteration jb, K_{jb+1} and V_jb
  // have landed, and K_{jb+2} and V_{jb+1} are copied into the tiles that K_jb and
  // V_{jb-1} (both waited for in iteration jb - 1) leave.
  kiln_mma_commit();
  if (blocks > 1) kiln_attn90_load_k(sk + ATTN_K_BYTES, k, ATTN_BN, sk_n);
  kiln_attn90_load_v(sv, v, 0, sk_n);
  kiln_mma_commit();
  kiln_attn90_tiles_landed<1>();  // Q and K_0
#if ATTN_Q_PROLOGUE
  kiln_attn90_q_prologue(sq, m0, sq_n, batch KILN_ATTN_ARGS);
#endif
  float alpha[2];
  kiln_attn90_issue_qk(s, q_rows, kiln_sm90_smem(sk));
  kiln_sm90_wgmma_wait<0>();
  kiln_attn90_fence_operands(s);
  kiln_attn_softmax_stats(s, row_max, row_sum, alpha, row0, 0, sq_n, sk_n, lane, batch KILN_ATTN_ARGS);
  kiln_attn90_pack_p(p, s);
  // No branch around the wgmmas in flight (ptxas would serialise them all where
  // paths meet): the last block's P V runs after the loop.
  for (int jb = 0; jb + 1 < blocks; ++jb) {
    kiln_attn90_tiles_landed<0>();  // K_{jb+1}, V_jb
    if (jb + 2 < blocks) kiln_attn90_load_k(sk + (jb & 1) * ATTN_K_BYTES, k, (jb + 2) * ATTN_BN, sk_n);
    kiln_attn90_load_v(sv + ((jb + 1) & 1) * ATTN_V_BYTES, v, (jb + 1) * ATTN_BN, sk_n);
    kiln_mma_commit();
    kiln_attn90_issue_qk(s, q_rows, kiln_sm90_smem(sk + ((jb + 1) & 1) * ATTN_K_BYTES));
    kiln_attn90_issue_pv(acc_o, p, kiln_sm90_smem(sv + (jb & 1) * ATTN_V_BYTES));
    kiln_sm90_wgmma_wait<1>();  // S_{jb+1}
    kiln_attn90_fence_operands(s);
    kiln_attn_softmax_stats(s, row_max, row_sum, alpha, row0, (jb + 1) * ATTN_BN, sq_n, sk_n, lane,
                            batch KILN_ATTN_ARGS);
    kiln_sm90_wgmma_wait<0>();  // O += P_jb V_jb
    kiln_attn90_fence_operands(acc_o);
    kiln_attn90_fence_operands(p);
    kiln_attn_rescale(acc_o, alpha);
    kiln_attn90_pack_p(p, s);
  }
  kiln_attn90_tiles_landed<0>();  // the last V
  kiln_attn90_issue_pv(acc_o, p, kiln_sm90_smem(sv + ((blocks - 1) & 1) * ATTN_V_BYTES));
  kiln_sm90_wgmma_wait<0>();
  kiln_attn90_fence_operands(acc_o);
  kiln_attn90_fence_operands(p);
#endif
  kiln_attn_store_o(O + kiln_attn_o_offset(batch KILN_ATTN_ARGS), acc_o, row_sum, row0, lane, sq_n);
}

// This template's own macros (attention_undef.cuh undefines the generator's).
#undef ATTN_WARPGROUPS
#undef ATTN_THREADS
#undef ATTN_Q_BYTES
#undef ATTN_K_BYTES
#undef ATTN_V_BYTES
