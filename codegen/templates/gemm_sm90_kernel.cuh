extern "C" __global__ void __launch_bounds__(GEMM_THREADS, 1)
#if GEMM_CLUSTER_M > 1
    __cluster_dims__(GEMM_CLUSTER_M, 1, 1)
#endif
        KILN_KERNEL(GEMM_OUT_T* __restrict__ C KILN_PROLOGUE_PARAMS KILN_EPILOGUE_PARAMS,
                    const __grid_constant__ kiln_tensor_map tma_a, const __grid_constant__ kiln_tensor_map tma_b
#if GEMM_DUAL
                    ,
                    const __grid_constant__ kiln_tensor_map tma_a2, const __grid_constant__ kiln_tensor_map tma_b2
#endif
#if GEMM_TMA_STORE
                    ,
                    const __grid_constant__ kiln_tensor_map tma_c
#endif
#if GEMM_SPLIT_K > 1 || GEMM_STREAM_K
                    ,
                    unsigned int* __restrict__ kiln_semaphores, float* __restrict__ kiln_scratch
#endif
#if GEMM_DYNAMIC_M
                    ,
                    const kiln_dims kiln_dims_
#endif
        ) {
  extern __shared__ __align__(1024) unsigned char kiln_gemm_smem_raw[];
  // Stage buffers on a 1024-byte boundary (the 128B swizzle pattern repeats every
  // 1024 bytes and the descriptors' base offset is 0), then the barriers.
  const unsigned raw = kiln_sm90_smem(kiln_gemm_smem_raw);
  const unsigned base = (raw + 1023u) & ~1023u;
  const unsigned c_tiles = base + STAGES * GEMM_STAGE_BYTES;  // GEMM_TMA_STORE: one per consumer
  const unsigned bars = c_tiles + CONSUMERS * GEMM_C_TILE_BYTES;
  auto empty = [&](int s) { return kiln_sm90_empty(bars, s); };
  auto turn = [&](int c) { return kiln_sm90_turn(bars, c); };
  const int wg = threadIdx.x / 128;
#if GEMM_DYNAMIC_M
  if (threadIdx.x == 0) kiln_gemm_rows = GEMM_M_CODE;
#endif
  if (threadIdx.x == 0) kiln_sm90_init_barriers(bars);
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
#if GEMM_DUAL
    if (threadIdx.x == 0) kiln_sm90_producer(&tma_a, &tma_b, &tma_a2, &tma_b2, walker, walkers, rank, base, bars);
#else
    if (threadIdx.x == 0) kiln_sm90_producer(&tma_a, &tma_b, nullptr, nullptr, walker, walkers, rank, base, bars);
#endif
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
      kiln_sm90_zero(acc);
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

#if GEMM_TMA_STORE
      const kiln_tensor_map* map_c = &tma_c;
#else
      const kiln_tensor_map* map_c = nullptr;
#endif
      kiln_sm90_store_tile(acc, C, map_c, c_tiles + c * GEMM_C_TILE_BYTES, c, m0 + row0, n0, batch, lane, warp,
                           cols KILN_EPILOGUE_ARGS);
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
#undef GEMM_TF32
#undef GEMM_ELEM_BYTES
#undef GEMM_BOX_K
#undef GEMM_K_STEP
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
#undef GEMM_C_COLS
#undef GEMM_C_STORE_CHUNKS
#undef GEMM_GATED
#undef GEMM_ROTARY
#undef GEMM_C_N
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
#undef GEMM_DYNAMIC_M
#undef GEMM_M_CODE
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
