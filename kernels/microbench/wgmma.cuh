// Warp-group MMA pieces shared by wgmma.cu (mb_hgmma_f32) and operands.cu (mb_hgmma_f32_rand):
// the shared-memory matrix descriptor and one HGMMA m64n64k16 f32 += f16*f16 issued and waited
// for (sm_90a only). Inline, so each kernel's SASS is what it was with its own copy.
#pragma once

__device__ __forceinline__ unsigned long long pm_desc(const void* smem) {
  // matrix descriptor: start address >> 4 (bits 0-13), leading byte offset 128 B >> 4
  // (bits 16-29), stride byte offset 256 B >> 4 (bits 32-45), no swizzle (bits 62-63 = 0)
  unsigned long long a = (unsigned long long)__cvta_generic_to_shared(smem);
  return ((a & 0x3FFFF) >> 4) | (8ull << 16) | (16ull << 32);
}

// The pieces of one warp-group MMA, for kernels that put several HGMMA in one group
// (wgmma_groups.cu): wgmma.fence (SASS WARPGROUP.ARRIVE), the MMA, commit and wait (together
// WARPGROUP.DEPBAR.LE).
__device__ __forceinline__ void pm_wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void pm_wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void pm_wgmma_wait0() {
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}
// d += A(desc da, 64x16) * B(desc db, 16x64), issued only (no fence, commit or wait).
__device__ __forceinline__ void pm_wgmma_m64n64k16(float (&d)[32], unsigned long long da,
                                                   unsigned long long db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "l"(da), "l"(db));
}

// d += A(desc da, 64x16) * B(desc db, 16x64); the wait keeps one HGMMA in flight.
__device__ __forceinline__ void pm_hgmma_m64n64k16(float (&d)[32], unsigned long long da,
                                                   unsigned long long db) {
  pm_wgmma_fence();
  pm_wgmma_m64n64k16(d, da, db);
  pm_wgmma_commit();
  pm_wgmma_wait0();
}
