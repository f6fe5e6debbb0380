// Included once at the top of every kiln NVRTC module: storage types and the
// conversions between them and fp32 registers. No CUDA headers are included, so a
// module compiles in milliseconds; half and bfloat16 conversions are single PTX cvt
// instructions.
typedef unsigned short kiln_f16;   // IEEE binary16 bits
typedef unsigned short kiln_bf16;  // bfloat16 bits
typedef long long kiln_i64;
typedef int kiln_i32;
typedef signed char kiln_i8;
typedef unsigned char kiln_u8;
typedef unsigned char kiln_bool;

// A dynamic bundle's dim symbol values, the last parameter of the kernels that take
// their sizes at run time (codegen/kernel_launch.h): KILN_DIM(k) is symbol k's.
struct kiln_dims { long long v[8]; };
#define KILN_DIM(k) (kiln_dims_.v[k])

// Storage types, one per kiln dtype; kiln_load converts to fp32 (or keeps integers),
// kiln_store converts back with round-to-nearest-even.
struct kiln_f16_t { kiln_f16 bits; };
struct kiln_bf16_t { kiln_bf16 bits; };

__device__ __forceinline__ float kiln_f16_to_f32(kiln_f16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ kiln_f16 kiln_f32_to_f16(float f) {
  kiln_f16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ float kiln_bf16_to_f32(kiln_bf16 b) {
  return __uint_as_float(static_cast<unsigned int>(b) << 16);
}
__device__ __forceinline__ kiln_bf16 kiln_f32_to_bf16(float f) {
  kiln_bf16 b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
  return b;
}

// Two fp32 values as one register of two f16/bf16 (round to nearest even), `lo` in
// the low half: the element of the lower column index in an mma/wgmma fragment.
template <bool BF16>
__device__ __forceinline__ unsigned kiln_mma_pack(float lo, float hi) {
  unsigned r;
  if constexpr (BF16) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  }
  return r;
}

// Loads and stores by storage dtype name, used by generated code: KILN_LOAD_f16(p, i)
// reads element i as float; KILN_STORE_f16(p, i, v) writes float v rounded.
#define KILN_LOAD_f32(p, i) (static_cast<float>((p)[i]))
#define KILN_LOAD_f16(p, i) (kiln_f16_to_f32((p)[i]))
#define KILN_LOAD_bf16(p, i) (kiln_bf16_to_f32((p)[i]))
#define KILN_STORE_f32(p, i, v) ((p)[i] = (v))
#define KILN_STORE_f16(p, i, v) ((p)[i] = kiln_f32_to_f16(v))
#define KILN_STORE_bf16(p, i, v) ((p)[i] = kiln_f32_to_bf16(v))

typedef long long kiln_index;

// Programmatic dependent launch (sm_90 and later). The module builder puts this first
// in every kernel's body (codegen/nvrtc_module.h): wait until the grid before this one
// on the stream has finished and its writes are visible. Nothing in a kernel touches
// global memory before it, so the runtime may launch the kernel with
// cudaLaunchAttributeProgrammaticStreamSerialization: its CTAs then start as the
// previous kernel's CTAs exit, before that kernel's completion is signalled, instead of
// after. No kernel signals its dependents early (griddepcontrol.launch_dependents):
// CTAs of the next kernel waiting on SMs where the current one has room were measured
// to unbalance the next kernel's small grids (docs/gpu.md). Without the attribute
// the wait returns at once.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define KILN_GRID_DEPENDENCY_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#else
#define KILN_GRID_DEPENDENCY_WAIT() \
  do {                              \
  } while (0)
#endif
