/* concat.c: a Concatenate layer along the channels for the cpu and omp
 * engines: each input's channels copied into their place in the output
 * (forward), and back out of the output's gradient (backward). Tensors are
 * (n, c, hw): NCHW images, or (n, features) rows with hw = 1. The omp
 * engine cuts the (sample, channel) rows into ranges. */
#include <string.h>

#include "cpu.h"

typedef struct concat_job {
    int c, hw, c_total, offset, forward;
    const float *in;
    float *out;
} concat_job;

/* rows [lo, hi) of the input's (n * c) rows of hw values */
static void concat_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const concat_job *j = arg;
    const size_t hw = (size_t)j->hw;
    for (long r = lo; r < hi; ++r) {
        const long s = r / j->c, ch = r % j->c;
        const size_t part = (size_t)r * hw;
        const size_t whole = ((size_t)s * j->c_total + (size_t)j->offset + (size_t)ch) * hw;
        if (j->forward)
            memcpy(j->out + whole, j->in + part, hw * sizeof(float));
        else
            memcpy(j->out + part, j->in + whole, hw * sizeof(float));
    }
}

static cnn_status concat(cnn_ctx *ctx, int n, int c, int hw, int c_total, int offset,
                         const float *in, float *out, int forward)
{
    if (n < 0 || c < 0 || hw < 0 || offset < 0 || offset + c > c_total)
        return cnn_set_error(CNN_ERR_VALUE,
                             "concat: bad shape: %d samples of %d channels of %d at channel %d "
                             "of %d",
                             n, c, hw, offset, c_total);
    const long rows = (long)n * c;
    concat_job j = {c, hw, c_total, offset, forward, in, out};
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, rows, (double)hw, CNN_GRAIN_ELEMENTS), rows,
                     concat_range, &j);
    return CNN_OK;
}

/* x (n, c, hw) -> channels [offset, offset + c) of y (n, c_total, hw) */
cnn_status cpu_concat_forward(cnn_ctx *ctx, int n, int c, int hw, int c_total, int offset,
                              const float *x, float *y)
{
    return concat(ctx, n, c, hw, c_total, offset, x, y, 1);
}

/* channels [offset, offset + c) of dy (n, c_total, hw) -> dx (n, c, hw) */
cnn_status cpu_concat_backward(cnn_ctx *ctx, int n, int c, int hw, int c_total, int offset,
                               const float *dy, float *dx)
{
    return concat(ctx, n, c, hw, c_total, offset, dy, dx, 0);
}
