/* sgd.c: one SGD step for the cpu engine, in Keras's form:
 *   momentum 0 (or no velocity buffer): p -= lr g;
 *   else v = momentum v - lr g, then p += v, or with nesterov
 *   p += momentum v - lr g.
 * Elementwise: the omp engine cuts the block into ranges, one per thread. */
#include "cpu.h"

typedef struct sgd_job {
    float lr, mom;
    int nesterov;
    float *p, *velocity;
    const float *g;
} sgd_job;

static void sgd_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const sgd_job *j = arg;
    float *restrict p = j->p, *restrict velocity = j->velocity;
    const float *restrict g = j->g;
    const float lr = j->lr, mom = j->mom;
    if (mom == 0.0f || !velocity) {
        for (long i = lo; i < hi; ++i) p[i] -= lr * g[i];
    } else if (j->nesterov) {
        for (long i = lo; i < hi; ++i) {
            const float vi = mom * velocity[i] - lr * g[i];
            velocity[i] = vi;
            p[i] += mom * vi - lr * g[i];
        }
    } else {
        for (long i = lo; i < hi; ++i) {
            const float vi = mom * velocity[i] - lr * g[i];
            velocity[i] = vi;
            p[i] += vi;
        }
    }
}

/* p, g, velocity: (count); velocity is unused (may be NULL) without
 * momentum; hyper: (CNN_HYPERS), cnn.h */
cnn_status cpu_sgd_step(cnn_ctx *ctx, const float *hyper, size_t count, float *p,
                        const float *g, float *velocity)
{
    if (hyper[CNN_HYPER_SKIP] != 0.0f) return CNN_OK; /* loss scaling skips this step */
    const float mom = hyper[CNN_HYPER_MOMENTUM];
    if (mom != 0.0f && !velocity)
        return cnn_set_error(CNN_ERR_VALUE, "sgd: momentum without a velocity buffer");
    sgd_job j = {hyper[CNN_HYPER_LR], mom, hyper[CNN_HYPER_NESTEROV] != 0.0f, p, velocity, g};
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, (long)count, 2.0, CNN_GRAIN_ELEMENTS),
                     (long)count, sgd_range, &j);
    return CNN_OK;
}
