// Tiled matrix multiply C = A B (WIDTH x WIDTH, row-major floats), Kernel Tuner style.
//
// Tunable (-D macros): block_size_x, block_size_y (thread block), tile_size_x,
// tile_size_y (outputs per thread in x and y). Each block computes a
// (block_size_x*tile_size_x) x (block_size_y*tile_size_y) tile of C, staging
// block_size_x-wide slices of A and B in shared memory, so
// block_size_x == block_size_y*tile_size_y (a restriction).
// Launch: grid = ceil(WIDTH / (block_size_x*tile_size_x)) x ceil(WIDTH / (block_size_y*tile_size_y)).

#ifndef WIDTH
#define WIDTH 4096
#endif

extern "C" __global__ void matmul_kernel(float *C, const float *A, const float *B) {
    __shared__ float sA[block_size_y * tile_size_y][block_size_x];
    __shared__ float sB[block_size_y * tile_size_y][block_size_x * tile_size_x];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int x = blockIdx.x * block_size_x * tile_size_x + tx;
    const int y = blockIdx.y * block_size_y * tile_size_y + ty;

    float sum[tile_size_y][tile_size_x];
#pragma unroll
    for (int i = 0; i < tile_size_y; i++)
#pragma unroll
        for (int j = 0; j < tile_size_x; j++)
            sum[i][j] = 0.0f;

    for (int k = 0; k < WIDTH; k += block_size_x) {
        __syncthreads();
#pragma unroll
        for (int i = 0; i < tile_size_y; i++) {
            sA[ty + block_size_y * i][tx] = A[(y + i * block_size_y) * WIDTH + k + tx];
#pragma unroll
            for (int j = 0; j < tile_size_x; j++)
                sB[ty + block_size_y * i][tx + j * block_size_x] =
                    B[(k + ty + block_size_y * i) * WIDTH + x + j * block_size_x];
        }
        __syncthreads();
#pragma unroll
        for (int kb = 0; kb < block_size_x; kb++)
#pragma unroll
            for (int i = 0; i < tile_size_y; i++)
#pragma unroll
                for (int j = 0; j < tile_size_x; j++)
                    sum[i][j] += sA[ty + block_size_y * i][kb] * sB[kb][tx + j * block_size_x];
    }

#pragma unroll
    for (int i = 0; i < tile_size_y; i++)
#pragma unroll
        for (int j = 0; j < tile_size_x; j++)
            C[(y + i * block_size_y) * WIDTH + x + j * block_size_x] = sum[i][j];
}
