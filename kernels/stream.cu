// Memory-bound STREAM kernels (McCalpin): copy c = a and triad a = b + s * c,
// grid-stride loops with optional vector loads (vector_width 1, 2 or 4).
//
// Compile-time parameters (-D): block_size_x, vector_width.

#ifndef block_size_x
#define block_size_x 256
#endif
#ifndef vector_width
#define vector_width 4
#endif

#if vector_width == 4
typedef float4 vec_t;
#elif vector_width == 2
typedef float2 vec_t;
#else
typedef float vec_t;
#endif

// n_vec: number of vec_t elements (n / vector_width).
extern "C" __global__ void __launch_bounds__(block_size_x)
stream_copy(vec_t *__restrict__ c, const vec_t *__restrict__ a, long long n_vec)
{
    const long long stride = (long long)gridDim.x * block_size_x;
    for (long long i = (long long)blockIdx.x * block_size_x + threadIdx.x; i < n_vec; i += stride) {
        c[i] = a[i];
    }
}

__device__ __forceinline__ float  triad1(float b, float s, float c)  { return fmaf(s, c, b); }
__device__ __forceinline__ float2 triad1(float2 b, float s, float2 c) { return make_float2(fmaf(s, c.x, b.x), fmaf(s, c.y, b.y)); }
__device__ __forceinline__ float4 triad1(float4 b, float s, float4 c)
{
    return make_float4(fmaf(s, c.x, b.x), fmaf(s, c.y, b.y), fmaf(s, c.z, b.z), fmaf(s, c.w, b.w));
}

extern "C" __global__ void __launch_bounds__(block_size_x)
stream_triad(vec_t *__restrict__ a, const vec_t *__restrict__ b, const vec_t *__restrict__ c, float s, long long n_vec)
{
    const long long stride = (long long)gridDim.x * block_size_x;
    for (long long i = (long long)blockIdx.x * block_size_x + threadIdx.x; i < n_vec; i += stride) {
        a[i] = triad1(b[i], s, c[i]);
    }
}
