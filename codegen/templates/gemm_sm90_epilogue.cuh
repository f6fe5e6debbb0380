#ifdef KILN_EPILOGUE_PREFETCH
// An epilogue load that depends on C's column alone (a bias), p[col]: thread t of a
// consumer prefetches into L1 the t-th 128-byte line of the columns this consumer's
// tile covers, from `first` (C's columns are the kernel's rows when swapped), at
// the start of the tile. The mainloop hides the latency the epilogue's loads would
// otherwise wait out after it; L1 holds the lines (TMA and the split-K partials
// bypass it).
template <typename T>
static __device__ __forceinline__ void kiln_sm90_prefetch_columns(const T* p, int first, int t) {
  constexpr int extent = GEMM_SWAP_AB ? 64 * WG_M : BN, per_line = 128 / sizeof(T);
  const int bound = GEMM_SWAP_AB ? GEMM_M : GEMM_N;  // C's columns
  if (t <= extent / per_line) {  // one more line than the extent: `first` need not be aligned
    const int col = min(first + t * per_line, min(first + extent, bound) - 1);
    asm volatile("prefetch.global.L1 [%0];\n" ::"l"(p + col));
  }
}
#endif

// An epilogue operand dense along C's rows (a residual; KILN_EPILOGUE_PREFETCH_ROWS):
// each thread of a consumer asks L2 for one row of the consumer's tile of it, `bytes`
// from p, at the start of the tile (cp.async.bulk.prefetch: 16-byte aligned, a
// multiple of 16), so the epilogue's loads hit L2 instead of waiting for DRAM.
static __device__ __forceinline__ void kiln_sm90_prefetch_row(const void* p, int bytes) {
  if ((reinterpret_cast<unsigned long long>(p) & 15) == 0 && bytes % 16 == 0) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
  }
}

// The TMA-store epilogue's functor, where the generator emits one (KILN_EPILOGUE_AT):
// kiln_epilogue_at takes the 16-bit column operands (a bias) from registers
// (kiln_epilogue_columns, KILN_EPILOGUE_COLUMNS of them: BN / 8 registers each, at
// most 32 registers in all), loaded while the tile's last wgmmas run; and it stops
// before a last op that KILN_EPILOGUE_TAIL applies to the packed 16-bit result (a
// ReLU; GELU's tanh form for fp16). kiln_epilogue_at2 runs it on a fragment's column
// pair, reading 16-bit operands dense along the row (a residual) one 4-byte load a
// pair where KILN_EPILOGUE_PAIRS_ALIGNED (their pointers are 4-byte aligned) holds.
// The other epilogues call kiln_epilogue.
#if defined(KILN_EPILOGUE_AT) && GEMM_TMA_STORE && !GEMM_SWAP_AB && KILN_EPILOGUE_COLUMNS * BN <= 256
#define GEMM_EPILOGUE_AT 1
#ifndef KILN_EPILOGUE_PAIRS_ALIGNED
#define KILN_EPILOGUE_PAIRS_ALIGNED true
#endif
#else
#define GEMM_EPILOGUE_AT 0
#ifndef KILN_EPILOGUE_AT
struct kiln_epilogue_columns {};  // nothing held: kiln_epilogue loads the operands
#endif
#undef KILN_EPILOGUE_PAIRS_ALIGNED
#define KILN_EPILOGUE_PAIRS_ALIGNED true
#endif

#if GEMM_SWAP_AB
// Swapped: the epilogue functor on every accumulator of a consumer's tile of C^T, in
// place, at C's own (row, col) = (tile column, tile row), C's columns from col_base;
// elements outside C become zeros (the functor does not run there, so its side loads
// stay inside).
static __device__ __forceinline__ void kiln_sm90_swap_epilogue_regs(float (&acc)[WG_M][BN / 2], int col_base, int n0,
                                                                    int batch, int lane,
                                                                    int warp KILN_EPILOGUE_PARAMS) {
#pragma unroll
  for (int i = 0; i < WG_M; ++i) {
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int cr = n0 + 8 * j + 2 * (lane % 4);  // C row (and cr + 1)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int col = col_base + i * 64 + warp * 16 + lane / 4 + 8 * h;
        float& x0 = acc[i][4 * j + 2 * h];
        float& x1 = acc[i][4 * j + 2 * h + 1];
        x0 = (col < GEMM_M && cr < GEMM_N) ? kiln_epilogue(x0, cr, col, batch KILN_EPILOGUE_ARGS) : 0.f;
        x1 = (col < GEMM_M && cr + 1 < GEMM_N) ? kiln_epilogue(x1, cr + 1, col, batch KILN_EPILOGUE_ARGS) : 0.f;
      }
    }
  }
}
#endif

// The epilogue functor on every accumulator of a consumer's tile, in place (rows from
// `row_base`, columns from n0). MASK: elements outside the output become zeros (and
// the functor does not run there); without it the whole tile is inside, nothing
// conditional separates the functor's loads (a bias: shared by a column's rows), and
// row-dense operands are read in aligned pairs (kiln_epilogue_at2<true>).
template <bool MASK>
static __device__ __forceinline__ void kiln_sm90_epilogue_regs(float (&acc)[WG_M][BN / 2], int row_base, int n0,
                                                               int batch, int lane, int warp,
                                                               const kiln_epilogue_columns& cols KILN_EPILOGUE_PARAMS) {
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int col = n0 + 8 * j + 2 * (lane % 4);
#if GEMM_EPILOGUE_AT
    kiln_epilogue_column_values c0, c1;  // columns col and col + 1
    cols.at(j, c0, c1);
#endif
#pragma unroll
    for (int i = 0; i < WG_M; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row_base + i * 64 + warp * 16 + lane / 4 + 8 * h;
        float& v0 = acc[i][4 * j + 2 * h];
        float& v1 = acc[i][4 * j + 2 * h + 1];
        if (!MASK || (row < GEMM_M && col < GEMM_N)) {  // N % 8 == 0 (TMA store): col + 1 < N too
#if GEMM_EPILOGUE_AT
          kiln_epilogue_at2<!MASK>(v0, v1, row, col, batch, c0, c1 KILN_EPILOGUE_ARGS);
#else
          v0 = kiln_epilogue(v0, row, col, batch KILN_EPILOGUE_ARGS);
          v1 = kiln_epilogue(v1, row, col + 1, batch KILN_EPILOGUE_ARGS);
#endif
        } else {
          v0 = v1 = 0.f;
        }
      }
    }
  }
}

#if GEMM_ROTARY
// A rotary product: the element of column c pairs with that of column c + GEMM_ROTARY
// (c - GEMM_ROTARY in the second half of each block of 2 GEMM_ROTARY columns). Tiles
// start at multiples of BN, itself a multiple of 2 GEMM_ROTARY, so n8 block j of a
// consumer's tile pairs with block j + GEMM_ROTARY / 8 in the same thread's
// accumulators (4j + e and 4(j + GEMM_ROTARY / 8) + e). Both are read before either
// is written; kiln_epilogue_rotary2 takes a fragment row's column pair at once (its
// loads a 4-byte pair). MASK as in kiln_sm90_epilogue_regs.
template <bool MASK>
static __device__ __forceinline__ void kiln_sm90_rotary_regs(float (&acc)[WG_M][BN / 2], int row_base, int n0,
                                                             int batch, int lane, int warp KILN_EPILOGUE_PARAMS) {
  constexpr int apart = GEMM_ROTARY / 8;  // n8 blocks
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    if ((j / apart) % 2 != 0) continue;
    const int jp = j + apart;
#pragma unroll
    for (int i = 0; i < WG_M; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // the fragment's two rows, a column pair each
        const int row = row_base + i * 64 + warp * 16 + lane / 4 + 8 * h;
        const int col = n0 + 8 * j + 2 * (lane % 4);
        float& x0 = acc[i][4 * j + 2 * h];
        float& x1 = acc[i][4 * j + 2 * h + 1];
        float& p0 = acc[i][4 * jp + 2 * h];
        float& p1 = acc[i][4 * jp + 2 * h + 1];
        if (!MASK || (row < GEMM_M && col + GEMM_ROTARY < GEMM_N)) {  // N % (2 GEMM_ROTARY) == 0
          float y0, y1, z0, z1;
          kiln_epilogue_rotary2(y0, y1, x0, x1, p0, p1, row, col, batch KILN_EPILOGUE_ARGS);
          kiln_epilogue_rotary2(z0, z1, p0, p1, x0, x1, row, col + GEMM_ROTARY, batch KILN_EPILOGUE_ARGS);
          x0 = y0, x1 = y1, p0 = z0, p1 = z1;
        } else {
          x0 = x1 = p0 = p1 = 0.f;
        }
      }
    }
  }
}
#endif

#if GEMM_GATED
// A gated product: n8 blocks 2p and 2p + 1 of a consumer's tile hold the gate and up
// products of the same 8 columns of C (B's columns alternate in blocks of 8), so each
// thread holds both of the elements it pairs, in accumulators 8p + e and 8p + 4 + e.
// kiln_epilogue_gated of the two becomes accumulator 4p + e: the first half of acc then
// holds C's tile of BN / 2 columns from `c0` in the usual fragment layout (in place:
// block p is written after blocks 2p and 2p + 1 are read, and p <= 2p). MASK as in
// kiln_sm90_epilogue_regs.
template <bool MASK>
static __device__ __forceinline__ void kiln_sm90_gated_regs(float (&acc)[WG_M][BN / 2], int row_base, int c0,
                                                            int batch, int lane, int warp KILN_EPILOGUE_PARAMS) {
#pragma unroll
  for (int p = 0; p < BN / 16; ++p) {
#pragma unroll
    for (int i = 0; i < WG_M; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = row_base + i * 64 + warp * 16 + lane / 4 + 8 * (e / 2);
        const int col = c0 + 8 * p + 2 * (lane % 4) + e % 2;
        const float gate = acc[i][8 * p + e], up = acc[i][8 * p + 4 + e];
        acc[i][4 * p + e] = !MASK || (row < GEMM_M && col < GEMM_C_N)
                                ? kiln_epilogue_gated(gate, up, row, col, batch KILN_EPILOGUE_ARGS)
                                : 0.f;
      }
    }
  }
}
// C's tile: BN / 2 columns, through the C buffer (sized for BN / GEMM_C_CHUNKS
// columns) in half as many chunks.
#define GEMM_C_COLS (BN / 2)
#define GEMM_C_STORE_CHUNKS (GEMM_C_CHUNKS > 1 ? GEMM_C_CHUNKS / 2 : 1)
#else
#define GEMM_C_COLS BN
#define GEMM_C_STORE_CHUNKS GEMM_C_CHUNKS
#endif

static __device__ __forceinline__ void kiln_sm90_store2(GEMM_OUT_T* __restrict__ C, kiln_index i, float v0, float v1,
                                                        bool both) {
#if GEMM_OUT_KIND == 2
  if (both && (GEMM_C_LD % 2 == 0)) {
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
  if (both && (GEMM_C_LD % 2 == 0)) {
    *reinterpret_cast<unsigned*>(C + i) = h0 | (h1 << 16);
  } else {
    C[i] = static_cast<GEMM_OUT_T>(h0);
    if (both) C[i + 1] = static_cast<GEMM_OUT_T>(h1);
  }
#endif
}

#if GEMM_SPLIT_K > 1 || GEMM_STREAM_K
// fp32x4 through L2 only (the partials of other CTAs must not come from a stale L1).
// Plain intrinsics, not volatile asm: the compiler keeps the loads of a partial in
// flight together (a volatile asm per load would wait out each one's L2 latency
// before the next) and still orders them after the barriers (asm with a memory
// clobber) that publish the partials.
static __device__ __forceinline__ void kiln_sm90_st_cg(float* p, float a, float b, float c, float d) {
  __stcg(reinterpret_cast<float4*>(p), make_float4(a, b, c, d));
}
static __device__ __forceinline__ void kiln_sm90_ld_cg(const float* p, float (&v)[4]) {
  const float4 x = __ldcg(reinterpret_cast<const float4*>(p));
  v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
}

// A warpgroup's partial (its fp32 accumulators of a tile) in kiln_scratch: kPart
// floats in a thread-private layout, float4 (i, p, h) of thread `tid` at
// part + ((i * kPairs + p) * 2 + h) * 512 + 4 tid (coalesced), a float4 holding four
// accumulators of one output row (n8 blocks 2p and 2p + 1, half h). Rows past M are
// neither stored nor read (M = 1 moves 1/64 of the tile): their accumulators are zero
// or left as they are, which the epilogue masks anyway. `part` includes 4 tid, `row`
// is the thread's first output row (row_base + 16 warp + lane / 4).
#define GEMM_PART_FLOATS (128 * WG_M * (BN / 2))
// f(offset, a, b, c, d) on each float4 of this thread's partial in range: its offset
// from `part` and its four accumulators. MASK: skip the rows past M.
template <bool MASK, class F>
static __device__ __forceinline__ void kiln_sm90_each_float4_in(float (&acc)[WG_M][BN / 2], int row, const F& f) {
  constexpr int kPairs = BN / 16;  // n16 column pairs: 2 float4 (h = 0, 1) per pair
#pragma unroll
  for (int i = 0; i < WG_M; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (MASK && row + 64 * i + 8 * h >= GEMM_M) continue;
#pragma unroll
      for (int p = 0; p < kPairs; ++p) {
        f(((i * kPairs + p) * 2 + h) * 512, acc[i][8 * p + 2 * h], acc[i][8 * p + 2 * h + 1], acc[i][8 * p + 4 + 2 * h],
          acc[i][8 * p + 5 + 2 * h]);
      }
    }
}
// With M read at run time (GEMM_DYNAMIC_M), the check on M once for all of the
// thread's rows, then none per row block: the checks per block measured slower in the
// split-K reduction (benchmarks/results/dynamic_shapes_profile_h200_2026-12-04b.txt).
// With M fixed the one path (two cost registers: a residual tile spilled).
template <class F>
static __device__ __forceinline__ void kiln_sm90_each_float4(float (&acc)[WG_M][BN / 2], int row, const F& f) {
#if GEMM_DYNAMIC_M
  if (row + 64 * (WG_M - 1) + 8 < GEMM_M) {
    kiln_sm90_each_float4_in<false>(acc, row, f);
    return;
  }
#endif
  kiln_sm90_each_float4_in<true>(acc, row, f);
}
static __device__ __forceinline__ void kiln_sm90_store_partial(float (&acc)[WG_M][BN / 2], float* part, int row) {
  kiln_sm90_each_float4(acc, row, [&](int off, float& a, float& b, float& c, float& d) {
    kiln_sm90_st_cg(part + off, a, b, c, d);
  });
}
// acc += the partial at `part` (same layout).
static __device__ __forceinline__ void kiln_sm90_add_partial(float (&acc)[WG_M][BN / 2], const float* part,
                                                             int row) {
  kiln_sm90_each_float4(acc, row, [&](int off, float& a, float& b, float& c, float& d) {
    float w[4];
    kiln_sm90_ld_cg(part + off, w);
    a += w[0], b += w[1], c += w[2], d += w[3];
  });
}
// After this thread's partial stores: visible GPU-wide, then the warpgroup (named
// barrier 1 + c, its 128 threads) has stored all of its partial.
static __device__ __forceinline__ void kiln_sm90_partial_stored(int c) {
  __threadfence();
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
}
#endif

#if GEMM_SPLIT_K > 1
// The split-K reduction of consumer c's rows of tile t (see the top of this file):
// true in the warpgroup that arrived last, with acc = the sum of the S partials in
// split order; false in the others. `tid` is the thread's index in its warpgroup,
// `row_base` the output row of the warpgroup's first row. Named barrier 1 + c orders
// the stores before the count and broadcasts who was last.
static __device__ __forceinline__ bool kiln_sm90_split_reduce(float (&acc)[WG_M][BN / 2],
                                                              unsigned int* __restrict__ semaphores,
                                                              float* __restrict__ scratch, int t, int c, int split,
                                                              int tid, int row_base) {
  const unsigned sub = static_cast<unsigned>(t) * CONSUMERS + c;
  float* part = scratch + (kiln_index)sub * GEMM_SPLIT_K * GEMM_PART_FLOATS + tid * 4;
  const int row = row_base + (tid / 32) * 16 + (tid % 32) / 4;
  kiln_sm90_store_partial(acc, part + (kiln_index)split * GEMM_PART_FLOATS, row);
  kiln_sm90_partial_stored(c);
  unsigned last = 0;
  if (tid == 0) {
    const unsigned arrived = atomicAdd(semaphores + sub, 1u);
    if (arrived == GEMM_SPLIT_K - 1) {
      atomicExch(semaphores + sub, 0u);  // every split is in: reset
      last = 1;
    }
    __threadfence();
  }
  asm volatile(
      "{\n.reg .pred p, q;\nsetp.ne.u32 p, %1, 0;\nbar.red.or.pred q, %2, 128, p;\nselp.u32 %0, 1, 0, q;\n}\n"
      : "=r"(last)
      : "r"(last), "r"(1 + c)
      : "memory");
  if (!last) return false;
  // All S partials read back through L2, its own included: the bits do not depend on
  // which split arrived last.
#pragma unroll
  for (int i = 0; i < WG_M; ++i)
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) acc[i][j] = 0.f;
#pragma unroll 1
  for (int sp = 0; sp < GEMM_SPLIT_K; ++sp) kiln_sm90_add_partial(acc, part + (kiln_index)sp * GEMM_PART_FLOATS, row);
  return true;
}
#endif  // GEMM_SPLIT_K > 1

#if GEMM_STREAM_K
// The stream-K fix-up of consumer c's rows after unit (t, [kb, ke)) of CTA `walker`
// (see the top of this file): true when acc then holds the whole tile (the epilogue
// runs), false when another CTA finishes it. A whole tile needs nothing. A unit
// without the tile's first k tile is the first unit of its CTA's range: its partial
// goes to the CTA's slot and the tile's semaphore counts it. The unit with the first
// k tile is the last of its CTA's range: it waits until the semaphore counts every
// later CTA whose range meets the tile, resets it, and adds their partials in CTA
// order to its own accumulators.
static __device__ __forceinline__ bool kiln_sm90_stream_fixup(float (&acc)[WG_M][BN / 2],
                                                              unsigned int* __restrict__ semaphores,
                                                              float* __restrict__ scratch, int t, int kb, int ke,
                                                              int walker, int c, int tid, int row_base) {
  if (kb == 0 && ke == GEMM_K_TILES) return true;
  const int s = t - (GEMM_TILES - GEMM_SK_TILES);  // the stream-K tile
  unsigned int* sem = semaphores + s * CONSUMERS + c;
  const int row = row_base + (tid / 32) * 16 + (tid % 32) / 4;
  auto slot = [&](int w) { return scratch + ((kiln_index)w * CONSUMERS + c) * GEMM_PART_FLOATS + tid * 4; };
  if (kb != 0) {
    kiln_sm90_store_partial(acc, slot(walker), row);
    kiln_sm90_partial_stored(c);
    if (tid == 0) atomicAdd(sem, 1u);
    return false;
  }
  const int last = kiln_sm90_sk_cta(static_cast<long long>(s) * GEMM_K_TILES + GEMM_K_TILES - 1);
  if (tid == 0) {
    const unsigned want = static_cast<unsigned>(last - walker);
    unsigned got;
    while (true) {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(got) : "l"(sem) : "memory");
      if (got >= want) break;
      __nanosleep(32);
    }
    atomicExch(sem, 0u);  // every contributor is in: reset for the next launch
    __threadfence();
  }
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
#pragma unroll 1
  for (int w = walker + 1; w <= last; ++w) kiln_sm90_add_partial(acc, slot(w), row);
  return true;
}
#endif  // GEMM_STREAM_K


// The stores of a consumer's finished tile (its rows from r0, columns from n0),
// which the kernel calls once the mainloop and any split-K / stream-K reduction are
// done. Accumulator j of m64 block i is row 16 warp + lane/4 (+8 for j % 4 >= 2),
// column 8 (j / 4) + 2 (lane % 4) + (j % 2).
#if GEMM_TMA_STORE && !GEMM_SWAP_AB
// Through this consumer's shared-memory C tile at `ct` and TMA (consumer c's named
// barrier 1 + c).
static __device__ __forceinline__ void kiln_sm90_store_tile(float (&acc)[WG_M][BN / 2], GEMM_OUT_T* __restrict__ C,
                                                           const kiln_tensor_map* map_c, unsigned ct, int c, int r0,
                                                           int n0, int batch, int lane, int warp,
                                                           const kiln_epilogue_columns& cols KILN_EPILOGUE_PARAMS) {
  // The functor on every accumulator first, in place: no shared-memory store
  // (an asm with a memory clobber) sits between its loads (a bias, a residual),
  // so the compiler batches them, and this overlaps the previous tile's TMA
  // store. Tiles inside the output skip the per-element bounds and read row-dense
  // operands in 4-byte pairs, unless those are not 4-byte aligned.
#if GEMM_GATED
  const int c0 = n0 / 2;  // C's first column: the tile's BN columns of B pair into BN / 2
  if (r0 + 64 * WG_M <= GEMM_M && c0 + GEMM_C_COLS <= GEMM_C_N) {
    kiln_sm90_gated_regs<false>(acc, r0, c0, batch, lane, warp KILN_EPILOGUE_ARGS);
  } else {
    kiln_sm90_gated_regs<true>(acc, r0, c0, batch, lane, warp KILN_EPILOGUE_ARGS);
  }
#elif GEMM_ROTARY
  const int c0 = n0;
  if (r0 + 64 * WG_M <= GEMM_M && n0 + BN <= GEMM_N) {
    kiln_sm90_rotary_regs<false>(acc, r0, n0, batch, lane, warp KILN_EPILOGUE_ARGS);
  } else {
    kiln_sm90_rotary_regs<true>(acc, r0, n0, batch, lane, warp KILN_EPILOGUE_ARGS);
  }
#else
  const int c0 = n0;
  if (r0 + 64 * WG_M <= GEMM_M && n0 + BN <= GEMM_N && KILN_EPILOGUE_PAIRS_ALIGNED) {
    kiln_sm90_epilogue_regs<false>(acc, r0, n0, batch, lane, warp, cols KILN_EPILOGUE_ARGS);
  } else {
    kiln_sm90_epilogue_regs<true>(acc, r0, n0, batch, lane, warp, cols KILN_EPILOGUE_ARGS);
  }
#endif
  // This consumer's C tile (GEMM_C_COLS: BN columns, or BN / 2 gated), in
  // GEMM_C_STORE_CHUNKS chunks of GEMM_C_COLS / GEMM_C_STORE_CHUNKS columns
  // through one shared-memory buffer of (BN / GEMM_C_CHUNKS) / 64 boxes of
  // [64 WG_M rows][64 cols], 128B swizzled (16-byte unit u of row r at u ^ (r % 8):
  // a warp's 8 rows x 16 bytes land in distinct banks). Before each chunk, wait
  // until the previous TMA store (the previous chunk's, or the previous tile's)
  // has read the buffer.
  // One loop with constant bounds over the tile's n8 columns (j), chunk boundaries
  // where j crosses them: a loop over chunks with j's range depending on it is not
  // unrolled, which puts the accumulators in local memory (and breaks wgmma's
  // asynchronous writes to them).
  constexpr int chunk_cols = GEMM_C_COLS / GEMM_C_STORE_CHUNKS, chunk_j = chunk_cols / 8;
  const bool issuer = threadIdx.x % 128 == 0;
#pragma unroll
  for (int j = 0; j < GEMM_C_COLS / 8; ++j) {
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
          kiln_sm90_tma_store(map_c, ct + b * (64 * WG_M * 128), c0 + q * chunk_cols + 64 * b, r0, batch);
        }
        asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
      }
    }
  }
}
#elif GEMM_SWAP_AB
// Swapped (a tile of C^T): through shared memory and TMA when GEMM_TMA_STORE, else
// from registers.
static __device__ __forceinline__ void kiln_sm90_store_tile(float (&acc)[WG_M][BN / 2], GEMM_OUT_T* __restrict__ C,
                                                           const kiln_tensor_map* map_c, unsigned ct, int c, int r0,
                                                           int n0, int batch, int lane, int warp,
                                                           const kiln_epilogue_columns& cols KILN_EPILOGUE_PARAMS) {
  // Swapped: this tile is of C^T (rows: C's columns, columns: C's rows). The
  // functor sees C's own (row, col); C is stored row-major [M][N] (here
  // [GEMM_N][GEMM_M]). Lanes 4 apart hold neighbouring C columns of the same C
  // rows: one shuffle gives each thread two adjacent columns of one C row, a 4-byte
  // store (the even thread of the pair takes its first C row, the odd its second).
  const bool odd = (lane / 4) % 2 == 1;
  // The functor on every accumulator first, in place (elements outside C become
  // zeros), then the pairs.
  kiln_sm90_swap_epilogue_regs(acc, r0, n0, batch, lane, warp KILN_EPILOGUE_ARGS);
#if GEMM_TMA_STORE
  // Through shared memory: the shuffled pairs into this consumer's WG_M boxes of
  // [BN rows of C][64 columns], 128B swizzled (a warp's 8 C rows x 16 bytes land
  // in distinct banks), once the previous TMA store has read them; one thread
  // stores the boxes (TMA clips what lies outside C).
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
    for (int i = 0; i < WG_M; ++i) kiln_sm90_tma_store(map_c, ct + i * (BN * 128), r0 + 64 * i, n0, batch);
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
  }
#else
  // From registers: one 4-byte store a pair.
  GEMM_OUT_T* Cb = C + (kiln_index)batch * GEMM_C_BATCH;
#pragma unroll
  for (int i = 0; i < WG_M; ++i) {
    const int r = r0 + i * 64 + warp * 16 + lane / 4;  // C column
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
}
#else
// From registers, the functor on each pair as it is stored.
static __device__ __forceinline__ void kiln_sm90_store_tile(float (&acc)[WG_M][BN / 2], GEMM_OUT_T* __restrict__ C,
                                                           const kiln_tensor_map* map_c, unsigned ct, int c, int r0,
                                                           int n0, int batch, int lane, int warp,
                                                           const kiln_epilogue_columns& cols KILN_EPILOGUE_PARAMS) {
  GEMM_OUT_T* Cb = C + (kiln_index)batch * GEMM_C_BATCH;
#pragma unroll
  for (int i = 0; i < WG_M; ++i) {
    const int r = r0 + i * 64 + warp * 16 + lane / 4;
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
}
#endif
