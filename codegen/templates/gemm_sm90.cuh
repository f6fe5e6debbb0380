// Hopper tensor-core GEMM (sm_90a only; codegen/ops/gemm_sm90.cc):
//   C[b][M,N] = kiln_epilogue(sum_k f(op(A))[b][M,K] * op(B)[b][K,N]
//                             [+ sum_k op(A2)[b][M,K2] * op(B2)[b][K2,N]])
// with fp16 or bf16 inputs and fp32 accumulation: TMA tile loads (128-byte swizzle)
// into a STAGES-deep shared-memory ring guarded by mbarriers, wgmma.m64nBNk16 from
// shared memory, one producer warpgroup and CONSUMERS consumer warpgroups
// (setmaxnreg moves registers from the producer to the consumers: 40 and 232 each
// with two, 40 and 152 with three), a persistent
// grid walking the tiles in a grouped (L2-friendly) order, and the generated
// epilogue functor applied to the accumulators before predicated stores.
// Dual (Add(A·B, A2·B2)): the producer walks the K tiles of (A, B) then those of
// (A2, B2) through the same ring, the consumers run both into the same accumulators
// (each pair with its own K and layouts). Prologue f on A: the consumers read A's
// tile from shared memory into registers (ldmatrix), apply f there and issue the
// register-A form of wgmma (B still from shared memory).
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
//   GEMM_DUAL            1: a second mainloop over A2, B2 with GEMM_K2,
//                        GEMM_A2_BATCHED, GEMM_B2_BATCHED, GEMM_TRANS_A2,
//                        GEMM_TRANS_B2, and kiln_sm90_wgmma2 (its layouts)
//   GEMM_PROLOGUE        1: A goes through GEMM_PROLOGUE_A (a functor object built
//                        from the KILN_PROLOGUE_PARAMS kernel parameters, called as
//                        f(x, row, col, batch) at stored coordinates of A on each
//                        in-range element; the rest become zeros) and
//                        kiln_sm90_wgmma_rs(float (&d)[BN / 2], const unsigned (&a)[4],
//                        unsigned long long desc_b) (A from registers). Not with
//                        GEMM_DUAL.
//   GEMM_SPLIT_K         S > 1: split-K (below); default 1. Cooperative tiles only.
//   GEMM_SWAP_AB         1: swap-AB (below); default 0. Not with GEMM_DUAL,
//                        GEMM_PROLOGUE or GEMM_C_CHUNKS > 1.
//   GEMM_STREAM_K        1: stream-K (below), with GEMM_SK_TILES (the walk's last tiles,
//                        split into even ranges of k tiles) and GEMM_GRID (the grid's
//                        CTAs); default 0. Cooperative tiles only; not with split-K,
//                        swap-AB or clusters.
//   GEMM_CLUSTER_M       2: clusters of two CTAs along M sharing B (below); default 1.
//                        Not with GEMM_SPLIT_K > 1. Swapped, the shared B is C's
//                        rows' operand (A^T): pairs of tiles of N share the activations.
//   GEMM_OUT_KIND        0 fp16, 1 bf16, 2 fp32 output; GEMM_OUT_T its storage type
//   GEMM_TMA_STORE       1: the epilogue writes each consumer's tile into shared
//                        memory (128B-swizzled [rows][64] boxes) and one thread
//                        stores it with TMA (asynchronous: the consumer goes on to
//                        its next mainloop; TMA clips partial tiles); needs a 16-bit
//                        output with N % 8 == 0 and a third tensor map (C).
//                        GEMM_C_CHUNKS (default 1, dividing BN / 64): the tile goes
//                        through a buffer of BN / GEMM_C_CHUNKS columns, chunk after
//                        chunk (less shared memory, so more stages fit).
//                        Swapped: the consumer's tile of C (BN rows of C, 64 WG_M
//                        columns) as WG_M boxes of [BN rows][64 cols], no chunks.
//                        0: predicated 4-byte stores from registers
//   KILN_EPILOGUE_PARAMS, KILN_EPILOGUE_ARGS and
//   float kiln_epilogue(float acc, int row, int col, int batch KILN_EPILOGUE_PARAMS)
//   kiln_sm90_wgmma(float (&d)[BN / 2], unsigned long long desc_a,
//                   unsigned long long desc_b)   the wgmma of this BN and layout
// Kernel parameters: (C KILN_PROLOGUE_PARAMS KILN_EPILOGUE_PARAMS, tensor map of A,
// tensor map of B [, tensor maps of A2 and B2] [, tensor map of C: {N, M, batches}
// box {64, 64 * WG_M, 1}; swapped {C's columns, C's rows, batches} box {64, BN, 1}]
// [, unsigned* kiln_semaphores, float* kiln_scratch with
// GEMM_SPLIT_K > 1 or GEMM_STREAM_K]): the pointer parameters of the source contract, then the tensor
// maps, then the workspace (codegen/op_kernels.h). The maps are rank 3 {contiguous dim, rows, batches}:
//   A (TRANS_A 0): {K, M, nb} box {64, BM, 1};   A (TRANS_A 1): {M, K, nb} box {64, GEMM_BK, 1}
//   B (TRANS_B 1): {K, N, nb} box {64, BN, 1};   B (TRANS_B 0): {N, K, nb} box {64, GEMM_BK, 1}
// all with 128-byte swizzle and zero fill out of bounds (partial tiles, K tails).
// Dynamic shared memory: 1024 (alignment) + STAGES * (BM + BN) * GEMM_BK * 2
// [+ CONSUMERS * 64 * WG_M * (BN / GEMM_C_CHUNKS) * 2 with GEMM_TMA_STORE] + 16 * STAGES
// + 16 (barriers).
//
// Shared-memory tiles (GEMM_BK = 64 k per stage, or 128). A K-major operand tile is
// [GEMM_BK / 64][rows][64] (128-byte rows, TMA's 128B swizzle, one box per 64 k):
// wgmma descriptor with SBO 1024 (8 rows), LBO unused, the k16 step +32 bytes within
// a box, the next box rows x 128 bytes on. An MN-major operand tile is
// [rows/64][GEMM_BK k][64 mn] (one TMA box per 64 columns): SBO 1024 (8 k rows), LBO
// GEMM_BK x 128 (the next 64 columns), the k16 step +2048 bytes (16 k rows).
//
// Split-K (GEMM_SPLIT_K = S > 1): the persistent walk goes over work units = tiles x
// S, unit u being split u % S of tile u / S (a tile's splits run side by side on
// neighbouring CTAs). Split s takes the k tiles [s T, min((s + 1) T, k_tiles)) of the
// tile's whole k sequence (T = ceil(k_tiles / S), the generator checks that every
// split gets one; a dual kernel's sequence is (A, B)'s k tiles then (A2, B2)'s, so a
// split may cover parts of both); the producer loads only those, the consumers run
// only those. Each consumer warpgroup reduces its own rows of the tile (its
// "sub-tile", sub = tile * CONSUMERS + c) independently of the other, as the sm_80
// template does per CTA: it stores its fp32 accumulators to kiln_scratch (slot
// sub * S + s, 64 WG_M x BN floats, thread-private layout [i][n16 pair][half][thread]
// as float4: coalesced; rows past M skipped), fences, and its first thread
// increments kiln_semaphores[sub].
// The warpgroup that sees S - 1 there arrived last: it resets the semaphore to 0 (the
// next launch, a CUDA graph replay included, finds it zero), sums the S partials in
// split order 0..S-1 (all read back through L2 with ld.cg, its own included: the bits
// do not depend on the arrival order) and runs the usual epilogue (functor, shared
// memory, TMA store). The others go on to their next unit; nobody waits for another
// CTA, so any grid size is deadlock-free. Workspace: tiles * CONSUMERS semaphores,
// tiles * S * BM * BN * 4 bytes of scratch (codegen/ops/gemm_sm90.cc). Prologues work
// unchanged (functors see absolute coordinates).
//
// Stream-K (GEMM_STREAM_K 1; G = GEMM_GRID CTAs, T tiles, the last SK = GEMM_SK_TILES
// of them stream-K tiles, K k tiles per tile): CTA w first takes the data-parallel
// tiles w, w + G, ... < T - SK whole (the generator makes T - SK a multiple of G), then
// the iterations [w I / G, (w + 1) I / G) of the stream-K tiles' concatenated k
// sequences (I = SK K, each CTA at least one), cut where a tile ends: a "unit" is a
// tile and a range [kb, ke) of its k tiles, walked by producer and consumers alike.
// A CTA's range thus starts with the tail of a tile (kb > 0), may hold whole tiles,
// and ends with the head of one (kb = 0, ke < K). Fix-up, per consumer warpgroup: a
// tail unit stores its partial (the split-K layout) into its CTA's slot of
// kiln_scratch and increments the tile's semaphore; a head unit, the last of its
// range and so later in time than the tails of its tile (each the first of a later
// CTA's range), waits until the semaphore counts all of them, resets it, and adds
// their partials in CTA order to its accumulators (fixed order: the bits do not
// depend on timing), then runs the epilogue. The waits cannot deadlock: a tail
// needs nothing before it but its CTA's data-parallel tiles, and the grid is at most
// one CTA per SM. Workspace: SK * CONSUMERS semaphores, G * BM * BN * 4 bytes of
// scratch (one partial per CTA). Every unit walks its k tiles in descending order
// (kiln_sm90_kt): all tails then start at k tile K - 1 together and the heads follow
// in step, so the CTAs that share A or B panels read the same k slices at the same
// time (ascending, each CTA started at its own offset: 1.3x slower on the H100).
//
// Clusters (GEMM_CLUSTER_M = 2, `__cluster_dims__`): the two CTAs of a cluster take
// the two tiles of one "pair" (rows m0 and m0 + BM, same columns n0); the persistent
// walk goes over pairs (kiln_sm90_tile with 2 BM rows), cluster after cluster. Both
// need the same B tile per k step, so each producer loads its own A tile and half of
// B's boxes (K-major B: the rows [r BN / 2, (r + 1) BN / 2) of the box, the tensor
// map's box being BN / 2 rows; MN-major B: the 64-column boxes j with j % 2 == r),
// multicast into the same slot of both CTAs, each CTA's full barrier counting the
// whole stage's bytes. A slot may be refilled only when the consumers of both CTAs
// have released it: every consumer warp arrives on the empty barrier of each CTA of
// the cluster (mapa, then mbarrier.arrive on the shared::cluster address with the
// default .release.cta semantics, as CUTLASS does; `.release.cluster` measured 2.4x
// slower on the H100), so an empty barrier counts 2 x its CTA's arrivals. Both CTAs walk the same pairs and k tiles, so their rings stay in
// step; a pair whose second tile starts past M still loads (zeros: TMA fills out of
// bounds) and runs its mainloop, and skips the epilogue. A cluster barrier after the
// barriers' initialisation and one before exit keep every remote arrive and
// multicast inside both CTAs' lifetimes. L2 -> SM traffic for B halves.
//
// Swap-AB (GEMM_SWAP_AB 1, few rows of C): the generator defines the swapped problem
// C^T[N, M] = B^T A^T: GEMM_M is C's N, GEMM_N is C's M, tensor map "A" is B's (TRANS_A
// = !trans_b) and "B" is A's (K-major, A stored [M, K]: TRANS_B 1, box {64, BN} with BN
// a multiple of 8, 16 when split). Everything up to the epilogue runs unchanged on that
// problem; the epilogue calls the functor with C's own (row, col) = (tile column, tile
// row). Lanes 4 apart hold neighbouring C columns: one shuffle gives each thread two
// of one C row. With GEMM_TMA_STORE the pairs go into shared memory as C's own
// [BN rows][64 columns] boxes, which one thread stores by TMA; without it, one 4-byte
// store each into C [M][N] (row length GEMM_C_LD = GEMM_M; scalar for odd lengths).
//
// Register A (GEMM_PROLOGUE): warp w of a consumer holds rows 16 w .. 16 w + 15 of
// each of its m64 blocks as the m16k16 fragments of mma.sync (thread t: rows t/4 and
// t/4 + 8, k pairs 2 (t % 4) and + 8), one ldmatrix.x4 per k16 step (.trans for an
// M-major A), 16-byte chunk c of 128-byte row r at c ^ (r % 8) (the swizzle), issued
// one step ahead (into `raw`) so its latency hides behind the previous step's
// prologue. The fragments of the four k16 steps of a K tile are distinct registers:
// before step kk overwrites its own, the wgmma groups of the three steps since may
// still run (wait 3), and each step is one wgmma group.
#ifndef GEMM_DUAL
#define GEMM_DUAL 0
#endif
#ifndef GEMM_PROLOGUE
#define GEMM_PROLOGUE 0
#endif
#ifndef KILN_PROLOGUE_PARAMS
#define KILN_PROLOGUE_PARAMS
#endif
#ifndef GEMM_SPLIT_K
#define GEMM_SPLIT_K 1
#endif
#ifndef GEMM_SWAP_AB
#define GEMM_SWAP_AB 0
#endif
#ifndef GEMM_CLUSTER_M
#define GEMM_CLUSTER_M 1
#endif
#ifndef GEMM_STREAM_K
#define GEMM_STREAM_K 0
#endif
#if GEMM_CLUSTER_M > 1 && GEMM_SPLIT_K > 1
#error "clustered GEMM with split-K"
#endif
#if GEMM_STREAM_K && (GEMM_SPLIT_K > 1 || GEMM_SWAP_AB || GEMM_CLUSTER_M > 1 || GEMM_PINGPONG)
#error "stream-K GEMM with split-K, swap-AB, clusters or ping-pong consumers"
#endif
#if GEMM_SWAP_AB && (GEMM_DUAL || GEMM_PROLOGUE || (defined(GEMM_C_CHUNKS) && GEMM_C_CHUNKS > 1))
#error "swap-AB GEMM with a dual mainloop, a prologue or C in chunks"
#endif
#if GEMM_SPLIT_K > 1 && GEMM_PINGPONG
#error "split-K GEMM with ping-pong consumers"
#endif
// k per stage: 64, or 128 (GEMM_BK 128: swapped tiles; two 64-column boxes of a
// K-major operand per stage, one box of 128 rows of an MN-major one).
#ifndef GEMM_BK
#define GEMM_BK 64
#endif
#if GEMM_BK != 64 && (GEMM_BK != 128 || !GEMM_SWAP_AB || GEMM_CLUSTER_M > 1 || GEMM_STREAM_K)
#error "GEMM_BK 128 is for swap-AB tiles without stream-K or clusters"
#endif
// The bytes of one 64-row block of an MN-major tile (GEMM_BK rows of 128 bytes).
#define GEMM_MN_BLOCK_BYTES (GEMM_BK * 128)
// C's row length (its leading dimension): swap-AB computes C^T, [GEMM_N][GEMM_M].
#define GEMM_C_LD (GEMM_SWAP_AB ? GEMM_M : GEMM_N)
#define GEMM_THREADS (128 * (CONSUMERS + 1))
// setmaxnreg's split of the 64K registers (multiples of 8, 128 x (40 + CONSUMERS x
// GEMM_CONSUMER_REGS) <= 65536): the producer (one thread issuing TMA loads) keeps
// 40, the consumers take the rest, and ptxas allocates each side's code within its
// count.
#define GEMM_CONSUMER_REGS (CONSUMERS == 3 ? 152 : 232)
#define GEMM_A_TILE_BYTES (BM * GEMM_BK * 2)
#define GEMM_B_TILE_BYTES (BN * GEMM_BK * 2)
#define GEMM_STAGE_BYTES (GEMM_A_TILE_BYTES + GEMM_B_TILE_BYTES)
#define GEMM_GROUP_M 8
#ifndef GEMM_C_CHUNKS
#define GEMM_C_CHUNKS 1
#endif
#define GEMM_C_TILE_BYTES (GEMM_TMA_STORE ? 64 * WG_M * (BN / GEMM_C_CHUNKS) * 2 : 0)  // per consumer
// The walk's work: tiles (pairs of row tiles with clusters), k tiles of 64 per tile
// (both mainloops of a dual kernel).
#define GEMM_TILES                                                                                \
  (((GEMM_M + BM * GEMM_CLUSTER_M - 1) / (BM * GEMM_CLUSTER_M)) * ((GEMM_N + BN - 1) / BN) * \
   GEMM_BATCH)
#define GEMM_K_TILES1 ((GEMM_K + GEMM_BK - 1) / GEMM_BK)
#if GEMM_DUAL
#define GEMM_K_TILES (GEMM_K_TILES1 + (GEMM_K2 + GEMM_BK - 1) / GEMM_BK)
#else
#define GEMM_K_TILES GEMM_K_TILES1
#endif
// Split-K: the k tiles of one split (the last may have fewer).
#define GEMM_SPLIT_TILES ((GEMM_K_TILES + GEMM_SPLIT_K - 1) / GEMM_SPLIT_K)

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
#if GEMM_CLUSTER_M > 1
// The same box into the same shared-memory offset of every CTA of the cluster, each
// CTA's barrier at `bar` counting its bytes.
static __device__ __forceinline__ void kiln_sm90_tma_load_multicast(unsigned dst, const kiln_tensor_map* map,
                                                                    unsigned bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, "
      "{%2, %3, %4}], [%5], %6;\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar),
      "h"(static_cast<unsigned short>((1u << GEMM_CLUSTER_M) - 1u))
      : "memory");
}
static __device__ __forceinline__ unsigned kiln_sm90_cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
#endif
// Every thread of every CTA of the cluster (a CTA barrier without clusters).
static __device__ __forceinline__ void kiln_sm90_cluster_sync() {
#if GEMM_CLUSTER_M > 1
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#else
  __syncthreads();
#endif
}
// A consumer warp's release of ring slot `bar` (its empty barrier): in every CTA of
// the cluster, whose producers multicast into it.
static __device__ __forceinline__ void kiln_sm90_release(unsigned bar) {
#if GEMM_CLUSTER_M > 1
#pragma unroll
  for (unsigned r = 0; r < GEMM_CLUSTER_M; ++r) {
    asm volatile(
        "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
        "r"(r)
        : "memory");
  }
#else
  kiln_sm90_mbar_arrive(bar);
#endif
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
// sweeping the column tiles together (the B panels they share stay in L2). With
// clusters, t is a pair of row tiles (GEMM_CLUSTER_M BM rows) and `rank` picks the
// CTA's tile of it.
static __device__ __forceinline__ void kiln_sm90_tile(int t, int rank, int& m0, int& n0, int& batch) {
  constexpr int tiles_m = (GEMM_M + BM * GEMM_CLUSTER_M - 1) / (BM * GEMM_CLUSTER_M);
  constexpr int tiles_n = (GEMM_N + BN - 1) / BN;
  batch = t / (tiles_m * tiles_n);
  const int pid = t % (tiles_m * tiles_n);
  const int group = pid / (GEMM_GROUP_M * tiles_n);
  const int first_m = group * GEMM_GROUP_M;
  const int group_size = min(tiles_m - first_m, GEMM_GROUP_M);
  m0 = (first_m + (pid % group_size)) * BM * GEMM_CLUSTER_M + rank * BM;
  n0 = ((pid % (GEMM_GROUP_M * tiles_n)) / group_size) * BN;
}

#if GEMM_STREAM_K
// Stream-K (see the top of this file): the first iteration (k tile of the stream-K
// tiles' concatenated k sequences) of CTA w, and the CTA whose range holds iteration i.
#define GEMM_SK_ITERS (static_cast<long long>(GEMM_SK_TILES) * GEMM_K_TILES)
static __device__ __forceinline__ long long kiln_sm90_sk_start(int w) {
  return static_cast<long long>(w) * GEMM_SK_ITERS / GEMM_GRID;
}
static __device__ __forceinline__ int kiln_sm90_sk_cta(long long i) {
  return static_cast<int>(((i + 1) * GEMM_GRID - 1) / GEMM_SK_ITERS);
}
#endif

// The persistent walk of one CTA (one cluster): its work units in order, each the
// tile t (kiln_sm90_tile's index) and the k tiles [kb, ke) of t's k sequence that it
// computes. Units u = first, first + step, ... of tiles x GEMM_SPLIT_K (split u % S of
// tile u / S); with stream-K the data-parallel tiles that way, then the CTA's range of
// stream-K iterations cut at tile boundaries. The producer and the consumers walk the
// same units.
struct kiln_sm90_walk {
  int u, step;
#if GEMM_STREAM_K
  long long i, end;  // stream-K iterations [i, end) still to walk
#endif
  __device__ __forceinline__ kiln_sm90_walk(int walker, int first, int stride) : u(first), step(stride) {
#if GEMM_STREAM_K
    i = kiln_sm90_sk_start(walker);
    end = kiln_sm90_sk_start(walker + 1);
#endif
  }
  __device__ __forceinline__ bool next(int& t, int& kb, int& ke, int& split) {
#if GEMM_STREAM_K
    constexpr int dp_tiles = GEMM_TILES - GEMM_SK_TILES;
    if (u < dp_tiles) {
      t = u, kb = 0, ke = GEMM_K_TILES, split = 0;
      u += step;
      return true;
    }
    if (i >= end) return false;
    const int s = static_cast<int>(i / GEMM_K_TILES);
    kb = static_cast<int>(i % GEMM_K_TILES);
    ke = static_cast<int>(min(static_cast<long long>(GEMM_K_TILES), kb + (end - i)));
    t = dp_tiles + s, split = 0;
    i += ke - kb;
    return true;
#else
    if (u >= GEMM_TILES * GEMM_SPLIT_K) return false;
    t = u / GEMM_SPLIT_K, split = u % GEMM_SPLIT_K;
    kb = split * GEMM_SPLIT_TILES;
    ke = min(kb + GEMM_SPLIT_TILES, GEMM_K_TILES);
    u += step;
    return true;
#endif
  }
};

// The ring of STAGES slots: full(s) at bars + 8 s (the producer's expect_tx + TMA
// bytes), empty(s) at bars + 8 (STAGES + s) (one arrival per consumer warp).
static __device__ __forceinline__ unsigned kiln_sm90_full(unsigned bars, int s) { return bars + 8u * s; }
static __device__ __forceinline__ unsigned kiln_sm90_empty(unsigned bars, int s) { return bars + 8u * (STAGES + s); }
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
      for (int q = 0; q < GEMM_BK / 64; ++q) kiln_sm90_tma_load(sa + q * BM * 128, map_a, full, k0 + 64 * q, m0, ab);
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
      for (int q = 0; q < GEMM_BK / 64; ++q) kiln_sm90_tma_load(sb + q * BN * 128, map_b, full, k0 + 64 * q, n0, bb);
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

// The descriptor of the tile `units` 16-byte units past the one `desc` describes
// (same layout). Shared-memory addresses stay below 2^18, so the start-address field
// (bits 0-13: the address >> 4) takes the units without a carry: one 32-bit add, where
// kiln_sm90_desc on the tile's address takes five instructions. The descriptors of the
// ring's first stage (kiln_sm90_desc on `base`) and a stage's offset in units are the
// same for every wgmma of a k tile, so the compiler computes them once.
static __device__ __forceinline__ unsigned long long kiln_sm90_desc_add(unsigned long long desc, unsigned units) {
  return (desc & 0xFFFFFFFF00000000ull) | (static_cast<unsigned>(desc) + units);
}

// The offset in 16-byte units of k16 step kk in a K-major tile of ROWS rows: 32 bytes a
// step within a box of 64 k, the next box ROWS x 128 bytes on (GEMM_BK 128).
template <int ROWS>
static __device__ __forceinline__ unsigned kiln_sm90_k_step(int kk) {
  return GEMM_BK == 64 ? kk * 2 : (kk % 4) * 2 + (kk / 4) * ROWS * 8;
}

// B's wgmma descriptor for k16 step kk of the stage whose B tile is at `sb` (the ring
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
  for (int kk = 0; kk < GEMM_BK / 16; ++kk) {
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
  constexpr int bound = GEMM_SWAP_AB ? GEMM_M : GEMM_N;  // C's columns
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
// from `part` and its four accumulators.
template <class F>
static __device__ __forceinline__ void kiln_sm90_each_float4(float (&acc)[WG_M][BN / 2], int row, const F& f) {
  constexpr int kPairs = BN / 16;  // n16 column pairs: 2 float4 (h = 0, 1) per pair
#pragma unroll
  for (int i = 0; i < WG_M; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (row + 64 * i + 8 * h >= GEMM_M) continue;
#pragma unroll
      for (int p = 0; p < kPairs; ++p) {
        f(((i * kPairs + p) * 2 + h) * 512, acc[i][8 * p + 2 * h], acc[i][8 * p + 2 * h + 1], acc[i][8 * p + 4 + 2 * h],
          acc[i][8 * p + 5 + 2 * h]);
      }
    }
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
