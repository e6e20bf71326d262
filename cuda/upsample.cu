// upsample.cu: UpSampling2D (nearest) for the cuda engine. Forward: one
// thread per value of out (n, c, h sh, w sw) = in[r / sh][s / sw]. Backward:
// one thread per value of dx (n, c, h, w), the sum of its sh x sw block of
// dy in row-major order, as the cpu engine adds it (the same bits).
#include "cuda_common.cuh"
#include "cuda_ops.h"

__global__ void upsample_forward_kernel(size_t total, int h, int w, int sh, int sw,
                                        const float *__restrict__ x, float *__restrict__ y)
{
    cnn_kernel_begin();
    const int oh = h * sh, ow = w * sw;
    const size_t oplane = (size_t)oh * ow;
    CNN_GRID_LOOP(e, total) {
        const size_t q = e / oplane, rest = e - q * oplane;
        const int r = (int)(rest / ow), s = (int)(rest % ow);
        y[e] = x[(q * h + r / sh) * w + s / sw];
    }
}

__global__ void upsample_backward_kernel(size_t total, int h, int w, int sh, int sw,
                                         const float *__restrict__ dy, float *__restrict__ dx)
{
    cnn_kernel_begin();
    const size_t plane = (size_t)h * w, ow = (size_t)w * sw;
    CNN_GRID_LOOP(e, total) {
        const size_t q = e / plane, rest = e - q * plane;
        const size_t r = rest / w, s = rest % w;
        const float *block = dy + (q * h * sh + r * sh) * ow + s * sw;
        float sum = 0.0f;
        for (int a = 0; a < sh; ++a)
            for (int b = 0; b < sw; ++b) sum = __fadd_rn(sum, block[(size_t)a * ow + b]);
        dx[e] = sum;
    }
}

static cnn_status check(const char *what, int n, int c, int h, int w, int sh, int sw)
{
    if (n < 0 || c < 0 || h < 1 || w < 1 || sh < 1 || sw < 1)
        return cnn_set_error(CNN_ERR_VALUE, "%s: shape (%d, %d, %d, %d), size (%d, %d)", what,
                             n, c, h, w, sh, sw);
    return CNN_OK;
}

cnn_status cuda_upsample_forward(cnn_ctx *ctx, int n, int c, int h, int w, int sh, int sw,
                                 const float *x, float *y)
{
    CNN_TRY(check("upsample_forward", n, c, h, w, sh, sw));
    const size_t total = (size_t)n * c * h * sh * w * sw;
    if (total == 0) return CNN_OK;
    upsample_forward_kernel<<<cnn_blocks(total, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        total, h, w, sh, sw, x, y);
    CNN_CUDA_LAUNCHED("upsample_forward");
    return CNN_OK;
}

cnn_status cuda_upsample_backward(cnn_ctx *ctx, int n, int c, int h, int w, int sh, int sw,
                                  const float *dy, float *dx)
{
    CNN_TRY(check("upsample_backward", n, c, h, w, sh, sw));
    const size_t total = (size_t)n * c * h * w;
    if (total == 0) return CNN_OK;
    upsample_backward_kernel<<<cnn_blocks(total, CNN_THREADS), CNN_THREADS, 0,
                               cnn_stream(ctx)>>>(total, h, w, sh, sw, dy, dx);
    CNN_CUDA_LAUNCHED("upsample_backward");
    return CNN_OK;
}
