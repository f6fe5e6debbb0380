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
//   GEMM_TF32            1: fp32 inputs read as tf32 (wgmma k8 .tf32; A and B K-major,
//                        no prologue), fp32 accumulation; default 0
//   GEMM_M, GEMM_N, GEMM_K, GEMM_BATCH   problem size; GEMM_BATCH output batches
//                        (with GEMM_DYNAMIC_M, below, GEMM_M is not defined, or
//                        GEMM_N when swapped: C's rows are read at run time)
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
//   GEMM_GATED           1: a gated product (fusion/fuse_gated_matmul.h): B's columns
//                        alternate in blocks of 8 between a gate and an up product of
//                        the same output columns, C has GEMM_C_N = GEMM_N / 2 columns,
//                        and float kiln_epilogue_gated(float acc, float acc_up, int row,
//                        int col, int batch KILN_EPILOGUE_PARAMS) computes C's element
//                        from the two (gemm_sm90_epilogue.cuh); default 0. Needs
//                        GEMM_TMA_STORE, BN 128 or 256, no swap-AB and no KILN_EPILOGUE_AT.
//   GEMM_ROTARY          h > 0: a rotary product (fusion/fuse_rotary_matmul.h): each
//                        column pairs with the one h away within its block of 2h, and
//                        void kiln_epilogue_rotary2(float& y0, float& y1, float x0,
//                        float x1, float p0, float p1, int row, int col, int batch
//                        KILN_EPILOGUE_PARAMS) computes C's elements at (row, col) and
//                        (row, col + 1), col even, from their products x and the
//                        partners' p (gemm_sm90_epilogue.cuh); default 0.
//                        Needs GEMM_TMA_STORE, BN a multiple of 2h, h a multiple of 8,
//                        no swap-AB and no KILN_EPILOGUE_AT.
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
// all with 128-byte swizzle and zero fill out of bounds (partial tiles, K tails); the
// boxes' 64 contiguous elements are GEMM_BOX_K (32) with GEMM_TF32.
// Dynamic shared memory: 1024 (alignment) + STAGES * (BM + BN) * GEMM_BK * GEMM_ELEM_BYTES
// [+ CONSUMERS * 64 * WG_M * (BN / GEMM_C_CHUNKS) * 2 with GEMM_TMA_STORE] + 16 * STAGES
// + 16 (barriers).
//
// Shared-memory tiles (GEMM_BK = 64 k per stage, or 128; tf32 32 or 64). A K-major
// operand tile is [GEMM_BK / GEMM_BOX_K][rows][GEMM_BOX_K] (128-byte rows, TMA's 128B
// swizzle, one box per 128 bytes of k): wgmma descriptor with SBO 1024 (8 rows), LBO
// unused, the k16 (tf32: k8) step +32 bytes within a box, the next box rows x 128
// bytes on. An MN-major operand tile is
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
// time (ascending, each CTA started at its own offset: slower, docs/kernels/gemm_sm90.md).
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
// default .release.cta semantics, as CUTLASS does; the `.release.cluster` form is
// slower: docs/kernels/gemm_sm90.md), so an empty barrier counts 2 x its CTA's
// arrivals. Both CTAs walk the same pairs and k tiles, so their rings stay in
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
#ifndef GEMM_GATED
#define GEMM_GATED 0
#endif
#if GEMM_GATED && (!GEMM_TMA_STORE || GEMM_SWAP_AB || BN % 128 != 0 || defined(KILN_EPILOGUE_AT))
#error "gated GEMM without the TMA store, swapped, of a BN other than 128 or 256, or with kiln_epilogue_at"
#endif
#ifndef GEMM_ROTARY
#define GEMM_ROTARY 0
#endif
#if GEMM_ROTARY && (!GEMM_TMA_STORE || GEMM_SWAP_AB || GEMM_ROTARY % 8 != 0 || BN % (2 * GEMM_ROTARY) != 0 || \
                    defined(KILN_EPILOGUE_AT) || GEMM_GATED)
#error "rotary GEMM without the TMA store, swapped, pairing blocks not within BN, or with kiln_epilogue_at"
#endif
// Run-time rows (GEMM_DYNAMIC_M 1, dynamic bundles): C's rows are GEMM_M_CODE, an
// expression over the kernel's kiln_dims parameter (codegen/kernel_launch.h). Thread
// 0 of each CTA writes it into shared memory before the first barrier and GEMM_M
// (swapped: GEMM_N, the kernel's columns) reads it there (device functions do not see
// the kernel's parameters). The tensor maps span the largest rows: rows past the run's
// are loaded, and a TMA store writes those of C's last tile too, inside C's buffer
// (planned for the largest rows), where nothing reads them.
#ifndef GEMM_DYNAMIC_M
#define GEMM_DYNAMIC_M 0
#endif
#if GEMM_DYNAMIC_M
#if GEMM_STREAM_K
#error "run-time rows with stream-K"
#endif
static __shared__ int kiln_gemm_rows;
#if GEMM_SWAP_AB
#define GEMM_N kiln_gemm_rows
#else
#define GEMM_M kiln_gemm_rows
#endif
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
#ifndef GEMM_TF32
#define GEMM_TF32 0
#endif
// An input element's bytes, the k of one 128-byte swizzle row (a TMA box's width: 64
// 16-bit elements, 32 fp32 ones) and the k of one wgmma (k16, or k8 for tf32: 32
// bytes of a K-major row either way, so a box takes four wgmma k steps in both).
#define GEMM_ELEM_BYTES (GEMM_TF32 ? 4 : 2)
#define GEMM_BOX_K (128 / GEMM_ELEM_BYTES)
#define GEMM_K_STEP (GEMM_TF32 ? 8 : 16)
// k per stage: one box (64, tf32 32), or two (GEMM_BK 128, tf32 64: swapped tiles;
// two boxes of a K-major operand per stage, one box of 128 rows of an MN-major one).
#ifndef GEMM_BK
#define GEMM_BK GEMM_BOX_K
#endif
#if GEMM_BK != GEMM_BOX_K && (GEMM_BK != 2 * GEMM_BOX_K || !GEMM_SWAP_AB || GEMM_CLUSTER_M > 1 || GEMM_STREAM_K)
#error "two boxes of k per stage are for swap-AB tiles without stream-K or clusters"
#endif
// wgmma's tf32 form reads both operands K-major from shared memory (no transpose).
#if GEMM_TF32 && (GEMM_TRANS_A || !GEMM_TRANS_B || GEMM_PROLOGUE || (GEMM_DUAL && (GEMM_TRANS_A2 || !GEMM_TRANS_B2)))
#error "tf32 GEMM with an M-major A, an N-major B or a prologue"
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
#define GEMM_A_TILE_BYTES (BM * GEMM_BK * GEMM_ELEM_BYTES)
#define GEMM_B_TILE_BYTES (BN * GEMM_BK * GEMM_ELEM_BYTES)
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
// Tile `t` of the persistent walk: batch, then groups of GEMM_GROUP_M row tiles
// sweeping the column tiles together (the B panels they share stay in L2). With
// clusters, t is a pair of row tiles (GEMM_CLUSTER_M BM rows) and `rank` picks the
// CTA's tile of it.
static __device__ __forceinline__ void kiln_sm90_tile(int t, int rank, int& m0, int& n0, int& batch) {
  const int tiles_m = (GEMM_M + BM * GEMM_CLUSTER_M - 1) / (BM * GEMM_CLUSTER_M);
  const int tiles_n = (GEMM_N + BN - 1) / BN;
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

