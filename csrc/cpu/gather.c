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

/* idx (count) rows of src, each row_bytes long -> dst (count rows) */
cnn_status cpu_gather_rows(cnn_ctx *ctx, const int32_t *idx, int count, size_t row_bytes,
                           const void *src, void *dst)
{
    gather_job j = {idx, row_bytes, src, dst};
    cnn_cpu_parallel(cnn_cpu_parts(ctx, count, (double)row_bytes / sizeof(float),
                                   4.0 * CNN_GRAIN_ELEMENTS),
                     count, gather_range, &j);
    return CNN_OK;
}
