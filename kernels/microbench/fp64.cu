// FP64 ALU microbenchmarks: DADD, DMUL, DFMA (sm_90 SASS).
#include "common.cuh"

#define FP64_KERNEL(NAME, BODY)                                                     \
  extern "C" __global__ void NAME(MB_ARGS) {                                        \
    const float* in = (const float*)in_;                                            \
    unsigned t = MB_TID;                                                            \
    double a0 = in[t & mask], a1 = a0 + 0.25, a2 = a0 + 0.5, a3 = a0 + 0.75;        \
    double b = 0.999, c = 1e-3 * in[(t + 7) & mask];                                \
    MB_LOOP {                                                                       \
      MB_INNER {                                                                    \
        asm volatile(BODY : "+d"(a0), "+d"(a1), "+d"(a2), "+d"(a3) : "d"(b), "d"(c)); \
      }                                                                             \
    }                                                                               \
    ((double*)out_)[t] = a0 + a1 + a2 + a3;                                         \
  }

FP64_KERNEL(mb_dadd, "add.rn.f64 %0, %0, %5;\n\tadd.rn.f64 %1, %1, %5;\n\t"
                     "add.rn.f64 %2, %2, %5;\n\tadd.rn.f64 %3, %3, %5;")
FP64_KERNEL(mb_dmul, "mul.rn.f64 %0, %0, %4;\n\tmul.rn.f64 %1, %1, %4;\n\t"
                     "mul.rn.f64 %2, %2, %4;\n\tmul.rn.f64 %3, %3, %4;")
FP64_KERNEL(mb_dfma, "fma.rn.f64 %0, %0, %4, %5;\n\tfma.rn.f64 %1, %1, %4, %5;\n\t"
                     "fma.rn.f64 %2, %2, %4, %5;\n\tfma.rn.f64 %3, %3, %4, %5;")
