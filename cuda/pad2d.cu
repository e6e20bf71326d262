// pad2d.cu: ZeroPadding2D and Cropping2D for the cuda engine: y (n, c, oh,
// ow)[r][s] = x (n, c, h, w)[r - top][s - left] where that is inside x, else
// 0 (top, left > 0 pad, < 0 crop; each layer's backward is this op the other
// way). One thread per value of y.
#include "cuda_common.cuh"
#include "cuda_ops.h"

__global__ void pad2d_kernel(size_t total, int h, int w, int oh, int ow, int top, int left,
                             const float *__restrict__ x, float *__restrict__ y)
{
    cnn_kernel_begin();
    const size_t oplane = (size_t)oh * ow;
    CNN_GRID_LOOP(e, total) {
        const size_t q = e / oplane, rest = e - q * oplane;
        const int r = (int)(rest / ow) - top, s = (int)(rest % ow) - left;
        y[e] = (r >= 0 && r < h && s >= 0 && s < w) ? x[(q * h + r) * w + s] : 0.0f;
    }
}

cnn_status cuda_pad2d(cnn_ctx *ctx, int n, int c, int h, int w, int oh, int ow, int top,
                      int left, const float *x, float *y)
{
    if (n < 0 || c < 0 || h < 1 || w < 1 || oh < 1 || ow < 1)
        return cnn_set_error(CNN_ERR_VALUE, "pad2d: shapes (%d, %d, %d, %d) -> (%d, %d, %d, %d)",
                             n, c, h, w, n, c, oh, ow);
    const size_t total = (size_t)n * c * oh * ow;
    if (total == 0) return CNN_OK;
    pad2d_kernel<<<cnn_blocks(total, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        total, h, w, oh, ow, top, left, x, y);
    CNN_CUDA_LAUNCHED("pad2d");
    return CNN_OK;
}
