// HGMMA with several instructions per warp-group arrive/commit group (sm_90a, issue 26).
//
// In mb_hgmma_f32_rand every HGMMA is its own group: WARPGROUP.ARRIVE (wgmma.fence),
// HGMMA, WARPGROUP.DEPBAR (commit + wait) occur 1 : 1 : 1, so the joint solve cannot tell
// their energies apart (the ridge term splits them equally). cuBLAS issues one ARRIVE per
// four HGMMA. These kernels vary the ratios so the fit can separate them:
//   mb_hgmma_f32_rand_g2    fence, 2 HGMMA, commit, wait 0        HGMMA:ARRIVE:DEPBAR = 2:1:1
//   mb_hgmma_f32_rand_g4    fence, 4 HGMMA, commit, wait 0        4:1:1
//   mb_hgmma_f32_rand_g2x2  (fence, 2 HGMMA, commit) twice on two
//                           accumulators, then one wait 0         4:2:1
// Operands toggle as in mb_hgmma_f32_rand (two random A and B tiles; the HGMMA row used for
// workloads is the toggling one): A changes on every HGMMA, B on every second. ptxas then
// rebuilds the descriptor pair in uniform registers, 50 UMOV per 32 HGMMA in all of these, as
// in mb_hgmma_f32_rand, so UMOV would stay tied to HGMMA; hence
//   mb_hgmma_f32_rand_g4_ab as g4, but A and B change together on every HGMMA: two descriptor
//                           pairs, which ptxas keeps resident (no UMOV in the loop)
// Every kernel issues MB_UNROLL HGMMA per unrolled body.
#include "common.cuh"
#include "wgmma.cuh"

// Two random f16 tiles each of A (64x16) and B (16x64) in shared memory, as mb_hgmma_f32_rand.
#define PM_RAND_TILES                                                                          \
  __shared__ __align__(128) __half sa[2][64 * 16];                                             \
  __shared__ __align__(128) __half sb[2][16 * 64];                                             \
  for (unsigned i = threadIdx.x; i < 2 * 64 * 16; i += blockDim.x) {                           \
    (&sa[0][0])[i] = __float2half(((const float*)in_)[(blockIdx.x * 2048 + i) & mask] - 1.5f);  \
    (&sb[0][0])[i] = __float2half(((const float*)in_)[(blockIdx.x * 2048 + i + 7) & mask] - 1.5f); \
  }                                                                                            \
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");                                 \
  __syncthreads();                                                                             \
  unsigned long long da[2] = {pm_desc(sa[0]), pm_desc(sa[1])};                                 \
  unsigned long long db[2] = {pm_desc(sb[0]), pm_desc(sb[1])}

// G HGMMA per group, W groups (each on its own accumulator) per wait; AB: A and B toggle together.
template <int G, int W, bool AB>
__device__ __forceinline__ void pm_hgmma_groups(const void* __restrict__ in_, void* __restrict__ out_,
                                                long long iters, unsigned mask) {
  PM_RAND_TILES;
  float d[W][32] = {};
  MB_LOOP {
#pragma unroll
    for (int k = 0; k < MB_UNROLL / (G * W); ++k) {
#pragma unroll
      for (int w = 0; w < W; ++w) {
        pm_wgmma_fence();
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const int j = (k * W + w) * G + g;  // HGMMA index in the body: operands toggle
          pm_wgmma_m64n64k16(d[w], da[j & 1], db[AB ? j & 1 : (j >> 1) & 1]);
        }
        pm_wgmma_commit();
      }
      pm_wgmma_wait0();
    }
  }
  float s = 0.f;
#pragma unroll
  for (int w = 0; w < W; ++w)
#pragma unroll
    for (int j = 0; j < 32; ++j) s += d[w][j];
  ((float*)out_)[MB_TID] = s;
}

extern "C" __global__ void __launch_bounds__(128) mb_hgmma_f32_rand_g2(MB_ARGS) {
  pm_hgmma_groups<2, 1, false>(in_, out_, iters, mask);
}
extern "C" __global__ void __launch_bounds__(128) mb_hgmma_f32_rand_g4(MB_ARGS) {
  pm_hgmma_groups<4, 1, false>(in_, out_, iters, mask);
}
extern "C" __global__ void __launch_bounds__(128) mb_hgmma_f32_rand_g2x2(MB_ARGS) {
  pm_hgmma_groups<2, 2, false>(in_, out_, iters, mask);
}
extern "C" __global__ void __launch_bounds__(128) mb_hgmma_f32_rand_g4_ab(MB_ARGS) {
  pm_hgmma_groups<4, 1, true>(in_, out_, iters, mask);
}
