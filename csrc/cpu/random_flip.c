/* random_flip.c: RandomFlip's training forward for the cpu and omp engines
 * (the planes cut into ranges, one per thread). Sample i (row row0 + i of
 * the whole batch) is flipped when its draw u0 <= 0.5 (Keras's test), on
 * every axis of the mode at once (Keras 3 flips 'horizontal_and_vertical'
 * samples on both axes with one draw); inference copies x. */
#include <string.h>

#include "cpu.h"

typedef struct flip_job {
    const cnn_aug_desc *d;
    uint64_t key_t;
    int64_t row0;
    const float *x;
    float *y;
} flip_job;

static void flip_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const flip_job *j = arg;
    const cnn_aug_desc *d = j->d;
    const size_t plane = (size_t)d->h * d->w;
    for (long q = lo; q < hi; ++q) {
        const long i = q / d->c;
        const int flip = cnn_aug_draw(j->key_t, j->row0 + i, 0) <= 0.5f;
        const int fh = flip && d->flip_h, fv = flip && d->flip_v;
        const float *src = j->x + (size_t)q * plane;
        float *dst = j->y + (size_t)q * plane;
        for (int r = 0; r < d->h; ++r) {
            const float *in = src + (size_t)(fv ? d->h - 1 - r : r) * d->w;
            float *out = dst + (size_t)r * d->w;
            if (fh)
                for (int s = 0; s < d->w; ++s) out[s] = in[d->w - 1 - s];
            else
                memcpy(out, in, (size_t)d->w * sizeof(float));
        }
    }
}

/* x (n, c, h, w) -> y (n, c, h, w) */
cnn_status cpu_random_flip(cnn_ctx *ctx, const cnn_aug_desc *d, int training,
                           const int64_t *forward, int64_t row0, const float *x, float *y)
{
    CNN_TRY(cnn_aug_check("random_flip", d, row0));
    const size_t count = (size_t)d->n * d->c * d->h * d->w;
    if (!training) {
        if (count) memcpy(y, x, count * sizeof(float));
        return CNN_OK;
    }
    flip_job j = {d, cnn_rng_key(d->key, (uint64_t)*forward), row0, x, y};
    const long planes = (long)d->n * d->c;
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, planes, 2.0 * d->h * d->w, CNN_GRAIN_ELEMENTS),
                     planes, flip_range, &j);
    return CNN_OK;
}
