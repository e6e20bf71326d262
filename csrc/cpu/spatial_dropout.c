/* spatial_dropout.c: SpatialDropout2D for the cpu and omp engines (omp: the
 * planes cut into ranges, one per thread). Channel ch of row i of an NCHW
 * tensor is kept whole when cnn_uniform(key, (row0 + i)*c + ch) >= rate
 * (row0 the first row's number in the whole batch), its values multiplied
 * by the float 1 / (1 - rate); else it is zero. The backward draws the same
 * mask again from the key. x and y (and dy and dx) may be the same buffer. */
#include <string.h>

#include "cpu.h"

typedef struct spatial_job {
    int c;
    size_t plane;
    float rate, scale;
    uint64_t key, row0;
    const float *in;
    float *out;
} spatial_job;

static void mask_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const spatial_job *j = arg;
    for (long q = lo; q < hi; ++q) {
        const uint64_t i = (uint64_t)(q / j->c), ch = (uint64_t)(q % j->c);
        const int keep = cnn_uniform(j->key, (j->row0 + i) * (uint64_t)j->c + ch) >= j->rate;
        const float *src = j->in + (size_t)q * j->plane;
        float *dst = j->out + (size_t)q * j->plane;
        for (size_t p = 0; p < j->plane; ++p) dst[p] = keep ? src[p] * j->scale : 0.0f;
    }
}

static cnn_status apply(cnn_ctx *ctx, const char *what, int n, int c, int h, int w, float rate,
                        uint64_t seed, const int64_t *forward, int64_t row0, const float *in,
                        float *out)
{
    if (n < 0 || c < 0 || h < 0 || w < 0)
        return cnn_set_error(CNN_ERR_VALUE, "%s: negative shape (%d, %d, %d, %d)", what, n, c,
                             h, w);
    if (row0 < 0)
        return cnn_set_error(CNN_ERR_VALUE, "%s: row0 %lld is negative", what, (long long)row0);
    if (!(rate >= 0.0f && rate < 1.0f))
        return cnn_set_error(CNN_ERR_VALUE, "%s: rate %g is not in [0, 1)", what, (double)rate);
    const size_t plane = (size_t)h * w, count = (size_t)n * c * plane;
    if (rate == 0.0f) {
        if (in != out && count) memmove(out, in, count * sizeof(float));
        return CNN_OK;
    }
    spatial_job j = {c, plane, rate, 1.0f / (1.0f - rate),
                     cnn_rng_key(seed, (uint64_t)*forward), (uint64_t)row0, in, out};
    const long planes = (long)n * c;
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, planes, 2.0 * (double)plane, CNN_GRAIN_ELEMENTS),
                     planes, mask_range, &j);
    return CNN_OK;
}

/* x (n, c, h, w) -> y (n, c, h, w) */
cnn_status cpu_spatial_dropout_forward(cnn_ctx *ctx, int n, int c, int h, int w, float rate,
                                       uint64_t seed, const int64_t *forward, int64_t row0,
                                       const float *x, float *y)
{
    return apply(ctx, "spatial_dropout_forward", n, c, h, w, rate, seed, forward, row0, x, y);
}

/* dy (n, c, h, w) -> dx (n, c, h, w), with the forward's mask and scale */
cnn_status cpu_spatial_dropout_backward(cnn_ctx *ctx, int n, int c, int h, int w, float rate,
                                        uint64_t seed, const int64_t *forward, int64_t row0,
                                        const float *dy, float *dx)
{
    return apply(ctx, "spatial_dropout_backward", n, c, h, w, rate, seed, forward, row0, dy, dx);
}
