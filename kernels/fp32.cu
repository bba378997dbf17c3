// FP32 synthetic compute kernel (thesis Table 5.3 shape: block_size_x, nr_outer, nr_inner).
//
// Each thread runs NR_CHAINS independent chains of dependent FMAs,
// x <- a * x + b, nr_outer * nr_inner times; the chains give the scheduler
// enough independent work to saturate the FP32 pipes while every chain stays
// a true dependency (the compiler cannot fold it: a and b are run-time values).
// Result per chain has the closed form  x_n = a^n (x_0 - s) + s,  s = b / (1 - a),
// which the tests use as the reference.
//
// Compile-time parameters (-D): block_size_x, nr_outer, nr_inner.

#ifndef block_size_x
#define block_size_x 256
#endif
#ifndef nr_outer
#define nr_outer 64
#endif
#ifndef nr_inner
#define nr_inner 1024
#endif
#define NR_CHAINS 4

extern "C" __global__ void __launch_bounds__(block_size_x)
fp32_kernel(float *__restrict__ out, const float *__restrict__ in, float a, float b, int n)
{
    const int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i >= n) return;
    float x0 = in[i];
    float x1 = x0 + 0.25f;
    float x2 = x0 + 0.5f;
    float x3 = x0 + 0.75f;
    for (int outer = 0; outer < nr_outer; ++outer) {
#pragma unroll 16
        for (int inner = 0; inner < nr_inner; ++inner) {
            x0 = fmaf(a, x0, b);
            x1 = fmaf(a, x1, b);
            x2 = fmaf(a, x2, b);
            x3 = fmaf(a, x3, b);
        }
    }
    out[i] = x0 + x1 + x2 + x3;
}
