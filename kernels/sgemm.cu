// Tunable tiled SGEMM, C = A * B (row-major, M x K times K x N), in the
// spirit of the CLBlast/Kernel Tuner GEMM of the thesis (Table 5.4).
//
// Compile-time parameters (-D):
//   MWG, NWG   tile of C computed by one thread block (rows x columns)
//   KWG        depth of the K tile staged per iteration
//   MDIMC      threads of a block along M (threadIdx.y)
//   NDIMC      threads of a block along N (threadIdx.x, the coalesced direction)
//   VWM        vector width (1, 2, 4) of the global loads of the A tile (along K)
//   VWN        vector width (1, 2, 4) of the global loads of the B tile (along N)
//   SA, SB     1: stage the A / B tile in shared memory; 0: read it from global
//              memory (through the L1 / read-only cache) in the inner loop
// Each thread computes a (MWG/MDIMC) x (NWG/NDIMC) sub-tile of C, with rows
// ty + i*MDIMC and columns tx + j*NDIMC (strided, so that warps access
// consecutive columns). Validity (divisibility, registers, shared memory,
// threads per block) is enforced by the restrictions in
// powermodels.harness.workloads, and again here at compile time.

#ifndef MWG
#define MWG 64
#endif
#ifndef NWG
#define NWG 64
#endif
#ifndef KWG
#define KWG 16
#endif
#ifndef MDIMC
#define MDIMC 16
#endif
#ifndef NDIMC
#define NDIMC 16
#endif
#ifndef VWM
#define VWM 1
#endif
#ifndef VWN
#define VWN 1
#endif
#ifndef SA
#define SA 1
#endif
#ifndef SB
#define SB 1
#endif

#define WPTM (MWG / MDIMC)
#define WPTN (NWG / NDIMC)
#define NTHREADS (MDIMC * NDIMC)

static_assert(MWG % MDIMC == 0, "MWG must be a multiple of MDIMC");
static_assert(NWG % NDIMC == 0, "NWG must be a multiple of NDIMC");
static_assert(KWG % VWM == 0, "KWG must be a multiple of VWM");
static_assert(NWG % VWN == 0, "NWG must be a multiple of VWN");
static_assert(NTHREADS <= 1024, "at most 1024 threads per block");

#if VWM == 4
typedef float4 vecm_t;
#elif VWM == 2
typedef float2 vecm_t;
#else
typedef float vecm_t;
#endif
#if VWN == 4
typedef float4 vecn_t;
#elif VWN == 2
typedef float2 vecn_t;
#else
typedef float vecn_t;
#endif

__device__ __forceinline__ float vget(float v, int)  { return v; }
__device__ __forceinline__ float vget(float2 v, int e) { return e == 0 ? v.x : v.y; }
__device__ __forceinline__ float vget(float4 v, int e)
{
    return e == 0 ? v.x : (e == 1 ? v.y : (e == 2 ? v.z : v.w));
}

extern "C" __global__ void __launch_bounds__(NTHREADS)
sgemm(const int M, const int N, const int K,
      const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C)
{
    const int tx = threadIdx.x;          // along N
    const int ty = threadIdx.y;          // along M
    const int tid = ty * NDIMC + tx;
    const int bm = blockIdx.y * MWG;
    const int bn = blockIdx.x * NWG;

#if SA
    __shared__ float As[KWG][MWG + 1];   // transposed A tile; +1 avoids bank conflicts
#endif
#if SB
    __shared__ float Bs[KWG][NWG];
#endif

    float acc[WPTM][WPTN];
#pragma unroll
    for (int i = 0; i < WPTM; ++i)
#pragma unroll
        for (int j = 0; j < WPTN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += KWG) {
#if SA
        for (int idx = tid; idx < MWG * (KWG / VWM); idx += NTHREADS) {
            const int m = idx / (KWG / VWM);
            const int kv = idx % (KWG / VWM);
            const vecm_t v = *reinterpret_cast<const vecm_t *>(&A[(size_t)(bm + m) * K + k0 + kv * VWM]);
#pragma unroll
            for (int e = 0; e < VWM; ++e) As[kv * VWM + e][m] = vget(v, e);
        }
#endif
#if SB
        for (int idx = tid; idx < KWG * (NWG / VWN); idx += NTHREADS) {
            const int k = idx / (NWG / VWN);
            const int nv = idx % (NWG / VWN);
            const vecn_t v = *reinterpret_cast<const vecn_t *>(&B[(size_t)(k0 + k) * N + bn + nv * VWN]);
#pragma unroll
            for (int e = 0; e < VWN; ++e) Bs[k][nv * VWN + e] = vget(v, e);
        }
#endif
#if SA || SB
        __syncthreads();
#endif
#pragma unroll 4
        for (int k = 0; k < KWG; ++k) {
            float a[WPTM], b[WPTN];
#pragma unroll
            for (int i = 0; i < WPTM; ++i) {
#if SA
                a[i] = As[k][ty + i * MDIMC];
#else
                a[i] = __ldg(&A[(size_t)(bm + ty + i * MDIMC) * K + k0 + k]);
#endif
            }
#pragma unroll
            for (int j = 0; j < WPTN; ++j) {
#if SB
                b[j] = Bs[k][tx + j * NDIMC];
#else
                b[j] = __ldg(&B[(size_t)(k0 + k) * N + bn + tx + j * NDIMC]);
#endif
            }
#pragma unroll
            for (int i = 0; i < WPTM; ++i)
#pragma unroll
                for (int j = 0; j < WPTN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
#if SA || SB
        __syncthreads();
#endif
    }

#pragma unroll
    for (int i = 0; i < WPTM; ++i)
#pragma unroll
        for (int j = 0; j < WPTN; ++j)
            C[(size_t)(bm + ty + i * MDIMC) * N + bn + tx + j * NDIMC] = acc[i][j];
}
