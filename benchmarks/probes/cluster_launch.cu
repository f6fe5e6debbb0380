// What thread-block clusters cost at launch on this GPU (benchmarks/RESULTS.md,
// "Probes: MUFU rate and cluster launch"): for clusters of 1, 2 and 4 CTAs shaped like
// the sm90 GEMM's (384 threads, 200 KB of dynamic shared memory, so one CTA per SM),
// grids of 128 and 132 CTAs:
//   - cudaOccupancyMaxActiveClusters: how many clusters fit at once;
//   - microseconds per launch over 200 back-to-back launches (CUDA events), with an
//     empty kernel and with one that spins 10 us;
//   - from %globaltimer in each CTA: the spread of the CTAs' start times and the
//     span from the first start to the last end, and how many distinct SMs ran them.
// Clustered kernels sync the cluster at their start and end, as the GEMM does.
// A standalone probe, not part of the build: on the GPU machine
//   nvcc -O2 -arch=sm_90a -o cluster_launch benchmarks/probes/cluster_launch.cu && ./cluster_launch
#include <cooperative_groups.h>
#include <cstdio>
#include <vector>
#include <algorithm>
namespace cg = cooperative_groups;
__device__ __forceinline__ unsigned long long gtime() {
  unsigned long long t; asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ unsigned smid() { unsigned s; asm volatile("mov.u32 %0, %smid;" : "=r"(s)); return s; }
template <bool SYNC>
__global__ void k(long long spin_ns, unsigned long long* out) {
  extern __shared__ unsigned char smem[];
  if (SYNC) cg::this_cluster().sync();
  unsigned long long t0 = gtime();
  if (threadIdx.x == 0) smem[0] = 1;
  while ((long long)(gtime() - t0) < spin_ns) {}
  if (SYNC) cg::this_cluster().sync();
  unsigned long long t1 = gtime();
  if (threadIdx.x == 0 && out) { out[3 * blockIdx.x] = t0; out[3 * blockIdx.x + 1] = t1; out[3 * blockIdx.x + 2] = smid(); }
}
int main() {
  const int smem = 200 * 1024, threads = 384;
  cudaFuncSetAttribute(k<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaFuncSetAttribute(k<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaFuncSetAttribute(k<true>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  unsigned long long* out; cudaMalloc(&out, 3 * 1024 * sizeof(unsigned long long));
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int cl : {1, 2, 4}) {
    for (int grid : {128, 132}) {
      if (grid % cl) continue;
      cudaLaunchConfig_t cfg = {}; cudaLaunchAttribute attr[1];
      cfg.gridDim = dim3(grid); cfg.blockDim = dim3(threads); cfg.dynamicSmemBytes = smem;
      attr[0].id = cudaLaunchAttributeClusterDimension; attr[0].val.clusterDim.x = cl; attr[0].val.clusterDim.y = 1; attr[0].val.clusterDim.z = 1;
      cfg.attrs = attr; cfg.numAttrs = 1;
      int maxc = -1; cudaOccupancyMaxActiveClusters(&maxc, cl > 1 ? (void*)k<true> : (void*)k<false>, &cfg);
      for (long long spin : {0LL, 10000LL}) {
        auto launch = [&](unsigned long long* o) {
          if (cl > 1) return cudaLaunchKernelEx(&cfg, k<true>, spin, o);
          return cudaLaunchKernelEx(&cfg, k<false>, spin, o);
        };
        for (int i = 0; i < 20; ++i) launch(nullptr);
        cudaEventRecord(a);
        const int n = 200;
        for (int i = 0; i < n; ++i) launch(nullptr);
        cudaEventRecord(b); cudaEventSynchronize(b);
        float ms; cudaEventElapsedTime(&ms, a, b);
        cudaError_t e = launch(out); cudaDeviceSynchronize();
        std::vector<unsigned long long> h(3 * grid);
        cudaMemcpy(h.data(), out, h.size() * 8, cudaMemcpyDeviceToHost);
        unsigned long long s0 = ~0ull, s1 = 0, e0 = ~0ull, e1 = 0;
        for (int i = 0; i < grid; ++i) { s0 = std::min(s0, h[3*i]); s1 = std::max(s1, h[3*i]); e0 = std::min(e0, h[3*i+1]); e1 = std::max(e1, h[3*i+1]); }
        std::vector<int> sms; for (int i = 0; i < grid; ++i) sms.push_back((int)h[3*i+2]);
        std::sort(sms.begin(), sms.end()); int distinct = std::unique(sms.begin(), sms.end()) - sms.begin();
        std::printf("cluster %d grid %3d max_active_clusters %3d spin %5lld ns: %.2f us/launch, start spread %.2f us, span %.2f us, distinct SMs %d %s\n",
                    cl, grid, maxc, spin, 1000.0 * ms / n, (s1 - s0) / 1000.0, (e1 - s0) / 1000.0, distinct, cudaGetErrorString(e));
      }
    }
  }
  return 0;
}
