// loss_scale.cu: dynamic loss scaling for the cuda and cudnn engines
// (backend_table.h: loss_scale, loss_unscale, loss_scale_update; Keras's
// LossScaleOptimizer). The scale S and the skip flag are read and written in
// device memory (hyper, cnn.h CNN_HYPER_LOSS_SCALE, CNN_HYPER_SKIP) when the
// kernels run, so a recorded training step scales, checks and skips without
// the host. The float math is the cpu engine's (x S, g / S, IEEE rounding,
// nothing fused): the same bits.
#include <math.h>

#include "cuda_common.cuh"
#include "cuda_ops.h"

namespace {

// x: (count), multiplied by S
__global__ void loss_scale_kernel(size_t count, const float *__restrict__ hyper,
                                  float *__restrict__ x)
{
    cnn_kernel_begin();
    const float s = hyper[CNN_HYPER_LOSS_SCALE];
    CNN_GRID_LOOP(i, count) x[i] = __fmul_rn(x[i], s);
}

// g: (count), divided by S; a block that saw a value not finite sets
// hyper[SKIP] (every such block writes the same 1: no order matters)
__global__ void loss_unscale_kernel(size_t count, float *hyper, float *__restrict__ g)
{
    cnn_kernel_begin();
    const float s = hyper[CNN_HYPER_LOSS_SCALE];
    int bad = 0;
    CNN_GRID_LOOP(i, count) {
        const float v = g[i];
        bad |= !isfinite(v);
        g[i] = __fdiv_rn(v, s);
    }
    if (__syncthreads_or(bad) && threadIdx.x == 0) hyper[CNN_HYPER_SKIP] = 1.0f;
}

__global__ void loss_scale_update_kernel(float *hyper, int64_t *counters)
{
    cnn_kernel_begin();
    cnn_loss_scale_next(hyper, counters);
}

} // namespace

cnn_status cuda_loss_scale(cnn_ctx *ctx, const float *hyper, size_t count, float *x)
{
    if (count == 0) return CNN_OK;
    loss_scale_kernel<<<cnn_blocks(count, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        count, hyper, x);
    CNN_CUDA_LAUNCHED("loss_scale");
    return CNN_OK;
}

cnn_status cuda_loss_unscale(cnn_ctx *ctx, float *hyper, size_t count, float *g)
{
    if (count == 0) return CNN_OK;
    loss_unscale_kernel<<<cnn_blocks(count, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        count, hyper, g);
    CNN_CUDA_LAUNCHED("loss_unscale");
    return CNN_OK;
}

cnn_status cuda_loss_scale_update(cnn_ctx *ctx, float *hyper, int64_t *counters)
{
    loss_scale_update_kernel<<<1, 1, 0, cnn_stream(ctx)>>>(hyper, counters);
    CNN_CUDA_LAUNCHED("loss_scale_update");
    return CNN_OK;
}
