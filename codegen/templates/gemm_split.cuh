// Split-K's arrival count, shared by gemm_sm80.cuh and gemm_simt.cuh (GemmSourceTail
// puts it before either): once every thread of the CTA has stored its partial, the
// partials are fenced GPU-wide and one thread counts the CTA in at its output tile's
// semaphore. True in every thread of the CTA that arrived last of `splits`, which
// also resets the semaphore to 0 for the next launch (a CUDA graph replay included).
static __device__ __forceinline__ bool kiln_gemm_split_last(unsigned int* __restrict__ semaphores, unsigned tile,
                                                            int splits) {
  __threadfence();  // this thread's partial is visible GPU-wide before the count
  __syncthreads();
  unsigned arrived = 0;
  if (threadIdx.x == 0) {
    arrived = atomicAdd(semaphores + tile, 1u);
    if (arrived == static_cast<unsigned>(splits) - 1) atomicExch(semaphores + tile, 0u);  // every split is in
    __threadfence();
  }
  return __syncthreads_or(threadIdx.x == 0 && arrived == static_cast<unsigned>(splits) - 1);
}
