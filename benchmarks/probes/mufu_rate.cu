// Special-function (MUFU) and fp16x2 FMA throughput per SM (benchmarks/RESULTS.md,
// "Probes: MUFU rate and cluster launch"):
// each thread runs 4096 x 8 independent chains of one instruction (tanh.approx and
// ex2.approx in f16x2, bf16x2 and f32 forms, fma.rn.f16x2) between two clock64 reads,
// one CTA per SM; the figure is cycles per warp instruction per SM and result lanes
// per clock per SM, at 4, 8 and 16 warps per SM.
// A standalone probe, not part of the build: on the GPU machine
//   nvcc -O2 -arch=sm_90a -o mufu_rate benchmarks/probes/mufu_rate.cu && ./mufu_rate
#include <cstdio>
template <int OP>
__global__ void k(unsigned* out, int iters) {
  unsigned v[8];
  for (int i = 0; i < 8; ++i) v[i] = 0x3c003c00u + threadIdx.x * 8 + i;
  float f[8];
  for (int i = 0; i < 8; ++i) f[i] = 0.001f * (threadIdx.x + i);
  long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      if (OP == 0) asm volatile("tanh.approx.f16x2 %0, %0;" : "+r"(v[i]));
      if (OP == 1) asm volatile("tanh.approx.f32 %0, %0;" : "+f"(f[i]));
      if (OP == 2) asm volatile("ex2.approx.f16x2 %0, %0;" : "+r"(v[i]));
      if (OP == 3) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(f[i]));
      if (OP == 5) asm volatile("tanh.approx.bf16x2 %0, %0;" : "+r"(v[i]));
      if (OP == 6) asm volatile("fma.rn.f16x2 %0, %0, %0, %0;" : "+r"(v[i]));
    }
  }
  long long t1 = clock64();
  unsigned acc = 0;
  for (int i = 0; i < 8; ++i) acc += v[i] + __float_as_uint(f[i]);
  if (threadIdx.x == 0) out[blockIdx.x * 2] = (unsigned)(t1 - t0);
  if (acc == 0x12345) out[1] = acc;
}
template <int OP>
void run(const char* name, unsigned* d, int threads) {
  const int iters = 4096;
  k<OP><<<132, threads>>>(d, iters);
  cudaDeviceSynchronize();
  unsigned c[264]; cudaMemcpy(c, d, sizeof(c), cudaMemcpyDeviceToHost);
  double instr_per_sm = (double)iters * 8 * (threads / 32);  // warp instructions per SM
  std::printf("%-22s %4d threads/SM: %.2f cycles per warp instruction per SM (%.1f lanes/clk/SM)\n", name, threads,
              c[0] / instr_per_sm, 32.0 * instr_per_sm / c[0]);
}
int main() {
  unsigned* d; cudaMalloc(&d, 264 * 4);
  for (int t : {128, 256, 512}) {
    run<0>("tanh.approx.f16x2", d, t); run<5>("tanh.approx.bf16x2", d, t); run<1>("tanh.approx.f32", d, t);
    run<2>("ex2.approx.f16x2", d, t); run<3>("ex2.approx.ftz.f32", d, t);
    run<6>("fma.rn.f16x2", d, t);
  }
  return 0;
}
