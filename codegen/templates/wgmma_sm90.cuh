// Hopper (sm_90a) warpgroup MMA primitives shared by kiln's kernel templates: the
// shared-memory matrix descriptor (128-byte swizzle), the wgmma fence / commit / wait
// and the async-proxy fence. No macros: gemm_sm90.cuh and attention_sm90.cuh
// (codegen/ops/gemm_sm90.cc and attention.cc put it before them) configure nothing
// here. The wgmma instructions themselves are generated per shape and layout
// (codegen/ops/gemm_sm90.h, WgmmaFunction).

static __device__ __forceinline__ unsigned kiln_sm90_smem(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
static __device__ __forceinline__ void kiln_sm90_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void kiln_sm90_wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
static __device__ __forceinline__ void kiln_sm90_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Makes this thread's generic-proxy writes to shared memory (st.shared, cp.async)
// visible to the async proxy (wgmma's operand reads); a barrier after it orders them
// for the other threads' wgmmas.
static __device__ __forceinline__ void kiln_sm90_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// A shared-memory matrix descriptor with 128-byte swizzle.
static __device__ __forceinline__ unsigned long long kiln_sm90_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) |
         (static_cast<unsigned long long>(lbo >> 4) << 16) | (static_cast<unsigned long long>(sbo >> 4) << 32) |
         (1ull << 62);
}
// The descriptor of the tile `units` 16-byte units past the one `desc` describes
// (same layout). Shared-memory addresses stay below 2^18, so the start-address field
// (bits 0-13: the address >> 4) takes the units without a carry: one 32-bit add, where
// kiln_sm90_desc on the tile's address takes five instructions.
static __device__ __forceinline__ unsigned long long kiln_sm90_desc_add(unsigned long long desc, unsigned units) {
  return (desc & 0xFFFFFFFF00000000ull) | (static_cast<unsigned>(desc) + units);
}
