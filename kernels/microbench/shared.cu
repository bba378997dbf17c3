// Shared-memory microbenchmarks: LDS (32/64/128-bit), STS (32/128-bit), ATOMS.ADD (sm_90 SASS).
// Each thread walks a conflict-free 32 KiB window; the address advances once per step.
#include "common.cuh"

#define SMEM_BYTES 32768

#define LDS_KERNEL(NAME, PTX, T, REG, ACC)                                          \
  extern "C" __global__ void NAME(MB_ARGS) {                                        \
    __shared__ __align__(16) unsigned char smem[SMEM_BYTES + 1024];                 \
    unsigned tid = threadIdx.x;                                                     \
    for (unsigned j = tid; j < (SMEM_BYTES + 1024) / 4; j += blockDim.x)            \
      ((unsigned*)smem)[j] = ((const unsigned*)in_)[j & mask];                      \
    __syncthreads();                                                                \
    unsigned base = (unsigned)__cvta_generic_to_shared(smem);                       \
    unsigned off = (tid * (unsigned)sizeof(T)) & (SMEM_BYTES - 1);                            \
    unsigned acc = 0;                                                               \
    MB_LOOP {                                                                       \
      MB_INNER {                                                                    \
        T v;                                                                        \
        asm volatile(PTX : REG(v) : "r"(base + ((off + _k * 32u * (unsigned)sizeof(T)) & (SMEM_BYTES - 1)))); \
        acc ^= ACC;                                                                 \
      }                                                                             \
      off += 4;                                                                     \
    }                                                                               \
    ((unsigned*)out_)[MB_TID] = acc;                                                \
  }

#define R32(v) "=r"(v)
LDS_KERNEL(mb_lds32, "ld.shared.u32 %0, [%1];", unsigned, R32, v)

extern "C" __global__ void mb_lds64(MB_ARGS) {
  __shared__ __align__(16) unsigned char smem[SMEM_BYTES + 1024];
  unsigned tid = threadIdx.x;
  for (unsigned j = tid; j < (SMEM_BYTES + 1024) / 4; j += blockDim.x)
    ((unsigned*)smem)[j] = ((const unsigned*)in_)[j & mask];
  __syncthreads();
  unsigned base = (unsigned)__cvta_generic_to_shared(smem);
  unsigned off = (tid * 8) & (SMEM_BYTES - 1), acc = 0;
  MB_LOOP {
    MB_INNER {
      unsigned x, y;
      asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(x), "=r"(y)
                   : "r"(base + ((off + _k * 256) & (SMEM_BYTES - 1))));
      acc ^= x + y;
    }
    off += 8;
  }
  ((unsigned*)out_)[MB_TID] = acc;
}

extern "C" __global__ void mb_lds128(MB_ARGS) {
  __shared__ __align__(16) unsigned char smem[SMEM_BYTES + 1024];
  unsigned tid = threadIdx.x;
  for (unsigned j = tid; j < (SMEM_BYTES + 1024) / 4; j += blockDim.x)
    ((unsigned*)smem)[j] = ((const unsigned*)in_)[j & mask];
  __syncthreads();
  unsigned base = (unsigned)__cvta_generic_to_shared(smem);
  unsigned off = (tid * 16) & (SMEM_BYTES - 1), acc = 0;
  MB_LOOP {
    MB_INNER {
      unsigned x, y, z, w;
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(x), "=r"(y), "=r"(z), "=r"(w)
                   : "r"(base + ((off + _k * 512) & (SMEM_BYTES - 1))));
      acc ^= (x + y) ^ (z + w);
    }
    off += 16;
  }
  ((unsigned*)out_)[MB_TID] = acc;
}

extern "C" __global__ void mb_sts32(MB_ARGS) {
  __shared__ __align__(16) unsigned char smem[SMEM_BYTES + 1024];
  unsigned tid = threadIdx.x;
  unsigned base = (unsigned)__cvta_generic_to_shared(smem);
  unsigned off = (tid * 4) & (SMEM_BYTES - 1), v = ((const unsigned*)in_)[MB_TID & mask];
  MB_LOOP {
    MB_INNER {
      asm volatile("st.shared.u32 [%0], %1;" :: "r"(base + ((off + _k * 128) & (SMEM_BYTES - 1))), "r"(v) : "memory");
    }
    off += 4;
    v += 1;
  }
  __syncthreads();
  ((unsigned*)out_)[MB_TID] = ((unsigned*)smem)[tid];
}

extern "C" __global__ void mb_sts128(MB_ARGS) {
  __shared__ __align__(16) unsigned char smem[SMEM_BYTES + 1024];
  unsigned tid = threadIdx.x;
  unsigned base = (unsigned)__cvta_generic_to_shared(smem);
  unsigned off = (tid * 16) & (SMEM_BYTES - 1), v = ((const unsigned*)in_)[MB_TID & mask];
  MB_LOOP {
    MB_INNER {
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};"
                   :: "r"(base + ((off + _k * 512) & (SMEM_BYTES - 1))),
                      "r"(v), "r"(v ^ 1u), "r"(v ^ 2u), "r"(v ^ 3u) : "memory");
    }
    off += 16;
    v += 1;
  }
  __syncthreads();
  ((unsigned*)out_)[MB_TID] = ((unsigned*)smem)[tid];
}

extern "C" __global__ void mb_atoms(MB_ARGS) {
  __shared__ __align__(16) unsigned char smem[SMEM_BYTES + 1024];
  unsigned tid = threadIdx.x;
  for (unsigned j = tid; j < SMEM_BYTES / 4; j += blockDim.x) ((unsigned*)smem)[j] = 0;
  __syncthreads();
  unsigned base = (unsigned)__cvta_generic_to_shared(smem);
  unsigned off = (tid * 4) & (SMEM_BYTES - 1), v = ((const unsigned*)in_)[MB_TID & mask];
  // A varying addend keeps ptxas from turning the add into a warp-aggregated increment.
  MB_LOOP {
    MB_INNER {
      asm volatile("red.shared.add.u32 [%0], %1;"
                   :: "r"(base + ((off + _k * 128) & (SMEM_BYTES - 1))), "r"(v) : "memory");
    }
    off += 4;
    v += 1;
  }
  __syncthreads();
  ((unsigned*)out_)[MB_TID] = ((unsigned*)smem)[tid];
}
