// Global-memory microbenchmarks: LDG/STG at 8/16/32/64/128 bits and RED (sm_90 SASS).
// One kernel per instruction width; the cache level (L1, L2, DRAM) is chosen by the
// footprint `mask` at launch, so the same SASS is measured at several levels and the
// profiled hit rates split its counts by level (Wattchmen §3.5).
// Thread t of the grid streams element (pos + k*T + t) & mask, T = threads in the grid:
// warps stay coalesced and every element of the footprint is touched once per pass.
#include "common.cuh"

#define LDG_KERNEL(NAME, T, DECL, LOAD, ACC)                                       \
  extern "C" __global__ void NAME(MB_ARGS) {                                        \
    const T* in = (const T*)in_;                                                    \
    unsigned nt = MB_NTHREADS, pos = MB_TID, acc = 0;                               \
    MB_LOOP {                                                                       \
      MB_INNER {                                                                    \
        const T* p = in + ((pos + _k * nt) & mask);                                 \
        DECL;                                                                       \
        LOAD;                                                                       \
        acc ^= ACC;                                                                 \
      }                                                                             \
      pos += MB_UNROLL * nt;                                                        \
    }                                                                               \
    ((unsigned*)out_)[MB_TID] = acc;                                                \
  }

#define LD16 asm volatile("ld.global.u16 %0, [%1];" : "=h"(v) : "l"(p))
#define LD32 asm volatile("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(p))
#define LD64 asm volatile("ld.global.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p))
#define LD128 asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];" \
                           : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p))
#define SUM2 (v.x + v.y)
#define SUM4 ((v.x + v.y) ^ (v.z + v.w))

LDG_KERNEL(mb_ldg16, unsigned short, unsigned short v, LD16, v)
LDG_KERNEL(mb_ldg32, unsigned, unsigned v, LD32, v)
LDG_KERNEL(mb_ldg64, uint2, uint2 v, LD64, SUM2)
LDG_KERNEL(mb_ldg128, uint4, uint4 v, LD128, SUM4)

#define STG_KERNEL(NAME, T, PTX, ...)                                               \
  extern "C" __global__ void NAME(MB_ARGS) {                                        \
    T* out = (T*)out_;                                                              \
    unsigned nt = MB_NTHREADS, pos = MB_TID;                                        \
    unsigned v = ((const unsigned*)in_)[MB_TID & 4095];                             \
    MB_LOOP {                                                                       \
      MB_INNER {                                                                    \
        T* p = out + ((pos + _k * nt) & mask);                                      \
        asm volatile(PTX :: "l"(p), __VA_ARGS__ : "memory");                        \
      }                                                                             \
      pos += MB_UNROLL * nt;                                                        \
      v += 1;                                                                       \
    }                                                                               \
  }

STG_KERNEL(mb_stg32, unsigned, "st.global.u32 [%0], %1;", "r"(v))
STG_KERNEL(mb_stg64, uint2, "st.global.v2.u32 [%0], {%1, %2};", "r"(v), "r"(v ^ 1u))
STG_KERNEL(mb_stg128, uint4, "st.global.v4.u32 [%0], {%1, %2, %3, %4};",
           "r"(v), "r"(v ^ 1u), "r"(v ^ 2u), "r"(v ^ 3u))
STG_KERNEL(mb_red, unsigned, "red.global.add.u32 [%0], %1;", "r"(v))
