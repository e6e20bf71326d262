/* upsample.c: UpSampling2D (nearest) for the cpu and omp engines (omp: the
 * planes cut into ranges, one per thread). Forward: out (h sh, w sw)[r][s] =
 * in (h, w)[r / sh][s / sw]. Backward: dx[r][s] = the sum of dy's sh x sw
 * block over it, in row-major order (the same order on every engine). */
#include "cpu.h"

typedef struct upsample_job {
    int h, w, sh, sw;
    const float *in;
    float *out;
} upsample_job;

static void forward_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const upsample_job *j = arg;
    const int ow = j->w * j->sw;
    for (long q = lo; q < hi; ++q) {
        const float *x = j->in + (size_t)q * j->h * j->w;
        float *y = j->out + (size_t)q * j->h * j->sh * ow;
        for (int r = 0; r < j->h * j->sh; ++r) {
            const float *src = x + (size_t)(r / j->sh) * j->w;
            float *row = y + (size_t)r * ow;
            for (int s = 0; s < ow; ++s) row[s] = src[s / j->sw];
        }
    }
}

static void backward_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const upsample_job *j = arg;
    const int ow = j->w * j->sw;
    for (long q = lo; q < hi; ++q) {
        const float *dy = j->in + (size_t)q * j->h * j->sh * ow;
        float *dx = j->out + (size_t)q * j->h * j->w;
        for (int r = 0; r < j->h; ++r)
            for (int s = 0; s < j->w; ++s) {
                float sum = 0.0f;
                for (int a = 0; a < j->sh; ++a) {
                    const float *row = dy + (size_t)(r * j->sh + a) * ow + (size_t)s * j->sw;
                    for (int b = 0; b < j->sw; ++b) sum += row[b];
                }
                dx[(size_t)r * j->w + s] = sum;
            }
    }
}

static cnn_status run(cnn_ctx *ctx, const char *what, cnn_range_fn *fn, int n, int c, int h,
                      int w, int sh, int sw, const float *in, float *out)
{
    if (n < 0 || c < 0 || h < 1 || w < 1 || sh < 1 || sw < 1)
        return cnn_set_error(CNN_ERR_VALUE, "%s: shape (%d, %d, %d, %d), size (%d, %d)", what,
                             n, c, h, w, sh, sw);
    upsample_job j = {h, w, sh, sw, in, out};
    const long planes = (long)n * c;
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, planes, 2.0 * h * w * sh * sw, CNN_GRAIN_ELEMENTS),
                     planes, fn, &j);
    return CNN_OK;
}

cnn_status cpu_upsample_forward(cnn_ctx *ctx, int n, int c, int h, int w, int sh, int sw,
                                const float *x, float *y)
{
    return run(ctx, "upsample_forward", forward_range, n, c, h, w, sh, sw, x, y);
}

cnn_status cpu_upsample_backward(cnn_ctx *ctx, int n, int c, int h, int w, int sh, int sw,
                                 const float *dy, float *dx)
{
    return run(ctx, "upsample_backward", backward_range, n, c, h, w, sh, sw, dy, dx);
}
