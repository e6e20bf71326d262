// concat.cu: a Concatenate layer along the channels for the cuda and cudnn
// engines: each input's channels copied into their place in the output
// (forward), and back out of the output's gradient (backward). Tensors are
// (n, c, hw): NCHW images, or (n, features) rows with hw = 1. One thread
// per element of the input's part (grid-stride).
#include "cuda_common.cuh"
#include "cuda_ops.h"

// element i of the part (n, c, hw) <-> its place in the whole (n, c_total, hw)
__global__ void concat_kernel(size_t count, int c, int hw, int c_total, int offset, int forward,
                              const float *in, float *out)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(i, count) {
        const size_t p = i % (size_t)hw, row = i / (size_t)hw;
        const size_t s = row / (size_t)c, ch = row % (size_t)c;
        const size_t whole = (s * (size_t)c_total + (size_t)offset + ch) * (size_t)hw + p;
        if (forward)
            out[whole] = in[i];
        else
            out[i] = in[whole];
    }
}

static cnn_status concat(cnn_ctx *ctx, int n, int c, int hw, int c_total, int offset,
                         const float *in, float *out, int forward)
{
    if (n < 0 || c < 0 || hw < 0 || offset < 0 || offset + c > c_total)
        return cnn_set_error(CNN_ERR_VALUE,
                             "concat: bad shape: %d samples of %d channels of %d at channel %d "
                             "of %d",
                             n, c, hw, offset, c_total);
    const size_t count = (size_t)n * c * hw;
    if (count == 0) return CNN_OK;
    concat_kernel<<<cnn_blocks(count, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        count, c, hw, c_total, offset, forward, in, out);
    CNN_CUDA_LAUNCHED(forward ? "concat_forward" : "concat_backward");
    return CNN_OK;
}

// x (n, c, hw) -> channels [offset, offset + c) of y (n, c_total, hw)
cnn_status cuda_concat_forward(cnn_ctx *ctx, int n, int c, int hw, int c_total, int offset,
                               const float *x, float *y)
{
    return concat(ctx, n, c, hw, c_total, offset, x, y, 1);
}

// channels [offset, offset + c) of dy (n, c_total, hw) -> dx (n, c, hw)
cnn_status cuda_concat_backward(cnn_ctx *ctx, int n, int c, int hw, int c_total, int offset,
                                const float *dy, float *dx)
{
    return concat(ctx, n, c, hw, c_total, offset, dy, dx, 0);
}
