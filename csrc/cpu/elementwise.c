/* elementwise.c: the activations from CNN_ACT_ELU on (cnn.h), forward and
 * backward, for the cpu and omp engines; the formulas are
 * csrc/activation_math.h's, which the GPU engines share. The omp engine cuts
 * the elements into ranges, one per thread (each element's value depends on
 * that element only, so the bits do not depend on the cut). */
#include "../activation_math.h"
#include "cpu.h"

typedef struct eltwise_job {
    cnn_act_desc d;
    const float *x, *y, *dy;
    float *out;
} eltwise_job;

static void forward_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const eltwise_job *j = arg;
    for (long i = lo; i < hi; ++i) j->out[i] = cnn_act_value(&j->d, j->x[i]);
}

static void backward_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const eltwise_job *j = arg;
    for (long i = lo; i < hi; ++i) j->out[i] = cnn_act_grad(&j->d, j->x[i], j->y[i], j->dy[i]);
}

static cnn_status check(const char *what, const cnn_act_desc *d, long count)
{
    if (count < 0) return cnn_set_error(CNN_ERR_VALUE, "%s: negative count %ld", what, count);
    if (d->act < CNN_ACT_ELU || d->act >= CNN_ACT_KINDS)
        return cnn_set_error(CNN_ERR_VALUE,
                             "%s: activation %d is not one of the elementwise ones (%d to %d)",
                             what, d->act, CNN_ACT_ELU, CNN_ACT_KINDS - 1);
    return CNN_OK;
}

/* a transcendental per element: 8 units each, as activation.c counts them */
#define ELTWISE_COST 8.0

cnn_status cpu_elementwise_forward(cnn_ctx *ctx, const cnn_act_desc *d, long count,
                                   const float *x, float *y)
{
    CNN_TRY(check("elementwise_forward", d, count));
    eltwise_job j = {*d, x, NULL, NULL, y};
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, count, ELTWISE_COST, CNN_GRAIN_ELEMENTS), count,
                     forward_range, &j);
    return CNN_OK;
}

cnn_status cpu_elementwise_backward(cnn_ctx *ctx, const cnn_act_desc *d, long count,
                                    const float *x, const float *y, const float *dy, float *dx)
{
    CNN_TRY(check("elementwise_backward", d, count));
    eltwise_job j = {*d, x, y, dy, dx};
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, count, ELTWISE_COST, CNN_GRAIN_ELEMENTS), count,
                     backward_range, &j);
    return CNN_OK;
}
