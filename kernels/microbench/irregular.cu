// Irregular global-memory microbenchmarks at DRAM footprint (issue 26).
//
// The global.cu benchmarks stream coalesced lines: a warp's 32-bit load touches 4 sectors of
// one 128-byte line and consecutive warps walk the footprint in address order, so every DRAM
// sector they price comes with row-buffer locality. Gathers, scatters and strided (transposed)
// accesses move one 32-byte sector per thread instead, from rows all over the device. Each
// kernel executes one LDG.E / STG.E per unrolled step, like mb_ldg32 / mb_stg32, but:
//   mb_ldg32_rand    each thread loads a pseudo-random element of the footprint (32 sectors per
//                    warp instruction, a different DRAM row for each; a gather)
//   mb_ldg32_stride  thread t loads one element per 32-byte sector, consecutive threads
//                    consecutive sectors (32 sectors per warp instruction, but the warp's 1 KiB is
//                    contiguous: uncoalesced at L1/L2, streaming at DRAM; a strided access)
//   mb_stg32_rand    each thread stores to a pseudo-random element (a scatter: partial sectors)
// The random index is a per-thread linear congruential sequence (one IMAD and a shift per
// access; its top bits index the footprint), independent of the loaded data, so many loads are
// in flight as in a gather over an index array.
#include "common.cuh"

// next pseudo-random 32-bit state; the index uses its high bits (the low ones have short periods)
#define PM_LCG(x) ((x) * 1664525u + 1013904223u)
#define PM_INDEX(x) (((x) >> 4) & mask)

extern "C" __global__ void mb_ldg32_rand(MB_ARGS) {
  const unsigned* in = (const unsigned*)in_;
  unsigned x = MB_TID * 2654435761u + 12345u, acc = 0;
  MB_LOOP {
    MB_INNER {
      x = PM_LCG(x);
      unsigned v;
      asm volatile("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(in + PM_INDEX(x)));
      acc ^= v;
    }
  }
  ((unsigned*)out_)[MB_TID] = acc;
}

extern "C" __global__ void mb_ldg32_stride(MB_ARGS) {
  const unsigned* in = (const unsigned*)in_;
  unsigned nt = MB_NTHREADS, pos = MB_TID, acc = 0;
  MB_LOOP {
    MB_INNER {
      unsigned v;  // element 8·i: one 4-byte word of each 32-byte sector
      asm volatile("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(in + (((pos + _k * nt) << 3) & mask)));
      acc ^= v;
    }
    pos += MB_UNROLL * nt;
  }
  ((unsigned*)out_)[MB_TID] = acc;
}

extern "C" __global__ void mb_stg32_rand(MB_ARGS) {
  unsigned* out = (unsigned*)out_;
  unsigned x = MB_TID * 2654435761u + 12345u;
  unsigned v = ((const unsigned*)in_)[MB_TID & 4095];
  MB_LOOP {
    MB_INNER {
      x = PM_LCG(x);
      asm volatile("st.global.u32 [%0], %1;" :: "l"(out + PM_INDEX(x)), "r"(v ^ x) : "memory");
    }
  }
}
