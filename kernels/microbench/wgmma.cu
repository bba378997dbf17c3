// Warp-group tensor-core microbenchmark: HGMMA (wgmma.mma_async, sm_90a only).
// One warp group (128 threads) per block multiplies a 64x16 f16 tile of A by a 16x64 f16 tile of
// B, both in shared memory (no-swizzle descriptors), into 32 f32 accumulators per thread,
// MB_INNER times per outer iteration. The operand values do not matter for the energy per
// instruction beyond being non-trivial; the wait after each group keeps one HGMMA in flight.
#include "common.cuh"

__device__ __forceinline__ unsigned long long pm_desc(const void* smem) {
  // matrix descriptor: start address >> 4 (bits 0-13), leading byte offset 128 B >> 4
  // (bits 16-29), stride byte offset 256 B >> 4 (bits 32-45), no swizzle (bits 62-63 = 0)
  unsigned long long a = (unsigned long long)__cvta_generic_to_shared(smem);
  return ((a & 0x3FFFF) >> 4) | (8ull << 16) | (16ull << 32);
}

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
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                   "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
                   "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}"
                   : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                   : "l"(da), "l"(db));
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    }
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 32; ++j) s += d[j];
  ((float*)out_)[MB_TID] = s;
}
