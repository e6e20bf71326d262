/* loss_scale.c: dynamic loss scaling for the cpu and omp engines
 * (backend_table.h: loss_scale, loss_unscale, loss_scale_update; Keras's
 * LossScaleOptimizer). One pass each, on one thread: the gradient block is
 * read once per step. The scale S and the skip flag live in hyper (cnn.h
 * CNN_HYPER_LOSS_SCALE, CNN_HYPER_SKIP). */
#include <math.h>

#include "cpu.h"

/* x: (count), the loss's gradient, multiplied by S */
cnn_status cpu_loss_scale(cnn_ctx *ctx, const float *hyper, size_t count, float *x)
{
    (void)ctx;
    const float s = hyper[CNN_HYPER_LOSS_SCALE];
    for (size_t i = 0; i < count; ++i) x[i] *= s;
    return CNN_OK;
}

/* g: (count), divided by S (as Keras divides); hyper[SKIP] = 1 where any
 * value was not finite */
cnn_status cpu_loss_unscale(cnn_ctx *ctx, float *hyper, size_t count, float *g)
{
    (void)ctx;
    const float s = hyper[CNN_HYPER_LOSS_SCALE];
    int bad = 0;
    for (size_t i = 0; i < count; ++i) {
        bad |= !isfinite(g[i]);
        g[i] /= s;
    }
    if (bad) hyper[CNN_HYPER_SKIP] = 1.0f;
    return CNN_OK;
}

cnn_status cpu_loss_scale_update(cnn_ctx *ctx, float *hyper, int64_t *counters)
{
    (void)ctx;
    cnn_loss_scale_next(hyper, counters);
    return CNN_OK;
}
