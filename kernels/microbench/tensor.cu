// Tensor-core microbenchmarks: HMMA (f16/bf16/tf32 inputs), IMMA (s8), DMMA (f64) via
// mma.sync (sm_90 SASS). Four independent accumulators per warp; operands stay in registers.
// HGMMA (wgmma.mma_async) needs shared-memory descriptors and is not covered here:
// it is bucketed with the tensor instructions (Wattchmen §5.2.3).
#include "common.cuh"

extern "C" __global__ void mb_hmma_f32(MB_ARGS) {
  unsigned t = MB_TID;
  __half2 h = __float2half2_rn(((const float*)in_)[t & mask] * 1e-3f);
  unsigned a0 = *(unsigned*)&h, a1 = a0 ^ 0x00010001u, a2 = a0, a3 = a1, b0 = a0, b1 = a1;
  float d[4][4] = {};
  MB_LOOP {
    MB_INNER {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 4; ++j) s += d[j][0] + d[j][1] + d[j][2] + d[j][3];
  ((float*)out_)[t] = s;
}

extern "C" __global__ void mb_hmma_f16(MB_ARGS) {
  unsigned t = MB_TID;
  __half2 h = __float2half2_rn(((const float*)in_)[t & mask] * 1e-3f);
  unsigned a0 = *(unsigned*)&h, a1 = a0 ^ 0x00010001u, a2 = a0, a3 = a1, b0 = a0, b1 = a1;
  unsigned d[4][2] = {};
  MB_LOOP {
    MB_INNER {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, "
                     "{%2,%3,%4,%5}, {%6,%7}, {%0,%1};"
                     : "+r"(d[j][0]), "+r"(d[j][1])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
  }
  ((unsigned*)out_)[t] = d[0][0] ^ d[1][0] ^ d[2][1] ^ d[3][1];
}

extern "C" __global__ void mb_hmma_bf16(MB_ARGS) {
  unsigned t = MB_TID;
  unsigned a0 = (((const unsigned*)in_)[t & mask] & 0x3f803f80u), a1 = a0 ^ 0x00010001u;
  unsigned a2 = a0, a3 = a1, b0 = a0, b1 = a1;
  float d[4][4] = {};
  MB_LOOP {
    MB_INNER {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 4; ++j) s += d[j][0] + d[j][1] + d[j][2] + d[j][3];
  ((float*)out_)[t] = s;
}

extern "C" __global__ void mb_hmma_tf32(MB_ARGS) {
  unsigned t = MB_TID;
  unsigned a0 = ((const unsigned*)in_)[t & mask] & 0xffffe000u, a1 = a0 ^ 0x2000u;
  unsigned a2 = a0, a3 = a1, b0 = a0, b1 = a1;
  float d[4][4] = {};
  MB_LOOP {
    MB_INNER {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 4; ++j) s += d[j][0] + d[j][1] + d[j][2] + d[j][3];
  ((float*)out_)[t] = s;
}

extern "C" __global__ void mb_imma_s8(MB_ARGS) {
  unsigned t = MB_TID;
  unsigned a0 = ((const unsigned*)in_)[t & mask], a1 = a0 ^ 0x01010101u;
  unsigned a2 = a0 + t, a3 = a1, b0 = a0, b1 = a1;
  int d[4][4] = {};
  MB_LOOP {
    MB_INNER {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+r"(d[j][0]), "+r"(d[j][1]), "+r"(d[j][2]), "+r"(d[j][3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
  }
  int s = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) s ^= d[j][0] + d[j][1] + d[j][2] + d[j][3];
  ((int*)out_)[t] = s;
}

extern "C" __global__ void mb_dmma(MB_ARGS) {
  unsigned t = MB_TID;
  double a = ((const float*)in_)[t & mask] * 1e-3, b = a + 1e-4;
  double d[4][2] = {};
  MB_LOOP {
    MB_INNER {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
                     : "+d"(d[j][0]), "+d"(d[j][1]) : "d"(a), "d"(b));
    }
  }
  ((double*)out_)[t] = d[0][0] + d[1][1] + d[2][0] + d[3][1];
}
