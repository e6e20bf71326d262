/* random_affine.c: RandomRotation's, RandomZoom's and RandomTranslation's
 * training forward for the cpu and omp engines (the planes cut into ranges,
 * one per thread): each sample's transform drawn by cnn_aug_matrix, each
 * output pixel read from the input at cnn_aug_source's point by
 * cnn_aug_sample (fill mode, interpolation), all in augment.h, which the
 * cuda kernel shares; inference copies x. */
#include <string.h>

#include "cpu.h"

typedef struct affine_job {
    const cnn_aug_desc *d;
    uint64_t key_t;
    int64_t row0;
    const float *x;
    float *y;
} affine_job;

static void affine_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const affine_job *j = arg;
    const cnn_aug_desc *d = j->d;
    const size_t plane = (size_t)d->h * d->w;
    float m[6] = {0};
    long drawn = -1; /* the sample whose matrix m holds */
    for (long q = lo; q < hi; ++q) {
        const long i = q / d->c;
        if (i != drawn) {
            cnn_aug_matrix(d, j->key_t, j->row0 + i, m);
            drawn = i;
        }
        const float *src = j->x + (size_t)q * plane;
        float *dst = j->y + (size_t)q * plane;
        for (int r = 0; r < d->h; ++r)
            for (int s = 0; s < d->w; ++s) {
                float sy, sx;
                cnn_aug_source(m, r, s, &sy, &sx);
                dst[(size_t)r * d->w + s] = cnn_aug_sample(d, src, sy, sx);
            }
    }
}

/* x (n, c, h, w) -> y (n, c, h, w) */
cnn_status cpu_random_affine(cnn_ctx *ctx, const cnn_aug_desc *d, int training,
                             const int64_t *forward, int64_t row0, const float *x, float *y)
{
    CNN_TRY(cnn_aug_check("random_affine", d, row0));
    if (d->affine < CNN_AFFINE_ROTATION || d->affine > CNN_AFFINE_TRANSLATION)
        return cnn_set_error(CNN_ERR_VALUE, "random_affine: transform %d unknown", d->affine);
    const size_t count = (size_t)d->n * d->c * d->h * d->w;
    if (!training) {
        if (count) memcpy(y, x, count * sizeof(float));
        return CNN_OK;
    }
    affine_job j = {d, cnn_rng_key(d->key, (uint64_t)*forward), row0, x, y};
    const long planes = (long)d->n * d->c;
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, planes, 16.0 * d->h * d->w, CNN_GRAIN_ELEMENTS),
                     planes, affine_range, &j);
    return CNN_OK;
}
