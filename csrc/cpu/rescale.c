/* rescale.c: Rescaling for the cpu and omp engines (omp: the planes cut
 * into ranges, one per thread): y = x * scale[ch] + offset[ch] per channel,
 * the product rounded to float before the sum as Keras computes it (the C
 * build does not contract the two into a fused multiply-add: -std=c11).
 * Its backward is the same op without offsets. x and y may be the same
 * buffer. */
#include "cpu.h"

typedef struct rescale_job {
    int c;
    size_t plane;
    const float *scale, *offset;
    const float *x;
    float *y;
} rescale_job;

static void rescale_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const rescale_job *j = arg;
    for (long q = lo; q < hi; ++q) {
        const int ch = (int)(q % j->c);
        const float scale = j->scale[ch];
        const float *x = j->x + (size_t)q * j->plane;
        float *y = j->y + (size_t)q * j->plane;
        if (j->offset) {
            const float offset = j->offset[ch];
            for (size_t p = 0; p < j->plane; ++p) {
                const float t = x[p] * scale;
                y[p] = t + offset;
            }
        } else {
            for (size_t p = 0; p < j->plane; ++p) y[p] = x[p] * scale;
        }
    }
}

cnn_status cpu_rescale(cnn_ctx *ctx, int n, int c, size_t plane, const float *scale,
                       const float *offset, const float *x, float *y)
{
    if (n < 0 || c < 1 || plane < 1)
        return cnn_set_error(CNN_ERR_VALUE, "rescale: shape (%d, %d, %zu)", n, c, plane);
    rescale_job j = {c, plane, scale, offset, x, y};
    const long planes = (long)n * c;
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, planes, 2.0 * (double)plane, CNN_GRAIN_ELEMENTS),
                     planes, rescale_range, &j);
    return CNN_OK;
}
