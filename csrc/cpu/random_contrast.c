/* random_contrast.c: RandomContrast's training forward for the cpu and omp
 * engines (the planes cut into ranges, one per thread). Sample i draws its
 * factor f = u0 (hi - lo) + lo (cnn_aug_value); each of its channels'
 * planes has mean m = (the plane's sum in double, in row-major order) / (h
 * w), rounded to float32, and y = clip((x - m) f + m, vmin, vmax), each
 * operation rounded to float32; inference copies x. */
#include <string.h>

#include "cpu.h"

typedef struct contrast_job {
    const cnn_aug_desc *d;
    uint64_t key_t;
    int64_t row0;
    const float *x;
    float *y;
} contrast_job;

static void contrast_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const contrast_job *j = arg;
    const cnn_aug_desc *d = j->d;
    const size_t plane = (size_t)d->h * d->w;
    for (long q = lo; q < hi; ++q) {
        const float f = cnn_aug_value(d, j->key_t, j->row0 + q / d->c, 0);
        const float *src = j->x + (size_t)q * plane;
        float *dst = j->y + (size_t)q * plane;
        double sum = 0.0;
        for (size_t p = 0; p < plane; ++p) sum += (double)src[p];
        const float mean = (float)(sum / (double)plane);
        for (size_t p = 0; p < plane; ++p) {
            float v = CNN_FADD(CNN_FMUL(CNN_FSUB(src[p], mean), f), mean);
            v = v < d->vmin ? d->vmin : v;
            dst[p] = v > d->vmax ? d->vmax : v;
        }
    }
}

/* x (n, c, h, w) -> y (n, c, h, w) */
cnn_status cpu_random_contrast(cnn_ctx *ctx, const cnn_aug_desc *d, int training,
                               const int64_t *forward, int64_t row0, const float *x, float *y)
{
    CNN_TRY(cnn_aug_check("random_contrast", d, row0));
    const size_t count = (size_t)d->n * d->c * d->h * d->w;
    if (!training) {
        if (count) memcpy(y, x, count * sizeof(float));
        return CNN_OK;
    }
    contrast_job j = {d, cnn_rng_key(d->key, (uint64_t)*forward), row0, x, y};
    const long planes = (long)d->n * d->c;
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, planes, 3.0 * d->h * d->w, CNN_GRAIN_ELEMENTS),
                     planes, contrast_range, &j);
    return CNN_OK;
}
