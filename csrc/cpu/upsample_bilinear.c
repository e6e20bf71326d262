/* upsample_bilinear.c: UpSampling2D(interpolation='bilinear') for the cpu
 * and omp engines (omp: the planes cut into ranges, one per thread). Each
 * output pixel mixes two by two input pixels (cnn_bilinear_source, cnn.h:
 * half-pixel centres, edges clamped, as Keras). The backward gathers: each
 * input pixel sums, over the output rows and columns near it (ascending),
 * its weight in them times dy, so no two parts write one value and every
 * engine adds in the same order (the pixels of weight 0 skipped). */
#include "cpu.h"

typedef struct bilinear_job {
    int h, w, sh, sw;
    const float *in;
    float *out;
} bilinear_job;

static void forward_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const bilinear_job *j = arg;
    const int oh = j->h * j->sh, ow = j->w * j->sw;
    for (long q = lo; q < hi; ++q) {
        const float *x = j->in + (size_t)q * j->h * j->w;
        float *y = j->out + (size_t)q * oh * ow;
        for (int r = 0; r < oh; ++r) {
            int r0, r1;
            float fy;
            cnn_bilinear_source(r, j->sh, j->h, &r0, &r1, &fy);
            const float *top = x + (size_t)r0 * j->w, *bottom = x + (size_t)r1 * j->w;
            for (int s = 0; s < ow; ++s) {
                int c0, c1;
                float fx;
                cnn_bilinear_source(s, j->sw, j->w, &c0, &c1, &fx);
                const float gx = 1.0f - fx, gy = 1.0f - fy;
                const float a = gx * top[c0], b = fx * top[c1];
                const float c = gx * bottom[c0], d = fx * bottom[c1];
                const float upper = a + b, lower = c + d;
                const float u = gy * upper, v = fy * lower;
                y[(size_t)r * ow + s] = u + v;
            }
        }
    }
}

/* The weight of input pixel k in output pixel o along an axis. */
static float weight(int o, int s, int size, int k)
{
    int i0, i1;
    float f;
    cnn_bilinear_source(o, s, size, &i0, &i1, &f);
    float w = i0 == k ? 1.0f - f : 0.0f;
    if (i1 == k) w += f;
    return w;
}

static void backward_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const bilinear_job *j = arg;
    const int oh = j->h * j->sh, ow = j->w * j->sw;
    for (long q = lo; q < hi; ++q) {
        const float *dy = j->in + (size_t)q * oh * ow;
        float *dx = j->out + (size_t)q * j->h * j->w;
        for (int r = 0; r < j->h; ++r) {
            const int ra = (r - 1) * j->sh > 0 ? (r - 1) * j->sh : 0;
            const int rb = (r + 2) * j->sh < oh ? (r + 2) * j->sh : oh;
            for (int k = 0; k < j->w; ++k) {
                const int sa = (k - 1) * j->sw > 0 ? (k - 1) * j->sw : 0;
                const int sb = (k + 2) * j->sw < ow ? (k + 2) * j->sw : ow;
                float sum = 0.0f;
                for (int o = ra; o < rb; ++o) {
                    const float wr = weight(o, j->sh, j->h, r);
                    if (wr == 0.0f) continue;
                    float row = 0.0f;
                    for (int p = sa; p < sb; ++p) {
                        const float ws = weight(p, j->sw, j->w, k);
                        if (ws == 0.0f) continue;
                        const float t = ws * dy[(size_t)o * ow + p];
                        row += t;
                    }
                    const float t = wr * row;
                    sum += t;
                }
                dx[(size_t)r * j->w + k] = sum;
            }
        }
    }
}

static cnn_status run(cnn_ctx *ctx, const char *what, cnn_range_fn *fn, int n, int c, int h,
                      int w, int sh, int sw, const float *in, float *out)
{
    if (n < 0 || c < 0 || h < 1 || w < 1 || sh < 1 || sw < 1)
        return cnn_set_error(CNN_ERR_VALUE, "%s: shape (%d, %d, %d, %d), size (%d, %d)", what,
                             n, c, h, w, sh, sw);
    bilinear_job j = {h, w, sh, sw, in, out};
    const long planes = (long)n * c;
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, planes, 10.0 * h * w * sh * sw, CNN_GRAIN_ELEMENTS),
                     planes, fn, &j);
    return CNN_OK;
}

cnn_status cpu_upsample_bilinear_forward(cnn_ctx *ctx, int n, int c, int h, int w, int sh,
                                         int sw, const float *x, float *y)
{
    return run(ctx, "upsample_bilinear_forward", forward_range, n, c, h, w, sh, sw, x, y);
}

cnn_status cpu_upsample_bilinear_backward(cnn_ctx *ctx, int n, int c, int h, int w, int sh,
                                          int sw, const float *dy, float *dx)
{
    return run(ctx, "upsample_bilinear_backward", backward_range, n, c, h, w, sh, sw, dy, dx);
}
