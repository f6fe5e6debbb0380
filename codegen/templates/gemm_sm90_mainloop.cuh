// The ring of STAGES slots: full(s) at bars + 8 s (the producer's expect_tx + TMA
// bytes), empty(s) at bars + 8 (STAGES + s) (one arrival per consumer warp).
static __device__ __forceinline__ unsigned kiln_sm90_full(unsigned bars, int s) { return bars + 8u * s; }
static __device__ __forceinline__ unsigned kiln_sm90_empty(unsigned bars, int s) { return bars + 8u * (STAGES + s); }
// Ping-pong turns: turn(c) at bars + 8 (2 STAGES + c) completes when the other
// consumer's mainloop is done.
static __device__ __forceinline__ unsigned kiln_sm90_turn(unsigned bars, int c) { return bars + 8u * (2 * STAGES + c); }
// The ring's and the turns' barriers, by one thread, before the cluster syncs.
static __device__ __forceinline__ void kiln_sm90_init_barriers(unsigned bars) {
  for (int s = 0; s < STAGES; ++s) {
    kiln_sm90_mbar_init(kiln_sm90_full(bars, s), 1);
    kiln_sm90_mbar_init(kiln_sm90_empty(bars, s), (GEMM_PINGPONG ? 4 : CONSUMERS * 4) * GEMM_CLUSTER_M);
  }
  kiln_sm90_mbar_init(kiln_sm90_turn(bars, 0), 4);
  kiln_sm90_mbar_init(kiln_sm90_turn(bars, 1), 4);
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
static __device__ __forceinline__ void kiln_sm90_advance(int& s, unsigned& phase) {
  if (++s == STAGES) {
    s = 0;
    phase ^= 1u;
  }
}

// The k tile of step `step` of a unit's range [kt_begin, kt_end): ascending, or with
// stream-K descending (see "Stream-K"); the producer and the consumers agree.
static __device__ __forceinline__ int kiln_sm90_kt(int step, int kt_begin, int kt_end) {
  return GEMM_STREAM_K ? kt_begin + kt_end - 1 - step : step;
}

// The producer's loads of one mainloop of a tile: K tiles [kt_begin, kt_end) of
// (A, B) into the ring from slot s (clusters: CTA `rank`'s share of B, multicast).
template <int TRANS_A, int TRANS_B>
static __device__ __forceinline__ void kiln_sm90_produce(const kiln_tensor_map* map_a, const kiln_tensor_map* map_b,
                                                         int kt_begin, int kt_end, int m0, int n0, int ab, int bb,
                                                         int rank, unsigned base, unsigned bars, int& s,
                                                         unsigned& phase) {
  for (int step = kt_begin; step < kt_end; ++step) {
    const int kt = kiln_sm90_kt(step, kt_begin, kt_end);
    kiln_sm90_mbar_wait(kiln_sm90_empty(bars, s), phase ^ 1u);
    const unsigned full = kiln_sm90_full(bars, s);
    kiln_sm90_mbar_expect_tx(full, GEMM_STAGE_BYTES);
    const unsigned sa = base + s * GEMM_STAGE_BYTES, sb = sa + GEMM_A_TILE_BYTES;
    const int k0 = kt * GEMM_BK;
    if constexpr (TRANS_A) {
#pragma unroll
      for (int j = 0; j < BM / 64; ++j) {
        kiln_sm90_tma_load(sa + j * GEMM_MN_BLOCK_BYTES, map_a, full, m0 + 64 * j, k0, ab);
      }
    } else {
#pragma unroll
      for (int q = 0; q < GEMM_BK / GEMM_BOX_K; ++q) {
        kiln_sm90_tma_load(sa + q * BM * 128, map_a, full, k0 + GEMM_BOX_K * q, m0, ab);
      }
    }
#if GEMM_CLUSTER_M > 1
    if constexpr (TRANS_B) {  // rows [rank BN / 2, (rank + 1) BN / 2) of the tile
      constexpr int rows = BN / GEMM_CLUSTER_M;
      kiln_sm90_tma_load_multicast(sb + rank * rows * 128, map_b, full, k0, n0 + rank * rows, bb);
    } else {
#pragma unroll
      for (int j = 0; j < BN / 64; ++j) {
        if (j % GEMM_CLUSTER_M == rank) {
          kiln_sm90_tma_load_multicast(sb + j * GEMM_MN_BLOCK_BYTES, map_b, full, n0 + 64 * j, k0, bb);
        }
      }
    }
#else
    if constexpr (TRANS_B) {
#pragma unroll
      for (int q = 0; q < GEMM_BK / GEMM_BOX_K; ++q) {
        kiln_sm90_tma_load(sb + q * BN * 128, map_b, full, k0 + GEMM_BOX_K * q, n0, bb);
      }
    } else {
#pragma unroll
      for (int j = 0; j < BN / 64; ++j) {
        kiln_sm90_tma_load(sb + j * GEMM_MN_BLOCK_BYTES, map_b, full, n0 + 64 * j, k0, bb);
      }
    }
#endif
    kiln_sm90_advance(s, phase);
  }
}

// The producer's thread: every TMA load of this CTA's (cluster's) walk, in order, into
// the ring (map_a2 / map_b2: the second pair of a dual kernel, else unused).
static __device__ __forceinline__ void kiln_sm90_producer(const kiln_tensor_map* map_a, const kiln_tensor_map* map_b,
                                                          const kiln_tensor_map* map_a2,
                                                          const kiln_tensor_map* map_b2, int walker, int walkers,
                                                          int rank, unsigned base, unsigned bars) {
  constexpr int k_tiles1 = GEMM_K_TILES1;
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(map_a)) : "memory");
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(map_b)) : "memory");
#if GEMM_DUAL
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(map_a2)) : "memory");
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(map_b2)) : "memory");
#endif
  int s = 0;
  unsigned phase = 0;
  kiln_sm90_walk walk(walker, walker, walkers);
  int t, kb, ke, split;
  while (walk.next(t, kb, ke, split)) {
    int m0, n0, batch;
    kiln_sm90_tile(t, rank, m0, n0, batch);
    kiln_sm90_produce<GEMM_TRANS_A, GEMM_TRANS_B>(map_a, map_b, kb, min(ke, k_tiles1), m0, n0,
                                                  GEMM_A_BATCHED ? batch : 0, GEMM_B_BATCHED ? batch : 0, rank, base,
                                                  bars, s, phase);
#if GEMM_DUAL
    kiln_sm90_produce<GEMM_TRANS_A2, GEMM_TRANS_B2>(map_a2, map_b2, max(kb - k_tiles1, 0), ke - k_tiles1, m0, n0,
                                                    GEMM_A2_BATCHED ? batch : 0, GEMM_B2_BATCHED ? batch : 0, rank,
                                                    base, bars, s, phase);
#endif
  }
}

// A consumer's accumulators zeroed before a tile's mainloop, each zero in its own
// register: otherwise the compiler may copy one zero into an m64 block's accumulators
// just before that block's first wgmma, after the other block's, and ptxas then waits
// for the wgmmas in flight (C7517/C7519) or serializes them (C7520).
static __device__ __forceinline__ void kiln_sm90_zero(float (&acc)[WG_M][BN / 2]) {
#pragma unroll
  for (int i = 0; i < WG_M; ++i)
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) {
      acc[i][j] = 0.f;
      asm volatile("" : "+f"(acc[i][j])::"memory");
    }
}

// The offset in 16-byte units of wgmma k step kk in a K-major tile of ROWS rows: 32
// bytes a step within a box, the next box ROWS x 128 bytes on (two boxes a stage).
template <int ROWS>
static __device__ __forceinline__ unsigned kiln_sm90_k_step(int kk) {
  return GEMM_BK == GEMM_BOX_K ? kk * 2 : (kk % 4) * 2 + (kk / 4) * ROWS * 8;
}

// B's wgmma descriptor for k step kk of the stage whose B tile is at `sb` (the ring
// at `base`).
template <int TRANS_B>
static __device__ __forceinline__ unsigned long long kiln_sm90_desc_b(unsigned base, unsigned sb, int kk) {
  const unsigned b0 = base + GEMM_A_TILE_BYTES;  // stage 0's B tile
  return TRANS_B ? kiln_sm90_desc_add(kiln_sm90_desc(b0, 16, 1024), (sb - b0) / 16 + kiln_sm90_k_step<BN>(kk))
                 : kiln_sm90_desc_add(kiln_sm90_desc(b0, GEMM_MN_BLOCK_BYTES, 1024), (sb - b0) / 16 + kk * 128);
}

// The wgmmas of one stage (A and B from shared memory at sa, sb; the ring at `base`).
template <int TRANS_A, int TRANS_B, int PAIR>
static __device__ __forceinline__ void kiln_sm90_stage_mma(float (&acc)[WG_M][BN / 2], unsigned base, unsigned sa,
                                                           unsigned sb, int row0) {
  const unsigned stage = (sa - base) / 16;  // the stage's offset in 16-byte units
#pragma unroll
  for (int kk = 0; kk < GEMM_BK / GEMM_K_STEP; ++kk) {
    const unsigned long long db = kiln_sm90_desc_b<TRANS_B>(base, sb, kk);
#pragma unroll
    for (int i = 0; i < WG_M; ++i) {
      const int row = row0 + i * 64;  // m offset inside the tile (a multiple of 64)
      const unsigned long long da =
          TRANS_A ? kiln_sm90_desc_add(kiln_sm90_desc(base, GEMM_MN_BLOCK_BYTES, 1024),
                                       stage + (row / 64) * (GEMM_MN_BLOCK_BYTES / 16) + kk * 128)
                  : kiln_sm90_desc_add(kiln_sm90_desc(base, 16, 1024), stage + row * 8 + kiln_sm90_k_step<BM>(kk));
#if GEMM_DUAL
      if constexpr (PAIR == 1) {
        kiln_sm90_wgmma2(acc[i], da, db);
        continue;
      }
#endif
      kiln_sm90_wgmma(acc[i], da, db);
    }
  }
}

// A consumer's share of one mainloop of a tile (A and B from shared memory): K tiles
// [kt_begin, kt_end): per K tile, wait for the stage, issue its wgmmas as one group, keep one group in flight
// and release the stage before it (`prev`) once its group is done. PAIR 1: the
// second mainloop of a dual kernel (kiln_sm90_wgmma2).
template <int TRANS_A, int TRANS_B, int PAIR>
static __device__ __forceinline__ void kiln_sm90_consume(float (&acc)[WG_M][BN / 2], int kt_begin, int kt_end,
                                                         unsigned base, unsigned bars, int row0, bool leader, int& s,
                                                         unsigned& phase, int& prev) {
  for (int step = kt_begin; step < kt_end; ++step) {
    const int kt = kiln_sm90_kt(step, kt_begin, kt_end);
    kiln_sm90_mbar_wait(kiln_sm90_full(bars, s), phase);
    const unsigned sa = base + s * GEMM_STAGE_BYTES, sb = sa + GEMM_A_TILE_BYTES;
    kiln_sm90_wgmma_fence();
    kiln_sm90_stage_mma<TRANS_A, TRANS_B, PAIR>(acc, base, sa, sb, row0);
    kiln_sm90_wgmma_commit();
    // The previous stage's wgmmas are done once at most this one is pending.
    kiln_sm90_wgmma_wait<1>();
    if (prev >= 0 && leader) kiln_sm90_release(kiln_sm90_empty(bars, prev));
    prev = s;
    kiln_sm90_advance(s, phase);
  }
}

#if GEMM_PROLOGUE
// Two 16-bit elements (low, high) of the tensor-core type as fp32.
static __device__ __forceinline__ void kiln_sm90_unpack(unsigned v, float& lo, float& hi) {
#if GEMM_BF16
  kiln_unpack_bf16x2(v, lo, hi);
#else
  kiln_unpack_f16x2(v, lo, hi);
#endif
}

// f applied to the four registers of an A fragment in place: element pair j is row
// m + 8 (j % 2), k columns k + 8 (j / 2) + {0, 1} of op(A). MASK: elements outside
// [0, GEMM_M) x [0, GEMM_K) become zeros instead (f(0) may be non-zero, and f's side
// loads must stay in bounds); without it every element is in range.
template <bool MASK, class F>
static __device__ __forceinline__ void kiln_sm90_prologue_fragment(unsigned (&a)[4], int m, int k, int batch,
                                                                   const F& f) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int mj = m + 8 * (j & 1), kj = k + 8 * (j >> 1);
    float x0, x1;
    kiln_sm90_unpack(a[j], x0, x1);
    const bool in0 = !MASK || (mj < GEMM_M && kj < GEMM_K), in1 = !MASK || (mj < GEMM_M && kj + 1 < GEMM_K);
#if GEMM_TRANS_A
    x0 = in0 ? f(x0, kj, mj, batch) : 0.f;
    x1 = in1 ? f(x1, kj + 1, mj, batch) : 0.f;
#else
    x0 = in0 ? f(x0, mj, kj, batch) : 0.f;
    x1 = in1 ? f(x1, mj, kj + 1, batch) : 0.f;
#endif
    a[j] = kiln_mma_pack<GEMM_BF16 == 1>(x0, x1);
  }
}

// ldmatrix of this warp's A fragment for k16 step kk of the m64 block whose first row
// in the tile is `row` (a multiple of 16: 16 warp + 64 i) from the stage at `sa`.
static __device__ __forceinline__ void kiln_sm90_load_a(unsigned (&a)[4], unsigned sa, int row, int kk, int lane) {
#if GEMM_TRANS_A
  // [64 k][64 m] boxes: matrix q = lane / 8 is k rows 8 (q / 2) .. + 7, m chunk q % 2.
  const int q = lane / 8, kr = kk * 16 + lane % 8 + 8 * (q >> 1), chunk = (row % 64) / 8 + (q & 1);
  const unsigned addr = sa + (row / 64) * 8192 + kr * 128 + ((chunk ^ (kr % 8)) << 4);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(addr));
#else
  // [BM rows][64 k]: matrix q is rows 8 (q % 2) .. + 7, k chunk 2 kk + q / 2.
  const int r = row + lane % 8 + 8 * ((lane / 8) & 1), chunk = 2 * kk + lane / 16;
  const unsigned addr = sa + r * 128 + ((chunk ^ (r % 8)) << 4);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(addr));
#endif
}

// The one mainloop of a tile with A through registers and the prologue `f`: per K
// tile and k16 step, ldmatrix this warp's A fragment of each m64 block, apply f (with
// the range mask only on tiles that cross M or K), then the register-A wgmma, one
// group per step.
template <class F>
static __device__ __forceinline__ void kiln_sm90_consume_rs(float (&acc)[WG_M][BN / 2], int kt_begin, int kt_end,
                                                            unsigned base, unsigned bars, int m0, int row0, int batch,
                                                            int lane, int warp, int& s, unsigned& phase, int& prev,
                                                            const F& f) {
  constexpr int steps = GEMM_BK / 16;
  unsigned af[steps][WG_M][4];
  unsigned raw[2][WG_M][4];  // ldmatrix of a step, issued before the previous step's prologue
  const bool rows_in = m0 + row0 + 64 * WG_M <= GEMM_M;  // this consumer's rows of the tile
  for (int step = kt_begin; step < kt_end; ++step) {
    const int kt = kiln_sm90_kt(step, kt_begin, kt_end);
    kiln_sm90_mbar_wait(kiln_sm90_full(bars, s), phase);
    const unsigned sa = base + s * GEMM_STAGE_BYTES, sb = sa + GEMM_A_TILE_BYTES;
    const bool interior = rows_in && (kt + 1) * GEMM_BK <= GEMM_K;
#pragma unroll
    for (int i = 0; i < WG_M; ++i) kiln_sm90_load_a(raw[0][i], sa, row0 + i * 64 + warp * 16, 0, lane);
#pragma unroll
    for (int kk = 0; kk < steps; ++kk) {
      if (kk + 1 < steps) {  // its latency hides behind this step's prologue
#pragma unroll
        for (int i = 0; i < WG_M; ++i) {
          kiln_sm90_load_a(raw[(kk + 1) % 2][i], sa, row0 + i * 64 + warp * 16, kk + 1, lane);
        }
      }
      // af[kk] was read by step kk of the previous K tile, followed by steps - 1 groups.
      kiln_sm90_wgmma_wait<steps - 1>();
#pragma unroll
      for (int i = 0; i < WG_M; ++i) {
        const int row = row0 + i * 64 + warp * 16;  // the warp's first row in the tile
#pragma unroll
        for (int j = 0; j < 4; ++j) af[kk][i][j] = raw[kk % 2][i][j];
        const int m = m0 + row + lane / 4, k = kt * GEMM_BK + kk * 16 + 2 * (lane % 4);
        if (interior) {
          kiln_sm90_prologue_fragment<false>(af[kk][i], m, k, batch, f);
        } else {
          kiln_sm90_prologue_fragment<true>(af[kk][i], m, k, batch, f);
        }
      }
      kiln_sm90_wgmma_fence();  // the fragments' registers, then the wgmmas that read them
      const unsigned long long db = kiln_sm90_desc_b<GEMM_TRANS_B>(base, sb, kk);
#pragma unroll
      for (int i = 0; i < WG_M; ++i) kiln_sm90_wgmma_rs(acc[i], af[kk][i], db);
      kiln_sm90_wgmma_commit();
    }
    // The wait before the last step left only this tile's groups pending: the
    // previous stage is free.
    if (prev >= 0 && lane == 0) kiln_sm90_release(kiln_sm90_empty(bars, prev));
    prev = s;
    kiln_sm90_advance(s, phase);
  }
}
#endif

