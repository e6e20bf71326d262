/* add.c: the sum of two tensors for the cpu and omp engines: an Add layer's
 * forward (its inputs summed one after another), and the sum of the
 * gradients of a layer output that several layers read (csrc/net/graph.c).
 * y may be a or b. The omp engine cuts the elements into ranges. */
#include "cpu.h"

typedef struct add_job {
    const float *a, *b;
    float *y;
} add_job;

static void add_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const add_job *j = arg;
    for (long i = lo; i < hi; ++i) j->y[i] = j->a[i] + j->b[i];
}

/* a, b (n, count) -> y (n, count) */
cnn_status cpu_add(cnn_ctx *ctx, int n, int count, const float *a, const float *b, float *y)
{
    if (n < 0 || count < 0)
        return cnn_set_error(CNN_ERR_VALUE, "add: negative shape (%d, %d)", n, count);
    const long total = (long)n * count;
    add_job j = {a, b, y};
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, total, 1.0, CNN_GRAIN_ELEMENTS), total, add_range,
                     &j);
    return CNN_OK;
}
