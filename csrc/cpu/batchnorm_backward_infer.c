/* batchnorm_backward_infer.c: the backward of batch normalization in
 * inference mode (a frozen layer in training, as Keras 3 runs it), for the
 * cpu and omp engines: dx = dy (gamma invstd), invstd = 1 / sqrt(moving_var
 * + epsilon), per channel; the omp engine splits the channels. */
#include <math.h>

#include "cpu.h"

typedef struct bn_infer_job {
    const cnn_bn_desc *d;
    const float *dy, *gamma, *var;
    float *dx;
} bn_infer_job;

static void backward_infer_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const bn_infer_job *j = arg;
    const int n = j->d->n, c = j->d->c;
    const size_t sp = (size_t)j->d->spatial;
    for (long ch = lo; ch < hi; ++ch) {
        const float invstd = 1.0f / sqrtf(j->var[ch] + j->d->epsilon);
        const float k = j->gamma[ch] * invstd;
        for (int i = 0; i < n; ++i) {
            const float *restrict dyi = j->dy + ((size_t)i * c + ch) * sp;
            float *restrict dxi = j->dx + ((size_t)i * c + ch) * sp;
            for (size_t q = 0; q < sp; ++q) dxi[q] = dyi[q] * k;
        }
    }
}

/* dy (n, c, spatial), gamma, moving_var (c) -> dx like dy */
cnn_status cpu_batchnorm_backward_infer(cnn_ctx *ctx, const cnn_bn_desc *d, const float *dy,
                                        const float *gamma, const float *moving_var, float *dx)
{
    if (d->n < 1 || d->c < 1 || d->spatial < 1)
        return cnn_set_error(CNN_ERR_VALUE, "batchnorm_backward_infer: n, c and spatial must "
                             "be >= 1, got %d, %d, %d", d->n, d->c, d->spatial);
    bn_infer_job j = {.d = d, .dy = dy, .gamma = gamma, .var = moving_var, .dx = dx};
    const double work = (double)d->n * (double)d->spatial;
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, d->c, work, CNN_GRAIN_ELEMENTS), d->c,
                     backward_infer_range, &j);
    return CNN_OK;
}
