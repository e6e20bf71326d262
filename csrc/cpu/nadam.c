/* nadam.c: one Nadam step for the cpu engine, Keras 3's form
 * (keras/src/optimizers/nadam.py, update_step), with the step's
 * coefficients c from cnn_nadam_coefficients (cnn.h):
 *   m += (g - m)(1 - beta_1); v += (g^2 - v)(1 - beta_2);
 *   m_hat = c[0] m + c[1] g; v_hat = v / c[2];
 *   p -= lr m_hat / (sqrt(v_hat) + epsilon).
 * Elementwise: the omp engine cuts the block into ranges, one per thread. */
#include <math.h>

#include "cpu.h"

typedef struct nadam_job {
    float lr, one_b1, one_b2, eps, cm, cg, bc2;
    float *p, *m, *v;
    const float *g;
} nadam_job;

static void nadam_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const nadam_job *j = arg;
    float *restrict p = j->p, *restrict m = j->m, *restrict v = j->v;
    const float *restrict g = j->g;
    const float lr = j->lr, one_b1 = j->one_b1, one_b2 = j->one_b2, eps = j->eps;
    const float cm = j->cm, cg = j->cg, bc2 = j->bc2;
    for (long i = lo; i < hi; ++i) {
        const float gi = g[i];
        const float mi = m[i] + (gi - m[i]) * one_b1;
        const float vi = v[i] + (gi * gi - v[i]) * one_b2;
        m[i] = mi;
        v[i] = vi;
        const float m_hat = cm * mi + cg * gi;
        const float v_hat = vi / bc2;
        p[i] -= (m_hat * lr) / (sqrtf(v_hat) + eps);
    }
}

/* p, g, m (momentum), v (velocity): (count); hyper: (CNN_HYPERS), cnn.h */
cnn_status cpu_nadam_step(cnn_ctx *ctx, const float *hyper, const int64_t *step,
                          size_t count, float *p, const float *g, float *m, float *v)
{
    if (hyper[CNN_HYPER_SKIP] != 0.0f) return CNN_OK; /* loss scaling skips this step */
    if (*step < 1)
        return cnn_set_error(CNN_ERR_VALUE, "nadam: step %lld must count from 1",
                             (long long)*step);
    const float b1 = hyper[CNN_HYPER_BETA_1], b2 = hyper[CNN_HYPER_BETA_2];
    float c[3];
    cnn_nadam_coefficients(b1, b2, *step, c);
    nadam_job j = {hyper[CNN_HYPER_LR], 1.0f - b1, 1.0f - b2, hyper[CNN_HYPER_EPSILON],
                   c[0], c[1], c[2], p, m, v, g};
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, (long)count, 5.0, CNN_GRAIN_ELEMENTS),
                     (long)count, nadam_range, &j);
    return CNN_OK;
}
