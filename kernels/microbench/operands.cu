// Operand-toggling variants of FFMA, DMMA and HGMMA (opt-in, issue 26).
//
// The base microbenchmarks feed an instruction the same operand values again and again (ffma's
// a = a*0.999 + c sits at its fixed point after ~17k of its ~500k FMAs; the mma benchmarks reuse
// one register fragment or one shared-memory tile). The datapath then barely switches, while a
// GEMM on real data feeds every instruction new values. These variants execute the same
// instruction with operands that differ from one instruction to the next (random values from
// `in`, cycled through registers or alternating shared-memory tiles), so the energy of the
// instruction on changing data can be measured. Same signature and loop as common.cuh.
#include "common.cuh"
#include "wgmma.cuh"

// FFMA: 8 accumulators, 8 multiplicands and 4 multipliers in registers; consecutive FMAs use
// different (a, b) pairs, as a GEMM's inner loop does. acc grows ~linearly (≤ ~1e6): no overflow.
extern "C" __global__ void mb_ffma_rand(MB_ARGS) {
  const float* in = (const float*)in_;
  unsigned t = MB_TID;
  float a[8], b[4], acc[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) { a[i] = in[(t * 13 + i) & mask]; acc[i] = 0.f; }
#pragma unroll
  for (int i = 0; i < 4; ++i) b[i] = in[(t * 13 + 8 + i) & mask] - 1.5f;
  MB_LOOP {
    MB_INNER {
#pragma unroll
      for (int i = 0; i < 8; i += 4)
        asm volatile("fma.rn.f32 %0, %4, %8, %0;\n\tfma.rn.f32 %1, %5, %9, %1;\n\t"
                     "fma.rn.f32 %2, %6, %10, %2;\n\tfma.rn.f32 %3, %7, %11, %3;"
                     : "+f"(acc[i]), "+f"(acc[i + 1]), "+f"(acc[i + 2]), "+f"(acc[i + 3])
                     : "f"(a[(_k + i) & 7]), "f"(a[(_k + i + 3) & 7]), "f"(a[(_k + i + 5) & 7]),
                       "f"(a[(_k + i + 6) & 7]), "f"(b[(_k + i) & 3]), "f"(b[(_k + i + 1) & 3]),
                       "f"(b[(_k + i + 2) & 3]), "f"(b[(_k + i + 3) & 3]));
    }
  }
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) s += acc[i];
  ((float*)out_)[t] = s;
}

// DMMA m8n8k4: four independent accumulators, operands alternating between two random pairs.
extern "C" __global__ void mb_dmma_rand(MB_ARGS) {
  const float* in = (const float*)in_;
  unsigned t = MB_TID;
  double a0 = in[t & mask] - 1.5, b0 = in[(t + 7) & mask] - 1.5;
  double a1 = in[(t + 3) & mask] - 1.5, b1 = in[(t + 11) & mask] - 1.5;
  double d[4][2] = {};
  MB_LOOP {
    MB_INNER {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
                     : "+d"(d[j][0]), "+d"(d[j][1])
                     : "d"(((_k + j) & 1) ? a1 : a0), "d"(((_k + j) & 1) ? b0 : b1));
    }
  }
  ((double*)out_)[t] = d[0][0] + d[1][1] + d[2][0] + d[3][1];
}

// HGMMA m64n64k16 (sm_90a): as mb_hgmma_f32, but consecutive instructions alternate between two
// different random A and B tiles (as consecutive K-slices of a GEMM are).
extern "C" __global__ void __launch_bounds__(128) mb_hgmma_f32_rand(MB_ARGS) {
  __shared__ __align__(128) __half sa[2][64 * 16];
  __shared__ __align__(128) __half sb[2][16 * 64];
  unsigned t = threadIdx.x;
  for (unsigned i = t; i < 2 * 64 * 16; i += blockDim.x) {
    (&sa[0][0])[i] = __float2half(((const float*)in_)[(blockIdx.x * 2048 + i) & mask] - 1.5f);
    (&sb[0][0])[i] = __float2half(((const float*)in_)[(blockIdx.x * 2048 + i + 7) & mask] - 1.5f);
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  unsigned long long da[2] = {pm_desc(sa[0]), pm_desc(sa[1])};
  unsigned long long db[2] = {pm_desc(sb[0]), pm_desc(sb[1])};
  float d[32] = {};
  MB_LOOP {
    MB_INNER {
      pm_hgmma_m64n64k16(d, da[_k & 1], db[(_k >> 1) & 1]);
    }
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 32; ++j) s += d[j];
  ((float*)out_)[MB_TID] = s;
}
