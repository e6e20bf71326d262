// input_slice.cu: one input of a network of several inputs for the cuda
// and cudnn engines: each sample's values [offset, offset + h w c) of the
// packed input row, an NHWC image (or a (1, 1, c) row of features), copied
// into its own (n, c, h, w) tensor in the engines' NCHW layout. One thread
// per output element (grid-stride).
#include "cuda_common.cuh"
#include "cuda_ops.h"

// output element i = ((s c + ch) hw + p) <- x[s row + offset + p c + ch]
__global__ void input_slice_kernel(size_t count, int row, int offset, int hw, int c,
                                   const float *x, float *y)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(i, count) {
        const size_t p = i % (size_t)hw, plane = i / (size_t)hw;
        const size_t s = plane / (size_t)c, ch = plane % (size_t)c;
        y[i] = x[s * (size_t)row + (size_t)offset + p * (size_t)c + ch];
    }
}

cnn_status cuda_input_slice(cnn_ctx *ctx, int n, int row, int offset, int h, int w, int c,
                            const float *x, float *y)
{
    if (n < 0 || h < 1 || w < 1 || c < 1 || offset < 0 ||
        (double)offset + (double)h * w * c > (double)row)
        return cnn_set_error(CNN_ERR_VALUE,
                             "input_slice: bad shape: %d samples, a (%d, %d, %d) input at value "
                             "%d of rows of %d",
                             n, h, w, c, offset, row);
    const size_t count = (size_t)n * c * h * w;
    if (count == 0) return CNN_OK;
    input_slice_kernel<<<cnn_blocks(count, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        count, row, offset, h * w, c, x, y);
    CNN_CUDA_LAUNCHED("input_slice");
    return CNN_OK;
}
