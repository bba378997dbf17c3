// Warp-group tensor-core microbenchmark: HGMMA (wgmma.mma_async, sm_90a only).
// One warp group (128 threads) per block multiplies a 64x16 f16 tile of A by a 16x64 f16 tile of
// B, both in shared memory (no-swizzle descriptors), into 32 f32 accumulators per thread,
// MB_INNER times per outer iteration. The operand values do not matter for the energy per
// instruction beyond being non-trivial; the wait after each group keeps one HGMMA in flight.
#include "common.cuh"
#include "wgmma.cuh"

extern "C" __global__ void __launch_bounds__(128) mb_hgmma_f32(MB_ARGS) {
  __shared__ __align__(128) __half sa[64 * 16];
  __shared__ __align__(128) __half sb[16 * 64];
  unsigned t = threadIdx.x;
  for (unsigned i = t; i < 64 * 16; i += blockDim.x) {
    sa[i] = __float2half(((const float*)in_)[(blockIdx.x * 1024 + i) & mask] * 1e-3f);
    sb[i] = __float2half(((const float*)in_)[(blockIdx.x * 1024 + i + 7) & mask] * 1e-3f);
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  unsigned long long da = pm_desc(sa), db = pm_desc(sb);
  float d[32] = {};
  MB_LOOP {
    MB_INNER {
      pm_hgmma_m64n64k16(d, da, db);
    }
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 32; ++j) s += d[j];
  ((float*)out_)[MB_TID] = s;
}
