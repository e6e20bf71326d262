/* dropout.c: inverted dropout for the cpu and omp engines (omp: the planes
 * cut into ranges, one per thread; each element's mask is a function of its
 * index, so the cut changes nothing).
 * Element (i, ch, r, s) of an NCHW tensor is kept when
 * cnn_uniform(key, (((row0 + i)*h + r)*w + s)*c + ch) >= rate (its index in
 * Keras's NHWC order, row0 the first row's number in the whole batch), and kept values are multiplied by the float 1 / (1 - rate).
 * The backward draws the same mask again from the key. x and y (and dy and
 * dx) may be the same buffer. */
#include <string.h>

#include "cpu.h"

static cnn_status check_args(const char *what, int n, int c, int h, int w, float rate,
                             int64_t row0)
{
    if (n < 0 || c < 0 || h < 0 || w < 0)
        return cnn_set_error(CNN_ERR_VALUE, "%s: negative shape (%d, %d, %d, %d)", what, n, c,
                             h, w);
    if (row0 < 0)
        return cnn_set_error(CNN_ERR_VALUE, "%s: row0 %lld is negative", what, (long long)row0);
    if (!(rate >= 0.0f && rate < 1.0f))
        return cnn_set_error(CNN_ERR_VALUE, "%s: rate %g is not in [0, 1)", what, (double)rate);
    return CNN_OK;
}

typedef struct drop_job {
    int c, h, w;
    float rate, scale;
    uint64_t key;
    uint64_t row0; /* the first row's number in the whole batch */
    const float *in;
    float *out;
} drop_job;

/* Planes [lo, hi) (q = i*c + ch) of out = in * mask * scale. */
static void mask_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const drop_job *j = arg;
    const size_t plane = (size_t)j->h * j->w;
    for (long q = lo; q < hi; ++q) {
        const long i = q / j->c, ch = q % j->c;
        const size_t at = (size_t)q * plane;
        const float *src = j->in + at;
        float *dst = j->out + at;
        /* NHWC index of (i, ch, 0, 0); it advances by c per pixel */
        const uint64_t base = (j->row0 + (uint64_t)i) * plane * (uint64_t)j->c + (uint64_t)ch;
        for (size_t p = 0; p < plane; ++p) {
            const int keep = cnn_uniform(j->key, base + (uint64_t)p * (uint64_t)j->c) >= j->rate;
            dst[p] = keep ? src[p] * j->scale : 0.0f;
        }
    }
}

/* out (n, c, h, w) = in * mask * scale; in and out may be the same buffer. */
static void apply_mask(cnn_ctx *ctx, int n, int c, int h, int w, float rate, uint64_t key,
                       int64_t row0, const float *in, float *out)
{
    const size_t count = (size_t)n * c * h * w;
    if (rate == 0.0f) {
        if (in != out && count) memmove(out, in, count * sizeof(float));
        return;
    }
    drop_job j = {c, h, w, rate, 1.0f / (1.0f - rate), key, (uint64_t)row0, in, out};
    const long planes = (long)n * c;
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, planes, 8.0 * h * w, CNN_GRAIN_ELEMENTS), planes,
                     mask_range, &j);
}

/* x (n, c, h, w) -> y (n, c, h, w) */
cnn_status cpu_dropout_forward(cnn_ctx *ctx, int n, int c, int h, int w, float rate,
                               uint64_t seed, const int64_t *forward, int64_t row0,
                               const float *x, float *y)
{
    CNN_TRY(check_args("dropout_forward", n, c, h, w, rate, row0));
    apply_mask(ctx, n, c, h, w, rate, cnn_rng_key(seed, (uint64_t)*forward), row0, x, y);
    return CNN_OK;
}

/* dy (n, c, h, w) -> dx (n, c, h, w), with the forward's mask and scale */
cnn_status cpu_dropout_backward(cnn_ctx *ctx, int n, int c, int h, int w, float rate,
                                uint64_t seed, const int64_t *forward, int64_t row0,
                                const float *dy, float *dx)
{
    CNN_TRY(check_args("dropout_backward", n, c, h, w, rate, row0));
    apply_mask(ctx, n, c, h, w, rate, cnn_rng_key(seed, (uint64_t)*forward), row0, dy, dx);
    return CNN_OK;
}
