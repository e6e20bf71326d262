/* rescale.c: Rescaling for the cpu and omp engines (omp: the values cut
 * into ranges, one per thread): y = x * scale + offset, the product rounded
 * to float before the sum as Keras computes it (the C build does not
 * contract the two into a fused multiply-add: -std=c11). Its backward is the
 * same op with offset 0. x and y may be the same buffer. */
#include <limits.h>

#include "cpu.h"

typedef struct rescale_job {
    float scale, offset;
    const float *x;
    float *y;
} rescale_job;

static void rescale_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const rescale_job *j = arg;
    const float scale = j->scale, offset = j->offset;
    for (long i = lo; i < hi; ++i) {
        const float p = j->x[i] * scale;
        j->y[i] = p + offset;
    }
}

cnn_status cpu_rescale(cnn_ctx *ctx, size_t count, float scale, float offset, const float *x,
                       float *y)
{
    if (!isfinite(scale) || !isfinite(offset))
        return cnn_set_error(CNN_ERR_VALUE, "rescale: scale and offset must be finite, got %g "
                             "and %g", (double)scale, (double)offset);
    if (count > (size_t)LONG_MAX)
        return cnn_set_error(CNN_ERR_VALUE, "rescale: %zu values are too many", count);
    rescale_job j = {scale, offset, x, y};
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, (long)count, 2.0, CNN_GRAIN_ELEMENTS), (long)count,
                     rescale_range, &j);
    return CNN_OK;
}
