// rescale.cu: Rescaling for the cuda engine: y = x * scale + offset, the
// product and the sum each rounded (__fmul_rn, __fadd_rn: no fused
// multiply-add), the bits of the cpu engine's. Its backward is the same op
// with offset 0. One thread per value; x and y may be the same buffer.
#include <math.h>

#include "cuda_common.cuh"
#include "cuda_ops.h"

__global__ void rescale_kernel(size_t count, float scale, float offset, const float *x, float *y)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(i, count) y[i] = __fadd_rn(__fmul_rn(x[i], scale), offset);
}

cnn_status cuda_rescale(cnn_ctx *ctx, size_t count, float scale, float offset, const float *x,
                        float *y)
{
    if (!isfinite(scale) || !isfinite(offset))
        return cnn_set_error(CNN_ERR_VALUE, "rescale: scale and offset must be finite, got %g "
                             "and %g", (double)scale, (double)offset);
    if (count == 0) return CNN_OK;
    rescale_kernel<<<cnn_blocks(count, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        count, scale, offset, x, y);
    CNN_CUDA_LAUNCHED("rescale");
    return CNN_OK;
}
