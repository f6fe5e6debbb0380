// Hopper tensor-core GEMM (sm_90a only; codegen/ops/gemm_sm90.cc):
//   C[b][M,N] = kiln_epilogue(sum_k op(A)[b][M,K] * op(B)[b][K,N])
// with fp16 or bf16 inputs and fp32 accumulation: TMA tile loads (128-byte swizzle)
// into a STAGES-deep shared-memory ring guarded by mbarriers, wgmma.m64nBNk16 from
// shared memory, one producer warpgroup and CONSUMERS consumer warpgroups
// (setmaxnreg moves registers from the producer to the consumers), a persistent
// grid walking the tiles in a grouped (L2-friendly) order, and the generated
// epilogue functor applied to the accumulators before predicated stores.
//
// Defined by the generator before this text:
//   GEMM_BF16            1: bf16 inputs, 0: fp16
//   GEMM_M, GEMM_N, GEMM_K, GEMM_BATCH   problem size; GEMM_BATCH output batches
//   GEMM_A_BATCHED, GEMM_B_BATCHED       1: the operand has GEMM_BATCH batches (its
//                        tensor map's third coordinate is the batch), 0: broadcast
//   GEMM_C_BATCH         output batch stride in elements
//   GEMM_TRANS_A, GEMM_TRANS_B   1: A stored [K,M] (M-major) / B stored [N,K] (K-major)
//   BM, BN, STAGES, CONSUMERS, WG_M, GEMM_PINGPONG   tile config; BK is 64 (one
//                        128-byte swizzle row of 16-bit elements). Cooperative
//                        (GEMM_PINGPONG 0): BM = 64 * WG_M * CONSUMERS, the consumer
//                        warpgroups split each tile's rows (WG_M m64 blocks each).
//                        Ping-pong (1): BM = 64 * WG_M, consumer c takes every
//                        CONSUMERS-th tile of the block whole, so one consumer's
//                        epilogue overlaps the other's mainloop (the producer fills
//                        the ring in tile order, which staggers them). The
//                        consumers take turns through two more mbarriers: one
//                        starts a mainloop when the other has passed every wait of
//                        its own, which keeps each consumer at most one phase
//                        ahead of the ring's barriers (parity waits need that).
//   GEMM_OUT_KIND        0 fp16, 1 bf16, 2 fp32 output; GEMM_OUT_T its storage type
//   GEMM_TMA_STORE       1: the epilogue writes each consumer's tile into shared
//                        memory (128B-swizzled [rows][64] boxes) and one thread
//                        stores it with TMA (asynchronous: the consumer goes on to
//                        its next mainloop; TMA clips partial tiles); needs a 16-bit
//                        output with N % 8 == 0 and a third tensor map (C).
//                        0: predicated 4-byte stores from registers
//   KILN_EPILOGUE_PARAMS, KILN_EPILOGUE_ARGS and
//   float kiln_epilogue(float acc, int row, int col, int batch KILN_EPILOGUE_PARAMS)
//   kiln_sm90_wgmma(float (&d)[BN / 2], unsigned long long desc_a,
//                   unsigned long long desc_b)   the wgmma of this BN and layout
// Kernel parameters: (C KILN_EPILOGUE_PARAMS, tensor map of A, tensor map of B
// [, tensor map of C: {N, M, batches} box {64, 64 * WG_M, 1}]): the
// pointer parameters of the source contract, then the tensor maps
// (codegen/op_kernels.h). The maps are rank 3 {contiguous dim, rows, batches}:
//   A (TRANS_A 0): {K, M, nb} box {64, BM, 1};   A (TRANS_A 1): {M, K, nb} box {64, 64, 1}
//   B (TRANS_B 1): {K, N, nb} box {64, BN, 1};   B (TRANS_B 0): {N, K, nb} box {64, 64, 1}
// all with 128-byte swizzle and zero fill out of bounds (partial tiles, K tails).
// Dynamic shared memory: 1024 (alignment) + STAGES * (BM + BN) * 64 * 2
// [+ CONSUMERS * 64 * WG_M * BN * 2 with GEMM_TMA_STORE] + 16 * STAGES + 16 (barriers).
//
// Shared-memory tiles. A K-major operand tile is [rows][64] (128-byte rows, TMA's
// 128B swizzle): wgmma descriptor with SBO 1024 (8 rows), LBO unused, the k16 step
// +32 bytes. An MN-major operand tile is [rows/64][64 k][64 mn] (one TMA box per 64
// columns): SBO 1024 (8 k rows), LBO 8192 (the next 64 columns), the k16 step
// +2048 bytes (16 k rows).
#define GEMM_BK 64
#define GEMM_THREADS (128 * (CONSUMERS + 1))
#define GEMM_A_TILE_BYTES (BM * GEMM_BK * 2)
#define GEMM_B_TILE_BYTES (BN * GEMM_BK * 2)
#define GEMM_STAGE_BYTES (GEMM_A_TILE_BYTES + GEMM_B_TILE_BYTES)
#define GEMM_GROUP_M 8
#define GEMM_C_TILE_BYTES (GEMM_TMA_STORE ? 64 * WG_M * BN * 2 : 0)  // per consumer

// A CUtensorMap's 128 opaque bytes, passed by value (`const __grid_constant__`).
struct __align__(64) kiln_tensor_map {
  unsigned long long opaque[16];
};

static __device__ __forceinline__ unsigned kiln_sm90_smem(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
static __device__ __forceinline__ void kiln_sm90_mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
static __device__ __forceinline__ void kiln_sm90_mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void kiln_sm90_mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Waits until the phase of parity `parity` has completed (a fresh barrier counts
// the phase before its first as completed: waiting on parity 1 returns at once).
static __device__ __forceinline__ void kiln_sm90_mbar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "KILN_SM90_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra KILN_SM90_WAIT;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// One TMA box of a rank-3 tensor map into shared memory, completing on `bar`.
static __device__ __forceinline__ void kiln_sm90_tma_load(unsigned dst, const kiln_tensor_map* map, unsigned bar,
                                                          int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}
// Shared memory -> global through a tensor map (bulk group of this thread).
static __device__ __forceinline__ void kiln_sm90_tma_store(const kiln_tensor_map* map, unsigned src, int c0, int c1,
                                                           int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
          reinterpret_cast<unsigned long long>(map)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
static __device__ __forceinline__ void kiln_sm90_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void kiln_sm90_wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
static __device__ __forceinline__ void kiln_sm90_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// A shared-memory matrix descriptor with 128-byte swizzle.
static __device__ __forceinline__ unsigned long long kiln_sm90_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) |
         (static_cast<unsigned long long>(lbo >> 4) << 16) | (static_cast<unsigned long long>(sbo >> 4) << 32) |
         (1ull << 62);
}

// Tile `t` of the persistent walk: batch, then groups of GEMM_GROUP_M row tiles
// sweeping the column tiles together (the B panels they share stay in L2).
static __device__ __forceinline__ void kiln_sm90_tile(int t, int& m0, int& n0, int& batch) {
  constexpr int tiles_m = (GEMM_M + BM - 1) / BM;
  constexpr int tiles_n = (GEMM_N + BN - 1) / BN;
  batch = t / (tiles_m * tiles_n);
  const int pid = t % (tiles_m * tiles_n);
  const int group = pid / (GEMM_GROUP_M * tiles_n);
  const int first_m = group * GEMM_GROUP_M;
  const int group_size = min(tiles_m - first_m, GEMM_GROUP_M);
  m0 = (first_m + (pid % group_size)) * BM;
  n0 = ((pid % (GEMM_GROUP_M * tiles_n)) / group_size) * BN;
}

static __device__ __forceinline__ void kiln_sm90_store2(GEMM_OUT_T* __restrict__ C, kiln_index i, float v0, float v1,
                                                        bool both) {
#if GEMM_OUT_KIND == 2
  if (both && (GEMM_N % 2 == 0)) {
    *reinterpret_cast<float2*>(C + i) = make_float2(v0, v1);
  } else {
    C[i] = v0;
    if (both) C[i + 1] = v1;
  }
#else
#if GEMM_OUT_KIND == 1
  const unsigned h0 = kiln_f32_to_bf16(v0), h1 = kiln_f32_to_bf16(v1);
#else
  const unsigned h0 = kiln_f32_to_f16(v0), h1 = kiln_f32_to_f16(v1);
#endif
  if (both && (GEMM_N % 2 == 0)) {
    *reinterpret_cast<unsigned*>(C + i) = h0 | (h1 << 16);
  } else {
    C[i] = static_cast<GEMM_OUT_T>(h0);
    if (both) C[i + 1] = static_cast<GEMM_OUT_T>(h1);
  }
#endif
}

extern "C" __global__ void __launch_bounds__(GEMM_THREADS, 1)
    KILN_KERNEL(GEMM_OUT_T* __restrict__ C KILN_EPILOGUE_PARAMS, const __grid_constant__ kiln_tensor_map tma_a,
                const __grid_constant__ kiln_tensor_map tma_b
#if GEMM_TMA_STORE
                , const __grid_constant__ kiln_tensor_map tma_c
#endif
) {
  extern __shared__ __align__(1024) unsigned char kiln_gemm_smem_raw[];
  // Stage buffers on a 1024-byte boundary (the 128B swizzle pattern repeats every
  // 1024 bytes and the descriptors' base offset is 0), then the barriers.
  const unsigned raw = kiln_sm90_smem(kiln_gemm_smem_raw);
  const unsigned base = (raw + 1023u) & ~1023u;
  const unsigned c_tiles = base + STAGES * GEMM_STAGE_BYTES;  // GEMM_TMA_STORE: one per consumer
  const unsigned bars = c_tiles + CONSUMERS * GEMM_C_TILE_BYTES;
  // full[s] at bars + 8 s (the producer's expect_tx + TMA bytes), empty[s] at
  // bars + 8 (STAGES + s) (one arrival per consumer warp).
  auto full = [&](int s) { return bars + 8u * s; };
  auto empty = [&](int s) { return bars + 8u * (STAGES + s); };
  // Ping-pong turns: turn(c) completes when the other consumer's mainloop is done.
  auto turn = [&](int c) { return bars + 8u * (2 * STAGES + c); };
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      kiln_sm90_mbar_init(full(s), 1);
      kiln_sm90_mbar_init(empty(s), GEMM_PINGPONG ? 4 : CONSUMERS * 4);
    }
    kiln_sm90_mbar_init(turn(0), 4);
    kiln_sm90_mbar_init(turn(1), 4);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  constexpr int tiles = ((GEMM_M + BM - 1) / BM) * ((GEMM_N + BN - 1) / BN) * GEMM_BATCH;
  constexpr int k_tiles = (GEMM_K + GEMM_BK - 1) / GEMM_BK;

  if (wg == 0) {
    // Producer warpgroup: one thread issues every TMA load.
#if CONSUMERS > 1
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
#endif
    if (threadIdx.x == 0) {
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(&tma_a)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(&tma_b)) : "memory");
      int s = 0;
      unsigned phase = 0;
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int m0, n0, batch;
        kiln_sm90_tile(t, m0, n0, batch);
        const int ab = GEMM_A_BATCHED ? batch : 0, bb = GEMM_B_BATCHED ? batch : 0;
        for (int kt = 0; kt < k_tiles; ++kt) {
          kiln_sm90_mbar_wait(empty(s), phase ^ 1u);
          kiln_sm90_mbar_expect_tx(full(s), GEMM_STAGE_BYTES);
          const unsigned sa = base + s * GEMM_STAGE_BYTES, sb = sa + GEMM_A_TILE_BYTES;
          const int k0 = kt * GEMM_BK;
#if GEMM_TRANS_A
#pragma unroll
          for (int j = 0; j < BM / 64; ++j) kiln_sm90_tma_load(sa + j * 8192, &tma_a, full(s), m0 + 64 * j, k0, ab);
#else
          kiln_sm90_tma_load(sa, &tma_a, full(s), k0, m0, ab);
#endif
#if GEMM_TRANS_B
          kiln_sm90_tma_load(sb, &tma_b, full(s), k0, n0, bb);
#else
#pragma unroll
          for (int j = 0; j < BN / 64; ++j) kiln_sm90_tma_load(sb + j * 8192, &tma_b, full(s), n0 + 64 * j, k0, bb);
#endif
          if (++s == STAGES) {
            s = 0;
            phase ^= 1u;
          }
        }
      }
    }
  } else {
    // Consumer warpgroup c: rows [c * 64 * WG_M, (c + 1) * 64 * WG_M) of every
    // tile (cooperative), or every CONSUMERS-th tile whole (ping-pong).
#if CONSUMERS > 1
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
#endif
    const int c = wg - 1;
    const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
    constexpr int tile_stride = GEMM_PINGPONG ? CONSUMERS : 1;  // tiles of the block per step
    const int row0 = GEMM_PINGPONG ? 0 : c * WG_M * 64;           // this consumer's rows in a tile
    float acc[WG_M][BN / 2];
    // The ring position of this consumer's first k tile: ping-pong consumers skip
    // the k tiles of the tiles the others take.
    int s = GEMM_PINGPONG ? (c * k_tiles) % STAGES : 0;
    unsigned phase = GEMM_PINGPONG ? ((c * k_tiles) / STAGES) & 1u : 0u;
    unsigned turn_phase = 0;
    bool first = true;
    for (int t = blockIdx.x + (GEMM_PINGPONG ? c : 0) * gridDim.x; t < tiles; t += tile_stride * gridDim.x) {
      int m0, n0, batch;
      kiln_sm90_tile(t, m0, n0, batch);
      if (GEMM_PINGPONG && !(c == 0 && first)) {  // the other consumer's previous mainloop is done
        kiln_sm90_mbar_wait(turn(c), turn_phase);
        turn_phase ^= 1u;
      }
      first = false;
#pragma unroll
      for (int i = 0; i < WG_M; ++i)
#pragma unroll
        for (int j = 0; j < BN / 2; ++j) acc[i][j] = 0.f;
      int prev = -1;  // the stage whose wgmmas may still be reading it
      for (int kt = 0; kt < k_tiles; ++kt) {
        kiln_sm90_mbar_wait(full(s), phase);
        const unsigned sa = base + s * GEMM_STAGE_BYTES, sb = sa + GEMM_A_TILE_BYTES;
        kiln_sm90_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < GEMM_BK / 16; ++kk) {
#if GEMM_TRANS_B
          const unsigned long long db = kiln_sm90_desc(sb + kk * 32, 16, 1024);
#else
          const unsigned long long db = kiln_sm90_desc(sb + kk * 2048, 8192, 1024);
#endif
#pragma unroll
          for (int i = 0; i < WG_M; ++i) {
            const int row = row0 + i * 64;  // m offset inside the tile
#if GEMM_TRANS_A
            const unsigned long long da = kiln_sm90_desc(sa + (row / 64) * 8192 + kk * 2048, 8192, 1024);
#else
            const unsigned long long da = kiln_sm90_desc(sa + row * 128 + kk * 32, 16, 1024);
#endif
            kiln_sm90_wgmma(acc[i], da, db);
          }
        }
        kiln_sm90_wgmma_commit();
        // The previous stage's wgmmas are done once at most this one is pending.
        kiln_sm90_wgmma_wait<1>();
        if (prev >= 0 && lane == 0) kiln_sm90_mbar_arrive(empty(prev));
        prev = s;
        if (++s == STAGES) {
          s = 0;
          phase ^= 1u;
        }
      }
      if (GEMM_PINGPONG && lane == 0) kiln_sm90_mbar_arrive(turn(1 - c));  // its turn
      kiln_sm90_wgmma_wait<0>();
      if (prev >= 0 && lane == 0) kiln_sm90_mbar_arrive(empty(prev));
      if (GEMM_PINGPONG) {  // skip the other consumers' next tiles
        const int ahead = s + (CONSUMERS - 1) * k_tiles;
        phase ^= (ahead / STAGES) & 1u;
        s = ahead % STAGES;
      }

      // Epilogue: accumulator j of m64 block i is row 16 warp + lane/4 (+8 for
      // j % 4 >= 2), column 8 (j / 4) + 2 (lane % 4) + (j % 2).
#if GEMM_TMA_STORE
      // This consumer's C tile: BN / 64 boxes of [64 WG_M rows][64 cols], 128B
      // swizzled (16-byte unit u of row r at u ^ (r % 8): a warp's 8 rows x 16 bytes
      // land in distinct banks). First wait until the previous tile's TMA store
      // has read it.
      const unsigned ct = c_tiles + c * GEMM_C_TILE_BYTES;
      const bool issuer = threadIdx.x % 128 == 0;
      if (issuer) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
      asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
#pragma unroll
      for (int i = 0; i < WG_M; ++i) {
        const int rt = i * 64 + warp * 16 + lane / 4;  // row in this consumer's tile
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const int ct_col = 8 * j + 2 * (lane % 4);  // column in the tile
          const int col = n0 + ct_col;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = rt + 8 * h, row = m0 + row0 + r;
            float v0 = 0.f, v1 = 0.f;
            if (row < GEMM_M && col < GEMM_N) {  // N % 8 == 0: col + 1 < N too
              v0 = kiln_epilogue(acc[i][4 * j + 2 * h], row, col, batch KILN_EPILOGUE_ARGS);
              v1 = kiln_epilogue(acc[i][4 * j + 2 * h + 1], row, col + 1, batch KILN_EPILOGUE_ARGS);
            }
#if GEMM_OUT_KIND == 1
            const unsigned packed = kiln_f32_to_bf16(v0) | (static_cast<unsigned>(kiln_f32_to_bf16(v1)) << 16);
#else
            const unsigned packed = kiln_f32_to_f16(v0) | (static_cast<unsigned>(kiln_f32_to_f16(v1)) << 16);
#endif
            const unsigned addr = ct + (ct_col / 64) * (64 * WG_M * 128) + r * 128 +
                                  ((((ct_col % 64) / 8) ^ (r % 8)) << 4) + (ct_col % 8) * 2;
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(packed) : "memory");
          }
        }
      }
      // Ordinary stores -> the async proxy (TMA) reads them next.
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
      if (issuer) {
#pragma unroll
        for (int b = 0; b < BN / 64; ++b) {
          kiln_sm90_tma_store(&tma_c, ct + b * (64 * WG_M * 128), n0 + 64 * b, m0 + row0, batch);
        }
        asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
      }
#else
      GEMM_OUT_T* Cb = C + (kiln_index)batch * GEMM_C_BATCH;
#pragma unroll
      for (int i = 0; i < WG_M; ++i) {
        const int r = m0 + row0 + i * 64 + warp * 16 + lane / 4;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const int col = n0 + 8 * j + 2 * (lane % 4);
          if (col >= GEMM_N) continue;
          const bool both = col + 1 < GEMM_N;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = r + 8 * h;
            if (row >= GEMM_M) continue;
            const float v0 = kiln_epilogue(acc[i][4 * j + 2 * h], row, col, batch KILN_EPILOGUE_ARGS);
            const float v1 = both ? kiln_epilogue(acc[i][4 * j + 2 * h + 1], row, col + 1, batch KILN_EPILOGUE_ARGS)
                                  : 0.f;
            kiln_sm90_store2(Cb, (kiln_index)row * GEMM_N + col, v0, v1, both);
          }
        }
      }
#endif
    }
#if GEMM_TMA_STORE
    if (threadIdx.x % 128 == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
#endif
  }
}

// The next kernel of the module defines its own configuration.
#undef GEMM_BK
#undef GEMM_THREADS
#undef GEMM_A_TILE_BYTES
#undef GEMM_B_TILE_BYTES
#undef GEMM_STAGE_BYTES
#undef GEMM_GROUP_M
#undef GEMM_C_TILE_BYTES
#undef GEMM_TMA_STORE
#undef GEMM_BF16
#undef GEMM_M
#undef GEMM_N
#undef GEMM_K
#undef GEMM_BATCH
#undef GEMM_A_BATCHED
#undef GEMM_B_BATCHED
#undef GEMM_C_BATCH
#undef GEMM_TRANS_A
#undef GEMM_TRANS_B
#undef BM
#undef BN
#undef STAGES
#undef CONSUMERS
#undef WG_M
#undef GEMM_PINGPONG
#undef GEMM_OUT_KIND
#undef GEMM_OUT_T
#undef KILN_EPILOGUE_PARAMS
#undef KILN_EPILOGUE_ARGS
