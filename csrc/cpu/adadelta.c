/* adadelta.c: one Adadelta step for the cpu engine, Keras 3's form
 * (keras/src/optimizers/adadelta.py, update_step):
 *   accumulated_grad = rho accumulated_grad + (1 - rho) g^2;
 *   delta = -sqrt(accumulated_delta_var + epsilon) g / sqrt(accumulated_grad + epsilon);
 *   accumulated_delta_var = rho accumulated_delta_var + (1 - rho) delta^2;
 *   p += lr delta.
 * The entry has Adam's signature; the step is not read. Elementwise: the omp
 * engine cuts the block into ranges, one per thread. */
#include <math.h>

#include "cpu.h"

typedef struct adadelta_job {
    float lr, rho, one_rho, eps;
    float *p, *acc_g, *acc_d;
    const float *g;
} adadelta_job;

static void adadelta_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const adadelta_job *j = arg;
    float *restrict p = j->p, *restrict acc_g = j->acc_g, *restrict acc_d = j->acc_d;
    const float *restrict g = j->g;
    const float lr = j->lr, rho = j->rho, one_rho = j->one_rho, eps = j->eps;
    for (long i = lo; i < hi; ++i) {
        const float gi = g[i];
        const float ag = rho * acc_g[i] + one_rho * (gi * gi);
        acc_g[i] = ag;
        const float delta = -((sqrtf(acc_d[i] + eps) * gi) / sqrtf(ag + eps));
        acc_d[i] = rho * acc_d[i] + one_rho * (delta * delta);
        p[i] += lr * delta;
    }
}

/* p, g, accumulated_grad (m), accumulated_delta_var (v): (count);
 * hyper: (CNN_HYPERS), cnn.h; step: unused */
cnn_status cpu_adadelta_step(cnn_ctx *ctx, const float *hyper, const int64_t *step,
                             size_t count, float *p, const float *g, float *m, float *v)
{
    if (hyper[CNN_HYPER_SKIP] != 0.0f) return CNN_OK; /* loss scaling skips this step */
    (void)step;
    const float rho = hyper[CNN_HYPER_RHO];
    adadelta_job j = {hyper[CNN_HYPER_LR], rho, 1.0f - rho, hyper[CNN_HYPER_EPSILON], p, m, v, g};
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, (long)count, 5.0, CNN_GRAIN_ELEMENTS),
                     (long)count, adadelta_range, &j);
    return CNN_OK;
}
