/* rmsprop.c: one RMSprop step for the cpu engine, Keras 3's form
 * (keras/src/optimizers/rmsprop.py, update_step):
 *   velocity = rho velocity + (1 - rho) g^2;
 *   centered: average_gradient = rho average_gradient + (1 - rho) g,
 *             denominator = velocity - average_gradient^2 + epsilon;
 *   else      denominator = velocity + epsilon;
 *   increment = lr g / sqrt(denominator);
 *   momentum > 0: momentum_slot = momentum momentum_slot + increment,
 *                 p -= momentum_slot;
 *   else          p -= increment.
 * The momentum slot exists only for a net built with momentum > 0 (as in
 * Keras, where it is made at build time); with the momentum set to 0 later
 * it is left as it is. Elementwise: the omp engine cuts the block into
 * ranges, one per thread. */
#include <math.h>

#include "cpu.h"

typedef struct rmsprop_job {
    float lr, rho, one_rho, mom, eps;
    float *p, *velocity, *momentum, *average;
    const float *g;
} rmsprop_job;

static void rmsprop_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const rmsprop_job *j = arg;
    float *restrict p = j->p, *restrict vel = j->velocity, *restrict mom_s = j->momentum;
    float *restrict avg = j->average;
    const float *restrict g = j->g;
    const float lr = j->lr, rho = j->rho, one_rho = j->one_rho, mom = j->mom, eps = j->eps;
    const int use_mom = mom_s && mom > 0.0f;
    for (long i = lo; i < hi; ++i) {
        const float gi = g[i];
        const float vi = rho * vel[i] + one_rho * (gi * gi);
        vel[i] = vi;
        float denom;
        if (avg) {
            const float ai = rho * avg[i] + one_rho * gi;
            avg[i] = ai;
            denom = (vi - ai * ai) + eps;
        } else {
            denom = vi + eps;
        }
        const float inc = (lr * gi) / sqrtf(denom);
        if (use_mom) {
            const float mi = mom * mom_s[i] + inc;
            mom_s[i] = mi;
            p[i] -= mi;
        } else {
            p[i] -= inc;
        }
    }
}

/* p, g, velocity: (count); momentum, average_gradient: (count) or NULL;
 * hyper: (CNN_HYPERS), cnn.h */
cnn_status cpu_rmsprop_step(cnn_ctx *ctx, const float *hyper, size_t count, float *p,
                            const float *g, float *velocity, float *momentum,
                            float *average_gradient)
{
    if (hyper[CNN_HYPER_SKIP] != 0.0f) return CNN_OK; /* loss scaling skips this step */
    if (!velocity)
        return cnn_set_error(CNN_ERR_VALUE, "rmsprop: no velocity buffer");
    const float mom = hyper[CNN_HYPER_MOMENTUM];
    if (mom != 0.0f && !momentum)
        return cnn_set_error(CNN_ERR_VALUE, "rmsprop: momentum without a momentum buffer");
    const float rho = hyper[CNN_HYPER_RHO];
    rmsprop_job j = {hyper[CNN_HYPER_LR], rho, 1.0f - rho, mom, hyper[CNN_HYPER_EPSILON],
                     p, velocity, momentum, average_gradient, g};
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, (long)count, 5.0, CNN_GRAIN_ELEMENTS),
                     (long)count, rmsprop_range, &j);
    return CNN_OK;
}
