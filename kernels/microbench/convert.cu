// Conversion microbenchmarks: I2F/F2I, F2F.F64.F32/F2F.F32.F64, F2FP/HADD2.F32 (f16<->f32) (sm_90 SASS).
#include "common.cuh"
#pragma nv_diag_suppress 550

extern "C" __global__ void mb_i2f(MB_ARGS) {
  const unsigned* in = (const unsigned*)in_;
  unsigned t = MB_TID;
  int i0 = in[t & mask] & 0xffff, i1 = i0 + 1, i2 = i0 + 2, i3 = i0 + 3;
  float f0, f1, f2, f3;
  MB_LOOP {
    MB_INNER {
      asm volatile("cvt.rn.f32.s32 %4, %0;\n\tcvt.rn.f32.s32 %5, %1;\n\t"
                   "cvt.rn.f32.s32 %6, %2;\n\tcvt.rn.f32.s32 %7, %3;\n\t"
                   "cvt.rzi.s32.f32 %0, %5;\n\tcvt.rzi.s32.f32 %1, %6;\n\t"
                   "cvt.rzi.s32.f32 %2, %7;\n\tcvt.rzi.s32.f32 %3, %4;"
                   : "+r"(i0), "+r"(i1), "+r"(i2), "+r"(i3),
                     "=f"(f0), "=f"(f1), "=f"(f2), "=f"(f3));
    }
  }
  ((int*)out_)[t] = i0 ^ i1 ^ i2 ^ i3;
}

extern "C" __global__ void mb_f2f_f64(MB_ARGS) {
  const float* in = (const float*)in_;
  unsigned t = MB_TID;
  float f0 = in[t & mask], f1 = f0 + 1.f, f2 = f0 + 2.f, f3 = f0 + 3.f;
  double d0, d1, d2, d3;
  MB_LOOP {
    MB_INNER {
      asm volatile("cvt.f64.f32 %4, %0;\n\tcvt.f64.f32 %5, %1;\n\t"
                   "cvt.f64.f32 %6, %2;\n\tcvt.f64.f32 %7, %3;\n\t"
                   "cvt.rn.f32.f64 %0, %5;\n\tcvt.rn.f32.f64 %1, %6;\n\t"
                   "cvt.rn.f32.f64 %2, %7;\n\tcvt.rn.f32.f64 %3, %4;"
                   : "+f"(f0), "+f"(f1), "+f"(f2), "+f"(f3),
                     "=d"(d0), "=d"(d1), "=d"(d2), "=d"(d3));
    }
  }
  ((float*)out_)[t] = f0 + f1 + f2 + f3;
}

extern "C" __global__ void mb_f2f_f16(MB_ARGS) {
  const float* in = (const float*)in_;
  unsigned t = MB_TID;
  float f0 = in[t & mask], f1 = f0 + 1.f, f2 = f0 + 2.f, f3 = f0 + 3.f;
  unsigned short h0, h1, h2, h3;
  MB_LOOP {
    MB_INNER {
      asm volatile("cvt.rn.f16.f32 %4, %0;\n\tcvt.rn.f16.f32 %5, %1;\n\t"
                   "cvt.rn.f16.f32 %6, %2;\n\tcvt.rn.f16.f32 %7, %3;\n\t"
                   "cvt.f32.f16 %0, %5;\n\tcvt.f32.f16 %1, %6;\n\t"
                   "cvt.f32.f16 %2, %7;\n\tcvt.f32.f16 %3, %4;"
                   : "+f"(f0), "+f"(f1), "+f"(f2), "+f"(f3),
                     "=h"(h0), "=h"(h1), "=h"(h2), "=h"(h3));
    }
  }
  ((float*)out_)[t] = f0 + f1 + f2 + f3;
}
