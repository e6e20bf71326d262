/* gather.c: batch gathering from resident training data for the cpu and omp
 * engines (omp: the rows cut into ranges, one per thread). */
#include <string.h>

#include "cpu.h"

typedef struct gather_job {
    const int32_t *idx;
    size_t row_bytes;
    const char *src;
    char *dst;
} gather_job;

static void gather_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const gather_job *j = arg;
    for (long i = lo; i < hi; ++i)
        memcpy(j->dst + (size_t)i * j->row_bytes, j->src + (size_t)j->idx[i] * j->row_bytes,
               j->row_bytes);
}

static void gather(cnn_ctx *ctx, const int32_t *idx, int count, size_t row_bytes,
                   const void *src, void *dst)
{
    gather_job j = {idx, row_bytes, src, dst};
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, count, (double)row_bytes / sizeof(float),
                                   4.0 * CNN_GRAIN_ELEMENTS),
                     count, gather_range, &j);
}

/* rows order[counters[POSITION] + i] of src_x and src_t -> dst_x and dst_t
 * (count rows each); then the counters move on as the step will (cnn.h) */
cnn_status cpu_gather_batch(cnn_ctx *ctx, const int32_t *order, int64_t *counters, int count,
                            long rows, size_t x_row_bytes, const void *src_x, void *dst_x,
                            size_t t_row_bytes, const void *src_t, void *dst_t)
{
    if (count < 0) return cnn_set_error(CNN_ERR_VALUE, "gather_batch: negative count %d", count);
    const int32_t *idx = order + counters[CNN_COUNT_POSITION];
    if (count && x_row_bytes) gather(ctx, idx, count, x_row_bytes, src_x, dst_x);
    if (count && src_t && t_row_bytes) gather(ctx, idx, count, t_row_bytes, src_t, dst_t);
    counters[CNN_COUNT_MASK] = counters[CNN_COUNT_FORWARDS]++;
    counters[CNN_COUNT_STEPS] += 1;
    counters[CNN_COUNT_POSITION] += rows;
    return CNN_OK;
}

/* The Net's counters (cnn.h), in host memory here. */
cnn_status cpu_advance_counters(cnn_ctx *ctx, int64_t *counters, int forward, int steps,
                                long rows)
{
    (void)ctx;
    if (forward) counters[CNN_COUNT_MASK] = counters[CNN_COUNT_FORWARDS]++;
    counters[CNN_COUNT_STEPS] += steps;
    counters[CNN_COUNT_POSITION] += rows;
    return CNN_OK;
}
