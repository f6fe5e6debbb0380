// Vector memory access and group reductions shared by the generated pointwise and
// row kernels (codegen/ops/pointwise.cc, codegen/ops/reduce.cc); the generators put
// this text before their own. kiln_vec_pack<T, V> is V elements of storage type T in
// one aligned access of V * sizeof(T) <= 16 bytes (ld.global.v4.u32 for 8 x fp16);
// callers check the pointers' alignment at run time (kiln_vec_aligned) and fall back
// to V = 1 where a view leaves a pointer unaligned.
template <typename T, int V>
struct alignas(sizeof(T) * V) kiln_vec_pack {
  T v[V];
};
template <int V, typename T>
static __device__ __forceinline__ kiln_vec_pack<T, V> kiln_vec_ld(const T* p) {
  return *reinterpret_cast<const kiln_vec_pack<T, V>*>(p);
}
template <int V, typename T>
static __device__ __forceinline__ void kiln_vec_st(T* p, const kiln_vec_pack<T, V>& x) {
  *reinterpret_cast<kiln_vec_pack<T, V>*>(p) = x;
}
static __device__ __forceinline__ bool kiln_vec_aligned(const void* p, unsigned bytes) {
  return (reinterpret_cast<unsigned long long>(p) & (bytes - 1)) == 0;
}

// Combines v over groups of kT consecutive threads: kT a power of two <= 32 (lanes
// of one warp; xor shuffles, no shared memory, every lane of the warp must call), or
// kT == blockDim.x > 32 (shuffles within each warp, then the warps' partials through
// `smem` (32 entries); every thread of the block must call). Every thread of a group
// gets the result.
struct kiln_vec_sum {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const { return a + b; }
};
struct kiln_vec_max {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
template <int kT, typename A, typename F>
static __device__ __forceinline__ A kiln_vec_group_reduce(A v, F f, A* smem) {
  constexpr int kLanes = kT < 32 ? kT : 32;
#pragma unroll
  for (int o = kLanes / 2; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, o));
  if constexpr (kT > 32) {
    const int warp = threadIdx.x >> 5;
    __syncthreads();  // the previous call's readers are done with smem
    if ((threadIdx.x & 31) == 0) smem[warp] = v;
    __syncthreads();
    v = smem[0];
#pragma unroll
    for (int w = 1; w < kT / 32; ++w) v = f(v, smem[w]);
  }
  return v;
}
