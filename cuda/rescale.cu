// rescale.cu: Rescaling for the cuda engine: y = x * scale[ch] + offset[ch]
// per channel ch of x (n, c, plane), the product and the sum each rounded
// (__fmul_rn, __fadd_rn: no fused multiply-add), the bits of the cpu
// engine's; offset NULL (the backward): y = x * scale[ch]. One thread per
// value; x and y may be the same buffer.
#include "cuda_common.cuh"
#include "cuda_ops.h"

__global__ void rescale_kernel(size_t count, size_t c, size_t plane,
                               const float *__restrict__ scale,
                               const float *__restrict__ offset, const float *x, float *y)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(i, count) {
        const size_t ch = (i / plane) % c;
        const float t = __fmul_rn(x[i], scale[ch]);
        y[i] = offset ? __fadd_rn(t, offset[ch]) : t;
    }
}

cnn_status cuda_rescale(cnn_ctx *ctx, int n, int c, size_t plane, const float *scale,
                        const float *offset, const float *x, float *y)
{
    if (n < 0 || c < 1 || plane < 1)
        return cnn_set_error(CNN_ERR_VALUE, "rescale: shape (%d, %d, %zu)", n, c, plane);
    const size_t count = (size_t)n * (size_t)c * plane;
    if (count == 0) return CNN_OK;
    rescale_kernel<<<cnn_blocks(count, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        count, (size_t)c, plane, scale, offset, x, y);
    CNN_CUDA_LAUNCHED("rescale");
    return CNN_OK;
}
