// Square-wave load (Yang et al. §IV): a busy kernel whose duration is set by
// the length of a dependent FMA chain (calibrated on the host by linear
// regression of kernel time on `iterations`), and whose amplitude is set by
// the number of blocks launched (one block of BLOCK threads per SM used).
// The off-time is a timed idle on the host between launches.

#ifndef BLOCK
#define BLOCK 1024
#endif
#define NR_CHAINS 4

extern "C" __global__ void __launch_bounds__(BLOCK)
square_wave(float *__restrict__ out, float a, float b, long long iterations)
{
    const int i = blockIdx.x * BLOCK + threadIdx.x;
    float x0 = (float)threadIdx.x * 1e-3f;
    float x1 = x0 + 0.25f, x2 = x0 + 0.5f, x3 = x0 + 0.75f;
    for (long long k = 0; k < iterations; ++k) {
        x0 = fmaf(a, x0, b);
        x1 = fmaf(a, x1, b);
        x2 = fmaf(a, x2, b);
        x3 = fmaf(a, x3, b);
    }
    out[i] = x0 + x1 + x2 + x3;
}
