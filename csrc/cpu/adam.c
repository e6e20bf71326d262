/* adam.c: one Adam step for the cpu engine, in Keras's form:
 *   lr_t = lr sqrt(1 - beta_2^t) / (1 - beta_1^t)   (double, then float)
 *   m += (g - m)(1 - beta_1); v += (g^2 - v)(1 - beta_2);
 *   p -= lr_t m / (sqrt(v) + epsilon). */
#include <math.h>

#include "cpu.h"

/* p, g, m, v: (count) */
cnn_status cpu_adam_step(cnn_ctx *ctx, const cnn_optimizer_desc *o, long step, size_t count,
                         float *restrict p, const float *restrict g, float *restrict m,
                         float *restrict v)
{
    (void)ctx;
    if (step < 1) return cnn_set_error(CNN_ERR_VALUE, "adam: step %ld must count from 1", step);
    const double t = (double)step;
    const float lr_t = (float)((double)o->lr * sqrt(1.0 - pow((double)o->beta_2, t)) /
                               (1.0 - pow((double)o->beta_1, t)));
    const float one_b1 = 1.0f - o->beta_1, one_b2 = 1.0f - o->beta_2, eps = o->epsilon;
    for (size_t i = 0; i < count; ++i) {
        const float gi = g[i];
        const float mi = m[i] + (gi - m[i]) * one_b1;
        const float vi = v[i] + (gi * gi - v[i]) * one_b2;
        m[i] = mi;
        v[i] = vi;
        p[i] -= (mi * lr_t) / (sqrtf(vi) + eps);
    }
    return CNN_OK;
}
