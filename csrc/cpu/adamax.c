/* adamax.c: one Adamax step for the cpu engine, Keras 3's form
 * (keras/src/optimizers/adamax.py, update_step):
 *   m += (g - m)(1 - beta_1); u = max(beta_2 u, |g|);
 *   p -= lr m / ((1 - beta_1^t)(u + epsilon)),
 * written p -= lr_t m / (u + epsilon) with lr_t = lr / (1 - beta_1^t)
 * (cnn_adamax_lr_t, cnn.h). Elementwise: the omp engine cuts the block into
 * ranges, one per thread. */
#include <math.h>

#include "cpu.h"

typedef struct adamax_job {
    float lr_t, one_b1, b2, eps;
    float *p, *m, *u;
    const float *g;
} adamax_job;

static void adamax_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const adamax_job *j = arg;
    float *restrict p = j->p, *restrict m = j->m, *restrict u = j->u;
    const float *restrict g = j->g;
    const float lr_t = j->lr_t, one_b1 = j->one_b1, b2 = j->b2, eps = j->eps;
    for (long i = lo; i < hi; ++i) {
        const float gi = g[i];
        const float mi = m[i] + (gi - m[i]) * one_b1;
        const float bu = b2 * u[i], ag = fabsf(gi);
        const float ui = bu > ag ? bu : ag;
        m[i] = mi;
        u[i] = ui;
        p[i] -= (mi * lr_t) / (ui + eps);
    }
}

/* p, g, m (momentum), v (norm u): (count); hyper: (CNN_HYPERS), cnn.h */
cnn_status cpu_adamax_step(cnn_ctx *ctx, const float *hyper, const int64_t *step,
                           size_t count, float *p, const float *g, float *m, float *v)
{
    if (hyper[CNN_HYPER_SKIP] != 0.0f) return CNN_OK; /* loss scaling skips this step */
    if (*step < 1)
        return cnn_set_error(CNN_ERR_VALUE, "adamax: step %lld must count from 1",
                             (long long)*step);
    const float b1 = hyper[CNN_HYPER_BETA_1];
    adamax_job j = {cnn_adamax_lr_t(hyper[CNN_HYPER_LR], b1, *step), 1.0f - b1,
                    hyper[CNN_HYPER_BETA_2], hyper[CNN_HYPER_EPSILON], p, m, v, g};
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, (long)count, 4.0, CNN_GRAIN_ELEMENTS),
                     (long)count, adamax_range, &j);
    return CNN_OK;
}
