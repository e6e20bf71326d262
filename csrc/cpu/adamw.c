/* adamw.c: one AdamW step for the cpu engine, Keras 3's form: the base
 * optimizer's weight decay (keras/src/optimizers/base_optimizer.py,
 * _apply_weight_decay: p = p - p wd lr, on every trainable weight, before
 * the update), then Adam's update (adam.py; adam.c):
 *   p -= p (lr wd);
 *   lr_t = lr sqrt(1 - beta_2^t) / (1 - beta_1^t)   (cnn_adam_lr_t, cnn.h)
 *   m += (g - m)(1 - beta_1); v += (g^2 - v)(1 - beta_2);
 *   p -= lr_t m / (sqrt(v) + epsilon).
 * Elementwise: the omp engine cuts the block into ranges, one per thread. */
#include <math.h>

#include "cpu.h"

typedef struct adamw_job {
    float decay, lr_t, one_b1, one_b2, eps;
    float *p, *m, *v;
    const float *g;
} adamw_job;

static void adamw_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const adamw_job *j = arg;
    float *restrict p = j->p, *restrict m = j->m, *restrict v = j->v;
    const float *restrict g = j->g;
    const float decay = j->decay, lr_t = j->lr_t, one_b1 = j->one_b1, one_b2 = j->one_b2;
    const float eps = j->eps;
    for (long i = lo; i < hi; ++i) {
        const float gi = g[i];
        const float pi = p[i] - p[i] * decay;
        const float mi = m[i] + (gi - m[i]) * one_b1;
        const float vi = v[i] + (gi * gi - v[i]) * one_b2;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - (mi * lr_t) / (sqrtf(vi) + eps);
    }
}

/* p, g, m, v: (count); hyper: (CNN_HYPERS), cnn.h */
cnn_status cpu_adamw_step(cnn_ctx *ctx, const float *hyper, const int64_t *step,
                          size_t count, float *p, const float *g, float *m, float *v)
{
    if (hyper[CNN_HYPER_SKIP] != 0.0f) return CNN_OK; /* loss scaling skips this step */
    if (*step < 1)
        return cnn_set_error(CNN_ERR_VALUE, "adamw: step %lld must count from 1",
                             (long long)*step);
    const float lr = hyper[CNN_HYPER_LR];
    const float b1 = hyper[CNN_HYPER_BETA_1], b2 = hyper[CNN_HYPER_BETA_2];
    adamw_job j = {lr * hyper[CNN_HYPER_WEIGHT_DECAY], cnn_adam_lr_t(lr, b1, b2, *step),
                   1.0f - b1, 1.0f - b2, hyper[CNN_HYPER_EPSILON], p, m, v, g};
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, (long)count, 4.0, CNN_GRAIN_ELEMENTS),
                     (long)count, adamw_range, &j);
    return CNN_OK;
}
