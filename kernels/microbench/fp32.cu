// FP32 ALU microbenchmarks: FADD, FMUL, FFMA, FMNMX, FSETP/FSEL, MUFU.*  (sm_90 SASS).
// Four independent dependency chains per thread keep the pipes busy; explicit
// rounding (.rn) stops ptxas from contracting add/mul pairs into FFMA.
#include "common.cuh"

#define FP32_KERNEL(NAME, INSTR)                                                    \
  extern "C" __global__ void NAME(MB_ARGS) {                                        \
    const float* in = (const float*)in_;                                            \
    unsigned t = MB_TID;                                                            \
    float a0 = in[t & mask], a1 = a0 + 0.25f, a2 = a0 + 0.5f, a3 = a0 + 0.75f;      \
    float c = 0.999f + 1e-6f * in[(t + 7) & mask];                                  \
    MB_LOOP {                                                                       \
      MB_INNER {                                                                    \
        asm volatile(INSTR " %0, %0, %4;\n\t" INSTR " %1, %1, %4;\n\t"              \
                     INSTR " %2, %2, %4;\n\t" INSTR " %3, %3, %4;"                  \
                     : "+f"(a0), "+f"(a1), "+f"(a2), "+f"(a3) : "f"(c));            \
      }                                                                             \
    }                                                                               \
    ((float*)out_)[t] = a0 + a1 + a2 + a3;                                          \
  }

FP32_KERNEL(mb_fadd, "add.rn.f32")
FP32_KERNEL(mb_fmul, "mul.rn.f32")
FP32_KERNEL(mb_fmnmx, "min.f32")

extern "C" __global__ void mb_ffma(MB_ARGS) {
  const float* in = (const float*)in_;
  unsigned t = MB_TID;
  float a0 = in[t & mask], a1 = a0 + 0.25f, a2 = a0 + 0.5f, a3 = a0 + 0.75f;
  float b = 0.999f, c = 1e-3f * in[(t + 7) & mask];
  MB_LOOP {
    MB_INNER {
      asm volatile("fma.rn.f32 %0, %0, %4, %5;\n\tfma.rn.f32 %1, %1, %4, %5;\n\t"
                   "fma.rn.f32 %2, %2, %4, %5;\n\tfma.rn.f32 %3, %3, %4, %5;"
                   : "+f"(a0), "+f"(a1), "+f"(a2), "+f"(a3) : "f"(b), "f"(c));
    }
  }
  ((float*)out_)[t] = a0 + a1 + a2 + a3;
}

// FSETP + FSEL: compare and select, both chained.
extern "C" __global__ void mb_fsetp(MB_ARGS) {
  const float* in = (const float*)in_;
  unsigned t = MB_TID;
  float a0 = in[t & mask], a1 = a0 + 0.25f, c = in[(t + 7) & mask];
  MB_LOOP {
    MB_INNER {
      asm volatile("{\n\t.reg .pred p, q;\n\t"
                   "setp.lt.f32 p, %0, %2;\n\tsetp.gt.f32 q, %1, %2;\n\t"
                   "selp.f32 %0, %1, %0, p;\n\tselp.f32 %1, %0, %1, q;\n\t}"
                   : "+f"(a0), "+f"(a1) : "f"(c));
    }
  }
  ((float*)out_)[t] = a0 + a1;
}

// MUFU (special function unit): one op per chain, .ftz so no denormal fix-up code.
#define MUFU_KERNEL(NAME, INSTR)                                                    \
  extern "C" __global__ void NAME(MB_ARGS) {                                        \
    const float* in = (const float*)in_;                                            \
    unsigned t = MB_TID;                                                            \
    float a0 = in[t & mask], a1 = a0 + 0.25f, a2 = a0 + 0.5f, a3 = a0 + 0.75f;      \
    MB_LOOP {                                                                       \
      MB_INNER {                                                                    \
        asm volatile(INSTR " %0, %0;\n\t" INSTR " %1, %1;\n\t"                      \
                     INSTR " %2, %2;\n\t" INSTR " %3, %3;"                          \
                     : "+f"(a0), "+f"(a1), "+f"(a2), "+f"(a3));                     \
      }                                                                             \
    }                                                                               \
    ((float*)out_)[t] = a0 + a1 + a2 + a3;                                          \
  }

MUFU_KERNEL(mb_mufu_ex2, "ex2.approx.ftz.f32")
MUFU_KERNEL(mb_mufu_rsq, "rsqrt.approx.ftz.f32")
MUFU_KERNEL(mb_mufu_sin, "sin.approx.ftz.f32")
MUFU_KERNEL(mb_mufu_lg2, "lg2.approx.ftz.f32")

// rcp(rcp(x)) folds away, so each reciprocal is followed by an FADD (measured by mb_fadd).
extern "C" __global__ void mb_mufu_rcp(MB_ARGS) {
  const float* in = (const float*)in_;
  unsigned t = MB_TID;
  float a0 = in[t & mask], a1 = a0 + 0.25f, c = 1e-3f * in[(t + 7) & mask];
  MB_LOOP {
    MB_INNER {
      asm volatile("rcp.approx.ftz.f32 %0, %0;\n\tadd.rn.f32 %0, %0, %2;\n\t"
                   "rcp.approx.ftz.f32 %1, %1;\n\tadd.rn.f32 %1, %1, %2;"
                   : "+f"(a0), "+f"(a1) : "f"(c));
    }
  }
  ((float*)out_)[t] = a0 + a1;
}
