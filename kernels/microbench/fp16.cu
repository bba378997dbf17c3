// FP16x2 ALU microbenchmarks: HADD2, HMUL2, HFMA2 (sm_90 SASS).
#include "common.cuh"

#define FP16_KERNEL(NAME, BODY)                                                     \
  extern "C" __global__ void NAME(MB_ARGS) {                                        \
    const float* in = (const float*)in_;                                            \
    unsigned t = MB_TID;                                                            \
    __half2 h0 = __float2half2_rn(in[t & mask]), h1 = __float2half2_rn(0.5f);       \
    __half2 h2 = __float2half2_rn(0.25f), h3 = __float2half2_rn(0.125f);            \
    __half2 hb = __float2half2_rn(0.999f), hc = __float2half2_rn(1e-3f);            \
    unsigned a0 = *(unsigned*)&h0, a1 = *(unsigned*)&h1, a2 = *(unsigned*)&h2;      \
    unsigned a3 = *(unsigned*)&h3, b = *(unsigned*)&hb, c = *(unsigned*)&hc;        \
    MB_LOOP {                                                                       \
      MB_INNER {                                                                    \
        asm volatile(BODY : "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3) : "r"(b), "r"(c)); \
      }                                                                             \
    }                                                                               \
    ((unsigned*)out_)[t] = a0 ^ a1 ^ a2 ^ a3;                                       \
  }

FP16_KERNEL(mb_hadd2, "add.rn.f16x2 %0, %0, %5;\n\tadd.rn.f16x2 %1, %1, %5;\n\t"
                      "add.rn.f16x2 %2, %2, %5;\n\tadd.rn.f16x2 %3, %3, %5;")
FP16_KERNEL(mb_hmul2, "mul.rn.f16x2 %0, %0, %4;\n\tmul.rn.f16x2 %1, %1, %4;\n\t"
                      "mul.rn.f16x2 %2, %2, %4;\n\tmul.rn.f16x2 %3, %3, %4;")
FP16_KERNEL(mb_hfma2, "fma.rn.f16x2 %0, %0, %4, %5;\n\tfma.rn.f16x2 %1, %1, %4, %5;\n\t"
                      "fma.rn.f16x2 %2, %2, %4, %5;\n\tfma.rn.f16x2 %3, %3, %4, %5;")
