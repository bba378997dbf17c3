// Shared conventions of the Wattchmen-style microbenchmarks (kernels/microbench/*.cu).
//
// Every kernel has the same signature so one launcher drives them all:
//   (const void* in, void* out, long long iters, unsigned mask)
// in   : read-only input buffer (random floats in [1, 2)); memory kernels index it with `mask`
// out  : output buffer, written once per thread so the compiler keeps the work
// iters: outer loop trips; the body is unrolled MB_UNROLL times (steady state comes from iters)
// mask : element-index mask of the memory footprint (power of two minus one); sets the cache level
#pragma once
#include <cuda_fp16.h>

#define MB_ARGS const void* __restrict__ in_, void* __restrict__ out_, long long iters, unsigned mask
#define MB_TID (blockIdx.x * blockDim.x + threadIdx.x)
#define MB_NTHREADS (gridDim.x * blockDim.x)
#ifndef MB_UNROLL
#define MB_UNROLL 32
#endif
#define MB_LOOP for (long long _i = 0; _i < iters; ++_i)
#define MB_INNER _Pragma("unroll") for (int _k = 0; _k < MB_UNROLL; ++_k)
