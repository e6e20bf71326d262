// prelu.cu: PReLU for the cuda and cudnn engines (cnn.h cnn_prelu_desc).
// The forward and dx: one thread per element (grid-stride). dalpha: one
// warp per alpha element, lane l adding the elements it covers numbered
// l, l + 32, ... (batch, then the shared channels, rows, columns) in order,
// then the lanes in a fixed tree (xor shuffles): the same bits on every run,
// not the cpu engine's (which adds in double, in order).
#include "cuda_common.cuh"
#include "cuda_ops.h"

#define PRELU_WARPS 8 // warps (alphas) per dalpha block

// alpha's index of element i of x (n, c, h, w)
__device__ __forceinline__ size_t prelu_alpha_at(const cnn_prelu_desc &d, size_t i)
{
    const int s = (int)(i % d.w), r = (int)(i / d.w % d.h), ch = (int)(i / ((size_t)d.w * d.h) % d.c);
    return ((size_t)(d.ac == 1 ? 0 : ch) * d.ah + (d.ah == 1 ? 0 : r)) * d.aw +
           (d.aw == 1 ? 0 : s);
}

__global__ void prelu_forward_kernel(cnn_prelu_desc d, size_t count, const float *x,
                                     const float *alpha, float *y)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(i, count) {
        const float v = x[i];
        y[i] = v > 0.0f ? v : __fmul_rn(alpha[prelu_alpha_at(d, i)], v);
    }
}

__global__ void prelu_dx_kernel(cnn_prelu_desc d, size_t count, const float *x,
                                const float *alpha, const float *dy, float *dx)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(i, count) {
        const float v = x[i], g = dy[i];
        dx[i] = v > 0.0f ? g : v < 0.0f ? __fmul_rn(alpha[prelu_alpha_at(d, i)], g) : 0.0f;
    }
}

__global__ void prelu_dalpha_kernel(cnn_prelu_desc d, size_t alphas, const float *x,
                                    const float *dy, float *dalpha)
{
    cnn_kernel_begin();
    const int lane = threadIdx.x & 31;
    const int cs = d.ac == 1 ? d.c : 1, hs = d.ah == 1 ? d.h : 1, ws = d.aw == 1 ? d.w : 1;
    const size_t covered = (size_t)d.n * cs * hs * ws;
    for (size_t k = (size_t)blockIdx.x * PRELU_WARPS + (threadIdx.x >> 5); k < alphas;
         k += (size_t)gridDim.x * PRELU_WARPS) {
        const int sa = (int)(k % d.aw), ra = (int)(k / d.aw % d.ah),
                  ca = (int)(k / ((size_t)d.aw * d.ah));
        float sum = 0.0f;
        for (size_t q = lane; q < covered; q += 32) {
            const int s = d.aw == 1 ? (int)(q % ws) : sa;
            const int r = d.ah == 1 ? (int)(q / ws % hs) : ra;
            const int ch = d.ac == 1 ? (int)(q / ((size_t)ws * hs) % cs) : ca;
            const int b = (int)(q / ((size_t)ws * hs * cs));
            const size_t i = (((size_t)b * d.c + ch) * d.h + r) * d.w + s;
            const float v = x[i];
            if (v < 0.0f) sum = __fadd_rn(sum, __fmul_rn(dy[i], v));
        }
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        if (lane == 0) dalpha[k] = sum;
    }
}

static cnn_status check(const char *what, const cnn_prelu_desc *d)
{
    if (d->n < 0 || d->c < 1 || d->h < 1 || d->w < 1 || (d->ac != 1 && d->ac != d->c) ||
        (d->ah != 1 && d->ah != d->h) || (d->aw != 1 && d->aw != d->w))
        return cnn_set_error(CNN_ERR_VALUE,
                             "%s: x (%d, %d, %d, %d) and alpha (%d, %d, %d) do not match", what,
                             d->n, d->c, d->h, d->w, d->ac, d->ah, d->aw);
    return CNN_OK;
}

cnn_status cuda_prelu_forward(cnn_ctx *ctx, const cnn_prelu_desc *d, const float *x,
                              const float *alpha, float *y)
{
    CNN_TRY(check("prelu_forward", d));
    const size_t count = (size_t)d->n * d->c * d->h * d->w;
    if (!count) return CNN_OK;
    prelu_forward_kernel<<<cnn_blocks(count, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        *d, count, x, alpha, y);
    CNN_CUDA_LAUNCHED("prelu_forward");
    return CNN_OK;
}

cnn_status cuda_prelu_backward(cnn_ctx *ctx, const cnn_prelu_desc *d, const float *x,
                               const float *alpha, const float *dy, float *dx, float *dalpha)
{
    CNN_TRY(check("prelu_backward", d));
    cudaStream_t st = cnn_stream(ctx);
    const size_t count = (size_t)d->n * d->c * d->h * d->w;
    const size_t alphas = (size_t)d->ac * d->ah * d->aw;
    // dalpha first: dx may be dy
    prelu_dalpha_kernel<<<cnn_blocks(alphas, PRELU_WARPS), PRELU_WARPS * 32, 0, st>>>(
        *d, alphas, x, dy, dalpha);
    CNN_CUDA_LAUNCHED("prelu_backward (alpha)");
    if (!dx || !count) return CNN_OK;
    prelu_dx_kernel<<<cnn_blocks(count, CNN_THREADS), CNN_THREADS, 0, st>>>(*d, count, x, alpha,
                                                                            dy, dx);
    CNN_CUDA_LAUNCHED("prelu_backward");
    return CNN_OK;
}
