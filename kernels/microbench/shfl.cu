// Warp shuffle microbenchmarks: SHFL.IDX and SHFL.BFLY (Wattchmen Listing 1) (sm_90 SASS).
#include "common.cuh"

extern "C" __global__ void mb_shfl_idx(MB_ARGS) {
  const unsigned* in = (const unsigned*)in_;
  unsigned t = MB_TID;
  unsigned a0 = in[t & mask], a1 = a0 ^ t;
  // A non-uniform source lane permutes the warp, so repeated shuffles cannot fold.
  unsigned l0 = (t * 7u + 3u) & 31u, l1 = (t * 13u + 5u) & 31u;
  MB_LOOP {
    MB_INNER {
      asm volatile("shfl.sync.idx.b32 %0, %0, %2, 0x1f, 0xffffffff;\n\t"
                   "shfl.sync.idx.b32 %1, %1, %3, 0x1f, 0xffffffff;"
                   : "+r"(a0), "+r"(a1) : "r"(l0), "r"(l1));
    }
  }
  ((unsigned*)out_)[t] = a0 ^ a1;
}

extern "C" __global__ void mb_shfl_bfly(MB_ARGS) {
  const unsigned* in = (const unsigned*)in_;
  unsigned t = MB_TID;
  unsigned a0 = in[t & mask], a1 = a0 ^ t;
  MB_LOOP {
    MB_INNER {
      asm volatile("shfl.sync.bfly.b32 %0, %0, 1, 0x1f, 0xffffffff;\n\t"
                   "shfl.sync.bfly.b32 %1, %1, 16, 0x1f, 0xffffffff;"
                   : "+r"(a0), "+r"(a1));
    }
  }
  ((unsigned*)out_)[t] = a0 ^ a1;
}
