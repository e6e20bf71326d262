/* input_slice.c: one input of a network of several inputs for the cpu and
 * omp engines: each sample's values [offset, offset + h w c) of the packed
 * input row, an NHWC image (or a (1, 1, c) row of features), copied into
 * its own (n, c, h, w) tensor in the engines' NCHW layout. The omp engine
 * cuts the (sample, channel) planes into ranges. */
#include "cpu.h"

typedef struct slice_job {
    int row, offset, hw, c;
    const float *x;
    float *y;
} slice_job;

/* planes [lo, hi) of the output's n * c planes of hw values */
static void slice_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const slice_job *j = arg;
    const size_t hw = (size_t)j->hw, c = (size_t)j->c;
    for (long r = lo; r < hi; ++r) {
        const size_t s = (size_t)r / c, ch = (size_t)r % c;
        const float *src = j->x + s * (size_t)j->row + (size_t)j->offset + ch;
        float *dst = j->y + (size_t)r * hw;
        for (size_t p = 0; p < hw; ++p) dst[p] = src[p * c];
    }
}

cnn_status cpu_input_slice(cnn_ctx *ctx, int n, int row, int offset, int h, int w, int c,
                           const float *x, float *y)
{
    if (n < 0 || h < 1 || w < 1 || c < 1 || offset < 0 ||
        (double)offset + (double)h * w * c > (double)row)
        return cnn_set_error(CNN_ERR_VALUE,
                             "input_slice: bad shape: %d samples, a (%d, %d, %d) input at value "
                             "%d of rows of %d",
                             n, h, w, c, offset, row);
    const long planes = (long)n * c;
    slice_job j = {row, offset, h * w, c, x, y};
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, planes, (double)h * w, CNN_GRAIN_ELEMENTS), planes,
                     slice_range, &j);
    return CNN_OK;
}
