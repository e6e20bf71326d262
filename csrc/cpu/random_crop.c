/* random_crop.c: RandomCrop for the cpu and omp engines (the planes cut
 * into ranges, one per thread): each sample's (oh, ow) window at
 * cnn_aug_crop_offsets's offsets (augment.h): drawn in training forwards,
 * the centre at inference. */
#include <string.h>

#include "cpu.h"

typedef struct crop_job {
    const cnn_aug_desc *d;
    int training;
    uint64_t key_t;
    int64_t row0;
    const float *x;
    float *y;
} crop_job;

static void crop_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const crop_job *j = arg;
    const cnn_aug_desc *d = j->d;
    for (long q = lo; q < hi; ++q) {
        int oy, ox;
        cnn_aug_crop_offsets(d, j->training, j->key_t, j->row0 + q / d->c, &oy, &ox);
        const float *src = j->x + (size_t)q * d->h * d->w + (size_t)oy * d->w + ox;
        float *dst = j->y + (size_t)q * d->oh * d->ow;
        for (int r = 0; r < d->oh; ++r)
            memcpy(dst + (size_t)r * d->ow, src + (size_t)r * d->w, (size_t)d->ow * sizeof(float));
    }
}

/* x (n, c, h, w) -> y (n, c, oh, ow) */
cnn_status cpu_random_crop(cnn_ctx *ctx, const cnn_aug_desc *d, int training,
                           const int64_t *forward, int64_t row0, const float *x, float *y)
{
    CNN_TRY(cnn_aug_check("random_crop", d, row0));
    crop_job j = {d, training, training ? cnn_rng_key(d->key, (uint64_t)*forward) : 0, row0, x,
                  y};
    const long planes = (long)d->n * d->c;
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, planes, 2.0 * d->oh * d->ow, CNN_GRAIN_ELEMENTS),
                     planes, crop_range, &j);
    return CNN_OK;
}
