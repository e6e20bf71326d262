// regularize.cu: a weight's regularizer (Keras's L1L2) for the cuda and
// cudnn engines: g += l1 sign(p) + (2 l2) p elementwise (the cpu engine's
// float math: each product rounded, no FMA contraction), and sums[0] +=
// scale (l1 sum|p| + l2 sum p^2) from one block that adds its threads'
// strided double sums in a fixed order (shared-memory tree), so every run
// gives the same bits (not the cpu engine's: its sums go in index order).
#include "cuda_common.cuh"
#include "cuda_ops.h"

#define REG_THREADS 256

__global__ void regularize_grad_kernel(size_t count, float l1, float two_l2,
                                       const float *__restrict__ p, float *__restrict__ g)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(i, count) {
        const float w = p[i];
        const float sign = w > 0.0f ? 1.0f : (w < 0.0f ? -1.0f : 0.0f);
        g[i] = __fadd_rn(g[i], __fadd_rn(__fmul_rn(l1, sign), __fmul_rn(two_l2, w)));
    }
}

// one block of REG_THREADS threads
__global__ void __launch_bounds__(REG_THREADS)
    regularize_sum_kernel(size_t count, float l1, float l2, float scale,
                          const float *__restrict__ p, float *__restrict__ sums)
{
    cnn_kernel_begin();
    __shared__ double abs_part[REG_THREADS], square_part[REG_THREADS];
    double a = 0.0, b = 0.0;
    for (size_t i = threadIdx.x; i < count; i += REG_THREADS) {
        const double w = (double)p[i];
        a += fabs(w);
        b = __dadd_rn(b, __dmul_rn(w, w));
    }
    abs_part[threadIdx.x] = a;
    square_part[threadIdx.x] = b;
    __syncthreads();
    for (int half = REG_THREADS / 2; half > 0; half >>= 1) {
        if ((int)threadIdx.x < half) {
            abs_part[threadIdx.x] += abs_part[threadIdx.x + half];
            square_part[threadIdx.x] += square_part[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        const double penalty = __dadd_rn(__dmul_rn((double)l1, abs_part[0]),
                                         __dmul_rn((double)l2, square_part[0]));
        sums[0] = __fadd_rn(sums[0], (float)__dmul_rn((double)scale, penalty));
    }
}

// p, g: (count) device memory (g may be NULL); sums: (2) device memory or NULL
cnn_status cuda_regularize(cnn_ctx *ctx, size_t count, float l1, float l2, float scale,
                           const float *p, float *g, float *sums)
{
    if (count == 0) return CNN_OK;
    cudaStream_t st = cnn_stream(ctx);
    if (g) {
        regularize_grad_kernel<<<cnn_blocks(count, CNN_THREADS), CNN_THREADS, 0, st>>>(
            count, l1, 2.0f * l2, p, g);
        CNN_CUDA_LAUNCHED("regularize");
    }
    if (sums) {
        regularize_sum_kernel<<<1, REG_THREADS, 0, st>>>(count, l1, l2, scale, p, sums);
        CNN_CUDA_LAUNCHED("regularize");
    }
    return CNN_OK;
}
