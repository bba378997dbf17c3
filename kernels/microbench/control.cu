// Control-flow microbenchmarks: BRA (a tight non-unrolled loop), predicated execution,
// BAR.SYNC, and NANOSLEEP (the static-power benchmark, Wattchmen §3.3.1) (sm_90 SASS).
#include "common.cuh"

// Loop overhead only: one IADD3/ISETP/BRA triple per trip plus a dependent add.
extern "C" __global__ void mb_bra(MB_ARGS) {
  const unsigned* in = (const unsigned*)in_;
  unsigned t = MB_TID;
  unsigned a = in[t & mask];
  long long n = iters * MB_UNROLL;
#pragma unroll 1
  for (long long i = 0; i < n; ++i) {
    asm volatile("add.u32 %0, %0, 1;" : "+r"(a));
  }
  ((unsigned*)out_)[t] = a;
}

// Predicated adds: half the lanes' guards are false, so the warp issues but masks.
extern "C" __global__ void mb_predicated(MB_ARGS) {
  const unsigned* in = (const unsigned*)in_;
  unsigned t = MB_TID;
  unsigned a0 = in[t & mask], a1 = a0 ^ t, a2 = a0 + 5u, a3 = a1 + 7u, sel = t & 1u;
  MB_LOOP {
    MB_INNER {
      asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %4, 0;\n\t"
                   "@p add.u32 %0, %0, %1;\n\t@!p add.u32 %1, %1, %0;\n\t"
                   "@p add.u32 %2, %2, %3;\n\t@!p add.u32 %3, %3, %2;\n\t}"
                   : "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3) : "r"(sel));
    }
  }
  ((unsigned*)out_)[t] = a0 ^ a1 ^ a2 ^ a3;
}

extern "C" __global__ void mb_bar(MB_ARGS) {
  const unsigned* in = (const unsigned*)in_;
  unsigned t = MB_TID;
  unsigned a = in[t & mask];
  MB_LOOP {
    MB_INNER {
      asm volatile("bar.sync 0;\n\tadd.u32 %0, %0, 1;" : "+r"(a));
    }
  }
  ((unsigned*)out_)[t] = a;
}

extern "C" __global__ void mb_nanosleep(MB_ARGS) {
  unsigned t = MB_TID;
  unsigned a = t;
#pragma unroll 1
  for (long long i = 0; i < iters; ++i) {
    asm volatile("nanosleep.u32 1000;\n\tadd.u32 %0, %0, 1;" : "+r"(a));
  }
  ((unsigned*)out_)[t] = a;
}
