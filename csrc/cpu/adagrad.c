/* adagrad.c: one Adagrad step for the cpu engine, Keras 3's form
 * (keras/src/optimizers/adagrad.py, update_step):
 *   accumulator += g^2;
 *   p -= lr g / sqrt(accumulator + epsilon).
 * The accumulator starts at initial_accumulator_value (the Net fills it
 * when it is made). Elementwise: the omp engine cuts the block into ranges,
 * one per thread. */
#include <math.h>

#include "cpu.h"

typedef struct adagrad_job {
    float lr, eps;
    float *p, *acc;
    const float *g;
} adagrad_job;

static void adagrad_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const adagrad_job *j = arg;
    float *restrict p = j->p, *restrict acc = j->acc;
    const float *restrict g = j->g;
    const float lr = j->lr, eps = j->eps;
    for (long i = lo; i < hi; ++i) {
        const float gi = g[i];
        const float ai = acc[i] + gi * gi;
        acc[i] = ai;
        p[i] -= (lr * gi) / sqrtf(ai + eps);
    }
}

/* p, g, accumulator: (count); hyper: (CNN_HYPERS), cnn.h */
cnn_status cpu_adagrad_step(cnn_ctx *ctx, const float *hyper, size_t count, float *p,
                            const float *g, float *accumulator)
{
    if (hyper[CNN_HYPER_SKIP] != 0.0f) return CNN_OK; /* loss scaling skips this step */
    if (!accumulator)
        return cnn_set_error(CNN_ERR_VALUE, "adagrad: no accumulator buffer");
    adagrad_job j = {hyper[CNN_HYPER_LR], hyper[CNN_HYPER_EPSILON], p, accumulator, g};
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, (long)count, 3.0, CNN_GRAIN_ELEMENTS),
                     (long)count, adagrad_range, &j);
    return CNN_OK;
}
