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

/* rows order[*position + i] of src, each row_bytes long -> dst (count rows) */
cnn_status cpu_gather_rows(cnn_ctx *ctx, const int32_t *order, const int64_t *position,
                           int count, size_t row_bytes, const void *src, void *dst)
{
    gather_job j = {order + *position, row_bytes, src, dst};
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, count, (double)row_bytes / sizeof(float),
                                   4.0 * CNN_GRAIN_ELEMENTS),
                     count, gather_range, &j);
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
