extern "C" __global__ void __launch_bounds__(GEMM_THREADS, 1)
#if GEMM_CLUSTER_M > 1
    __cluster_dims__(GEMM_CLUSTER_M, 1, 1)
#endif
    KILN_KERNEL(GEMM_OUT_T* __restrict__ C KILN_PROLOGUE_PARAMS KILN_EPILOGUE_PARAMS,
                const __grid_constant__ kiln_tensor_map tma_a, const __grid_constant__ kiln_tensor_map tma_b
#if GEMM_DUAL
                , const __grid_constant__ kiln_tensor_map tma_a2, const __grid_constant__ kiln_tensor_map tma_b2
#endif
#if GEMM_TMA_STORE
                , const __grid_constant__ kiln_tensor_map tma_c
#endif
#if GEMM_SPLIT_K > 1 || GEMM_STREAM_K
                , unsigned int* __restrict__ kiln_semaphores, float* __restrict__ kiln_scratch
#endif
) {
  extern __shared__ __align__(1024) unsigned char kiln_gemm_smem_raw[];
  // Stage buffers on a 1024-byte boundary (the 128B swizzle pattern repeats every
  // 1024 bytes and the descriptors' base offset is 0), then the barriers.
  const unsigned raw = kiln_sm90_smem(kiln_gemm_smem_raw);
  const unsigned base = (raw + 1023u) & ~1023u;
  const unsigned c_tiles = base + STAGES * GEMM_STAGE_BYTES;  // GEMM_TMA_STORE: one per consumer
  const unsigned bars = c_tiles + CONSUMERS * GEMM_C_TILE_BYTES;
  auto full = [&](int s) { return kiln_sm90_full(bars, s); };
  auto empty = [&](int s) { return kiln_sm90_empty(bars, s); };
  // Ping-pong turns: turn(c) completes when the other consumer's mainloop is done.
  auto turn = [&](int c) { return bars + 8u * (2 * STAGES + c); };
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      kiln_sm90_mbar_init(full(s), 1);
      kiln_sm90_mbar_init(empty(s), (GEMM_PINGPONG ? 4 : CONSUMERS * 4) * GEMM_CLUSTER_M);
    }
    kiln_sm90_mbar_init(turn(0), 4);
    kiln_sm90_mbar_init(turn(1), 4);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  kiln_sm90_cluster_sync();  // the barriers, before any (remote) arrive or multicast
#if GEMM_CLUSTER_M > 1
  const int rank = static_cast<int>(kiln_sm90_cluster_rank());
#else
  const int rank = 0;
#endif
  // The walk: work units (tiles, or pairs of tiles with clusters) from this CTA's (or
  // cluster's) index, in strides of the grid's CTAs (clusters).
  const int walker = blockIdx.x / GEMM_CLUSTER_M, walkers = gridDim.x / GEMM_CLUSTER_M;

  constexpr int k_tiles1 = GEMM_K_TILES1, k_tiles = GEMM_K_TILES;  // ring slots per tile (unsplit)
  static_assert(GEMM_SPLIT_K == 1 || (GEMM_SPLIT_K - 1) * GEMM_SPLIT_TILES < k_tiles, "split-K: a split without a k tile");
#if GEMM_STREAM_K
  static_assert(GEMM_SK_TILES <= GEMM_TILES && GEMM_GRID <= GEMM_SK_ITERS, "stream-K: a CTA without an iteration");
#endif

  if (wg == 0) {
    // Producer warpgroup: one thread issues every TMA load.
#if CONSUMERS > 1
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
#endif
    if (threadIdx.x == 0) {
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(&tma_a)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(&tma_b)) : "memory");
#if GEMM_DUAL
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(&tma_a2)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(&tma_b2)) : "memory");
#endif
      int s = 0;
      unsigned phase = 0;
      kiln_sm90_walk walk(walker, walker, walkers);
      int t, kb, ke, split;
      while (walk.next(t, kb, ke, split)) {
        int m0, n0, batch;
        kiln_sm90_tile(t, rank, m0, n0, batch);
        kiln_sm90_produce<GEMM_TRANS_A, GEMM_TRANS_B>(&tma_a, &tma_b, kb, min(ke, k_tiles1), m0, n0,
                                                      GEMM_A_BATCHED ? batch : 0, GEMM_B_BATCHED ? batch : 0, rank,
                                                      base, bars, s, phase);
#if GEMM_DUAL
        kiln_sm90_produce<GEMM_TRANS_A2, GEMM_TRANS_B2>(&tma_a2, &tma_b2, max(kb - k_tiles1, 0), ke - k_tiles1, m0,
                                                        n0, GEMM_A2_BATCHED ? batch : 0, GEMM_B2_BATCHED ? batch : 0,
                                                        rank, base, bars, s, phase);
#endif
      }
    }
  } else {
    // Consumer warpgroup c: rows [c * 64 * WG_M, (c + 1) * 64 * WG_M) of every
    // tile (cooperative), or every CONSUMERS-th tile whole (ping-pong).
#if CONSUMERS > 1
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(GEMM_CONSUMER_REGS));
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
    kiln_sm90_walk walk(walker, walker + (GEMM_PINGPONG ? c : 0) * walkers, tile_stride * walkers);
    int t, kb, ke, split;
    while (walk.next(t, kb, ke, split)) {
      int m0, n0, batch;
      kiln_sm90_tile(t, rank, m0, n0, batch);
      if (GEMM_PINGPONG && !(c == 0 && first)) {  // the other consumer's previous mainloop is done
        kiln_sm90_mbar_wait(turn(c), turn_phase);
        turn_phase ^= 1u;
      }
      first = false;
#ifdef KILN_EPILOGUE_PREFETCH
      KILN_EPILOGUE_PREFETCH(GEMM_SWAP_AB ? m0 + row0 : n0, static_cast<int>(threadIdx.x % 128));
#endif
#if defined(KILN_EPILOGUE_PREFETCH_ROWS) && GEMM_EPILOGUE_AT
      for (int r = threadIdx.x % 128; r < 64 * WG_M; r += 128) {
        const int prow = m0 + row0 + r, pcol = n0, pbytes = 2 * min(BN, GEMM_N - n0);  // plain names: a macro
        if (prow < GEMM_M) KILN_EPILOGUE_PREFETCH_ROWS(prow, pcol, batch, pbytes);
      }
#endif
#pragma unroll
      for (int i = 0; i < WG_M; ++i)
#pragma unroll
        for (int j = 0; j < BN / 2; ++j) {
          acc[i][j] = 0.f;
          // Each zero in its own register here, before the mainloop: otherwise the
          // compiler may copy one zero into an m64 block's accumulators just before that
          // block's first wgmma, after the other block's, and ptxas then waits for the
          // wgmmas in flight (C7517/C7519) or serializes them (C7520).
          asm volatile("" : "+f"(acc[i][j])::"memory");
        }
      int prev = -1;  // the stage whose wgmmas may still be reading it
#if GEMM_PROLOGUE
      kiln_sm90_consume_rs(acc, kb, ke, base, bars, m0, row0, batch, lane, warp, s, phase, prev, GEMM_PROLOGUE_A);
#else
      kiln_sm90_consume<GEMM_TRANS_A, GEMM_TRANS_B, 0>(acc, kb, min(ke, k_tiles1), base, bars, row0, lane == 0, s,
                                                       phase, prev);
#endif
#if GEMM_DUAL
#if GEMM_SPLIT_K > 1 || GEMM_STREAM_K
      // A split (a stream-K unit) may have no k tile of the first pair: with wgmmas in flight where the
      // paths meet, ptxas would serialize every wgmma of the kernel (C7515).
      kiln_sm90_wgmma_wait<0>();
#endif
      kiln_sm90_consume<GEMM_TRANS_A2, GEMM_TRANS_B2, 1>(acc, max(kb - k_tiles1, 0), ke - k_tiles1, base, bars, row0,
                                                         lane == 0, s, phase, prev);
#endif
      if (GEMM_PINGPONG && lane == 0) kiln_sm90_mbar_arrive(turn(1 - c));  // its turn
      kiln_epilogue_columns cols;
#if GEMM_EPILOGUE_AT
      // While the last wgmmas run (from L1: KILN_EPILOGUE_PREFETCH).
      cols.load(n0 + 2 * (lane % 4), GEMM_N KILN_EPILOGUE_ARGS);
#endif
      kiln_sm90_wgmma_wait<0>();
      if (prev >= 0 && lane == 0) kiln_sm90_release(empty(prev));
      if (GEMM_PINGPONG) {  // skip the other consumers' next tiles
        const int ahead = s + (CONSUMERS - 1) * k_tiles;
        phase ^= (ahead / STAGES) & 1u;
        s = ahead % STAGES;
      }
#if GEMM_SPLIT_K > 1
      if (!kiln_sm90_split_reduce(acc, kiln_semaphores, kiln_scratch, t, c, split, threadIdx.x % 128, m0 + row0)) {
        continue;  // another split of this tile finishes it
      }
#elif GEMM_STREAM_K
      if (!kiln_sm90_stream_fixup(acc, kiln_semaphores, kiln_scratch, t, kb, ke, walker, c, threadIdx.x % 128,
                                  m0 + row0)) {
        continue;  // the CTA with the tile's first k tiles finishes it
      }
#endif
      if (m0 + row0 >= GEMM_M) continue;  // rows past M only (a cluster pair's second tile)

      // Epilogue: accumulator j of m64 block i is row 16 warp + lane/4 (+8 for
      // j % 4 >= 2), column 8 (j / 4) + 2 (lane % 4) + (j % 2).
#if GEMM_TMA_STORE && !GEMM_SWAP_AB
      // The functor on every accumulator first, in place: no shared-memory store
      // (an asm with a memory clobber) sits between its loads (a bias, a residual),
      // so the compiler batches them, and this overlaps the previous tile's TMA
      // store. Tiles inside the output skip the per-element bounds and read row-dense
      // operands in 4-byte pairs, unless those are not 4-byte aligned.
      if (m0 + row0 + 64 * WG_M <= GEMM_M && n0 + BN <= GEMM_N && KILN_EPILOGUE_PAIRS_ALIGNED) {
        kiln_sm90_epilogue_regs<false>(acc, m0 + row0, n0, batch, lane, warp, cols KILN_EPILOGUE_ARGS);
      } else {
        kiln_sm90_epilogue_regs<true>(acc, m0 + row0, n0, batch, lane, warp, cols KILN_EPILOGUE_ARGS);
      }
      // This consumer's C tile, in GEMM_C_CHUNKS chunks of BN / GEMM_C_CHUNKS columns
      // through one shared-memory buffer of (BN / GEMM_C_CHUNKS) / 64 boxes of
      // [64 WG_M rows][64 cols], 128B swizzled (16-byte unit u of row r at u ^ (r % 8):
      // a warp's 8 rows x 16 bytes land in distinct banks). Before each chunk, wait
      // until the previous TMA store (the previous chunk's, or the previous tile's)
      // has read the buffer.
      // One loop with constant bounds over the tile's n8 columns (j), chunk boundaries
      // where j crosses them: a loop over chunks with j's range depending on it is not
      // unrolled, which puts the accumulators in local memory (and breaks wgmma's
      // asynchronous writes to them).
      constexpr int chunk_cols = BN / GEMM_C_CHUNKS, chunk_j = chunk_cols / 8;
      const unsigned ct = c_tiles + c * GEMM_C_TILE_BYTES;
      const bool issuer = threadIdx.x % 128 == 0;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int q = j / chunk_j;  // the chunk
        if (j % chunk_j == 0) {
          if (issuer) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
          asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
        }
        const int ct_col = 8 * j + 2 * (lane % 4) - q * chunk_cols;  // column in the chunk
#pragma unroll
        for (int i = 0; i < WG_M; ++i) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = i * 64 + warp * 16 + lane / 4 + 8 * h;  // row in this consumer's tile
            unsigned packed = kiln_mma_pack<GEMM_OUT_KIND == 1>(acc[i][4 * j + 2 * h], acc[i][4 * j + 2 * h + 1]);
#if GEMM_EPILOGUE_AT && defined(KILN_EPILOGUE_TAIL)
            packed = KILN_EPILOGUE_TAIL(packed);
#endif
            const unsigned addr = ct + (ct_col / 64) * (64 * WG_M * 128) + r * 128 +
                                  ((((ct_col % 64) / 8) ^ (r % 8)) << 4) + (ct_col % 8) * 2;
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(packed) : "memory");
          }
        }
        if (j % chunk_j == chunk_j - 1) {
          // Ordinary stores -> the async proxy (TMA) reads them next.
          asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
          asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
          if (issuer) {
#pragma unroll
            for (int b = 0; b < chunk_cols / 64; ++b) {
              kiln_sm90_tma_store(&tma_c, ct + b * (64 * WG_M * 128), n0 + q * chunk_cols + 64 * b, m0 + row0,
                                  batch);
            }
            asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
          }
        }
      }
#elif GEMM_SWAP_AB
      // Swapped: this tile is of C^T (rows: C's columns, columns: C's rows). The
      // functor sees C's own (row, col); C is stored row-major [M][N] (here
      // [GEMM_N][GEMM_M]). Lanes 4 apart hold neighbouring C columns of the same C
      // rows: one shuffle gives each thread two adjacent columns of one C row, a 4-byte
      // store (the even thread of the pair takes its first C row, the odd its second).
      const bool odd = (lane / 4) % 2 == 1;
      // The functor on every accumulator first, in place (elements outside C become
      // zeros), then the pairs.
      kiln_sm90_swap_epilogue_regs(acc, m0 + row0, n0, batch, lane, warp KILN_EPILOGUE_ARGS);
#if GEMM_TMA_STORE
      // Through shared memory: the shuffled pairs into this consumer's WG_M boxes of
      // [BN rows of C][64 columns], 128B swizzled (a warp's 8 C rows x 16 bytes land
      // in distinct banks), once the previous TMA store has read them; one thread
      // stores the boxes (TMA clips what lies outside C).
      const unsigned ct = c_tiles + c * GEMM_C_TILE_BYTES;
      const bool issuer = threadIdx.x % 128 == 0;
      if (issuer) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
      asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
#pragma unroll
      for (int i = 0; i < WG_M; ++i) {
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const float x0 = acc[i][4 * j + 2 * h], x1 = acc[i][4 * j + 2 * h + 1];
            const float got = __shfl_xor_sync(0xffffffffu, odd ? x0 : x1, 4);
            const int row = 8 * j + 2 * (lane % 4) + (odd ? 1 : 0);      // C row in the tile
            const int col = warp * 16 + lane / 4 + 8 * h - (odd ? 1 : 0);  // the pair's first C column in the box
            const unsigned packed = kiln_mma_pack<GEMM_OUT_KIND == 1>(odd ? got : x0, odd ? x1 : got);
            const unsigned addr = ct + i * (BN * 128) + row * 128 + (((col / 8) ^ (row % 8)) << 4) + (col % 8) * 2;
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(packed) : "memory");
          }
        }
      }
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
      if (issuer) {
#pragma unroll
        for (int i = 0; i < WG_M; ++i) kiln_sm90_tma_store(&tma_c, ct + i * (BN * 128), m0 + row0 + 64 * i, n0, batch);
        asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
      }
#else
      // From registers: one 4-byte store a pair.
      GEMM_OUT_T* Cb = C + (kiln_index)batch * GEMM_C_BATCH;
#pragma unroll
      for (int i = 0; i < WG_M; ++i) {
        const int r = m0 + row0 + i * 64 + warp * 16 + lane / 4;  // C column
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const int cr = n0 + 8 * j + 2 * (lane % 4);  // C row (and cr + 1)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int col = r + 8 * h;
            const float x0 = acc[i][4 * j + 2 * h], x1 = acc[i][4 * j + 2 * h + 1];
            // Even thread (C column col, even): keeps (cr, col), gets (cr, col + 1);
            // odd thread (col odd): keeps (cr + 1, col), gets (cr + 1, col - 1).
            const float give = odd ? x0 : x1;
            const float got = __shfl_xor_sync(0xffffffffu, give, 4);
            const int crow = odd ? cr + 1 : cr;
            const int c0 = odd ? col - 1 : col;  // the pair's first C column
            const float v0 = odd ? got : x0, v1 = odd ? x1 : got;
            if (crow < GEMM_N && c0 < GEMM_M) {
              kiln_sm90_store2(Cb, (kiln_index)crow * GEMM_M + c0, v0, v1, c0 + 1 < GEMM_M);
            }
          }
        }
      }
#endif  // GEMM_TMA_STORE (swapped)
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
#if GEMM_CLUSTER_M > 1
  __syncwarp();
  kiln_sm90_cluster_sync();  // the other CTA's last arrives on this one's barriers are done
#endif
}

// The next kernel of the module defines its own configuration.
#undef GEMM_BK
#undef GEMM_MN_BLOCK_BYTES
#undef GEMM_C_LD
#undef GEMM_THREADS
#undef GEMM_CONSUMER_REGS
#undef GEMM_A_TILE_BYTES
#undef GEMM_B_TILE_BYTES
#undef GEMM_STAGE_BYTES
#undef GEMM_GROUP_M
#undef GEMM_C_TILE_BYTES
#undef GEMM_C_CHUNKS
#undef GEMM_TILES
#undef GEMM_K_TILES1
#undef GEMM_K_TILES
#undef GEMM_SPLIT_TILES
#undef GEMM_SK_ITERS
#undef GEMM_PART_FLOATS
#undef GEMM_STREAM_K
#undef GEMM_SK_TILES
#undef GEMM_GRID
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
#undef GEMM_DUAL
#undef GEMM_K2
#undef GEMM_A2_BATCHED
#undef GEMM_B2_BATCHED
#undef GEMM_TRANS_A2
#undef GEMM_TRANS_B2
#undef GEMM_PROLOGUE
#undef GEMM_SPLIT_K
#undef GEMM_SWAP_AB
#undef GEMM_CLUSTER_M
#undef GEMM_PROLOGUE_A
#undef KILN_PROLOGUE_PARAMS
#undef KILN_EPILOGUE_PARAMS
#undef KILN_EPILOGUE_ARGS
#undef KILN_EPILOGUE_PREFETCH
#undef KILN_EPILOGUE_PREFETCH_ROWS
#undef KILN_EPILOGUE_COLUMNS
#undef GEMM_EPILOGUE_AT
#undef KILN_EPILOGUE_AT
#undef KILN_EPILOGUE_PAIRS_ALIGNED
#undef KILN_EPILOGUE_TAIL
