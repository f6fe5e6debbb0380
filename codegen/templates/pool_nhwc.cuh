// GlobalAveragePool over channels-last X [N, H, W, C] -> [N, 1, 1, C] (codegen/ops/
// reduce.cc, GlobalAveragePoolNhwc). Needs vector.cuh. The generated prefix defines:
//   kiln_in_t, kiln_out_t, kiln_idx_t   types
//   kHW, kC                             pixels, channels (the batch is an argument: it
//                                       varies on dynamic graphs)
//   kVec, kGroups                       channels a thread loads at once (16 bytes, or 1);
//                                       kC / kVec
//   kTx, kTy                            block shape, powers of two: threadIdx.x over
//                                       channel groups, threadIdx.y over pixels
//   kPix                                pixels a thread loads per round, all in flight
//   kSplits                             CTAs that share one (image, channel tile): the
//                                       grid's z, one cluster on sm_90
//   KILN_POOL_CLUSTER                   the kernel's cluster attribute (or nothing)
//   kiln_load(p, i), kiln_store(out, i, sum)   (the store divides by kHW)
// The grid is (channel tiles, images, kSplits). A CTA sums its share of the pixels in
// fp32: registers, then warp shuffles over the rows a warp holds, then a tree over the
// warps in shared memory. The kSplits CTAs of a tile then meet:
//  - sm_90: they form one cluster; after a cluster barrier the first CTA adds the
//    others' sums from their shared memory (distributed shared memory) and stores the
//    means, and a second barrier keeps their shared memory alive until it has. No
//    global memory round trip: a pool is a chain of dependent steps (load, sum, store)
//    over a feature map its producer has just left in L2, and each extra trip to L2
//    (atomics, fences, a counter) costs about as much as the loads.
//  - before sm_90: each CTA adds its sums to fp32 accumulators with atomics and the
//    last CTA of the tile to arrive (a counter) stores the means and zeroes them. The
//    counters (batch * gridDim.x) and the accumulators (batch * kC floats after them)
//    live in the launch's semaphore area, zero before and after the kernel
//    (codegen/kernel_launch.h).
constexpr int kRowsPerWarp = 32 / kTx;        // kTx divides 32, and kTx * kTy >= 32
constexpr int kWarpRows = kTy / kRowsPerWarp;  // rows left after the warp shuffles

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
static __device__ __forceinline__ void kiln_pool_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// The float at `local`'s offset in the shared memory of the cluster's CTA `rank`.
static __device__ __forceinline__ float kiln_pool_ld_rank(const float* local, unsigned rank) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(local));
  unsigned remote;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(remote) : "memory");
  return v;
}
#endif

static __device__ __forceinline__ void kiln_pool_nhwc(kiln_out_t* __restrict__ out,
                                                      const kiln_in_t* __restrict__ in,
                                                      unsigned int* __restrict__ counters, kiln_idx_t batch) {
  __shared__ float partial[kWarpRows][kTx * kVec];
  const kiln_idx_t g = (kiln_idx_t)blockIdx.x * kTx + threadIdx.x, n = blockIdx.y;
  // A whole cluster shares n, so an idle image (an empty or, on a dynamic graph,
  // smaller batch) leaves as one.
  if (n >= batch) return;
  float acc[kVec];
#pragma unroll
  for (int l = 0; l < kVec; ++l) acc[l] = 0.f;
  if (g < kGroups) {
    const kiln_in_t* p = in + n * kHW * kC + g * kVec;
    const bool vec = kVec > 1 && kiln_vec_aligned(in, kVec * sizeof(kiln_in_t));
    for (kiln_idx_t first = (kiln_idx_t)blockIdx.z * (kTy * kPix) + threadIdx.y; first < kHW;
         first += (kiln_idx_t)kSplits * kTy * kPix) {
      if (vec) {
        kiln_vec_pack<kiln_in_t, kVec> v[kPix];
#pragma unroll
        for (int k = 0; k < kPix; ++k) {
          const kiln_idx_t j = first + (kiln_idx_t)k * kTy;
          if (j < kHW) v[k] = kiln_vec_ld<kVec>(p + j * kC);
        }
#pragma unroll
        for (int k = 0; k < kPix; ++k) {
          if (first + (kiln_idx_t)k * kTy < kHW) {
#pragma unroll
            for (int l = 0; l < kVec; ++l) acc[l] += kiln_load(v[k].v, l);
          }
        }
      } else {
#pragma unroll
        for (int k = 0; k < kPix; ++k) {
          const kiln_idx_t j = first + (kiln_idx_t)k * kTy;
          if (j < kHW) {
#pragma unroll
            for (int l = 0; l < kVec; ++l) acc[l] += kiln_load(p + j * kC, l);
          }
        }
      }
    }
  }
  // The rows of one warp (a block has whole warps): lane y * kTx + x keeps x under
  // an xor by a multiple of kTx.
#pragma unroll
  for (int s = 16; s >= kTx; s /= 2) {
#pragma unroll
    for (int l = 0; l < kVec; ++l) acc[l] += __shfl_xor_sync(0xffffffffu, acc[l], s);
  }
  const int row = threadIdx.y / kRowsPerWarp;
  if (threadIdx.y % kRowsPerWarp == 0) {
#pragma unroll
    for (int l = 0; l < kVec; ++l) partial[row][threadIdx.x * kVec + l] = acc[l];
  }
  __syncthreads();
#pragma unroll
  for (int s = kWarpRows / 2; s > 0; s /= 2) {
    if (threadIdx.y < s) {
#pragma unroll
      for (int l = 0; l < kVec; ++l)
        partial[threadIdx.y][threadIdx.x * kVec + l] += partial[threadIdx.y + s][threadIdx.x * kVec + l];
    }
    __syncthreads();
  }
  const bool writer = threadIdx.y == 0 && g < kGroups;
  if (kSplits == 1) {
    if (writer) {
#pragma unroll
      for (int l = 0; l < kVec; ++l) kiln_store(out, n * kC + g * kVec + l, partial[0][threadIdx.x * kVec + l]);
    }
    return;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  kiln_pool_cluster_sync();
  if (blockIdx.z == 0 && writer) {
#pragma unroll
    for (int l = 0; l < kVec; ++l) {
      float v = partial[0][threadIdx.x * kVec + l];
#pragma unroll
      for (unsigned r = 1; r < kSplits; ++r) v += kiln_pool_ld_rank(&partial[0][threadIdx.x * kVec + l], r);
      kiln_store(out, n * kC + g * kVec + l, v);
    }
  }
  kiln_pool_cluster_sync();
#else
  float* sums = reinterpret_cast<float*>(counters + batch * gridDim.x) + n * kC;
  if (writer) {
#pragma unroll
    for (int l = 0; l < kVec; ++l) atomicAdd(sums + g * kVec + l, partial[0][threadIdx.x * kVec + l]);
  }
  __threadfence();
  __syncthreads();
  __shared__ bool last;
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    unsigned int* counter = counters + n * gridDim.x + blockIdx.x;
    last = atomicAdd(counter, 1u) == kSplits - 1;
    if (last) *counter = 0;  // zero again for the next launch
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (writer) {
#pragma unroll
    for (int l = 0; l < kVec; ++l) kiln_store(out, n * kC + g * kVec + l, atomicExch(sums + g * kVec + l, 0.f));
  }
#endif
}
