/* upload_samples.c: the user's samples into the cpu and omp engines'
 * memory as float32 NCHW, converted and checked on the way.
 *
 * One pass per sample: converted (host_convert.c, the check in the same
 * loop) into a scratch row that stays in cache, then transposed from there
 * into place; a sample whose layouts are the same bytes is converted into
 * place. One read of the user's array and one write of the engine's, where
 * the Net's generic path converts, copies and transposes through two
 * chunk-sized buffers. omp: the samples cut into ranges, one per thread;
 * the smallest bad index over the ranges is the one refused. */
#include <stdlib.h>

#include "cpu.h"

typedef struct upload_job {
    float *dst;
    const cnn_host_array *a;
    size_t row; /* floats per sample */
    int hw, c, transpose;
    float *scratch;    /* a row per slot, when transposing */
    int64_t *first_bad; /* per slot, -1 if none */
} upload_job;

static void upload_range(void *arg, long lo, long hi, int slot)
{
    const upload_job *j = arg;
    float *scratch = j->transpose ? j->scratch + (size_t)slot * j->row : NULL;
    for (long i = lo; i < hi; ++i) {
        float *row = j->dst + (size_t)i * j->row;
        const int64_t bad = cnn_to_float32(scratch ? scratch : row, j->a, (size_t)i * j->row, j->row);
        if (bad >= 0) { /* the first of this range: the rest of it comes later */
            if (j->first_bad[slot] < 0 || bad < j->first_bad[slot]) j->first_bad[slot] = bad;
            return;
        }
        if (scratch) cnn_cpu_transpose(j->hw, j->c, scratch, row);
    }
}

cnn_status cpu_upload_samples(cnn_ctx *ctx, float *dst, const cnn_host_array *a, long n, int h,
                              int w, int c, int transpose)
{
    const int slots = cnn_cpu_get(ctx)->threads;
    const size_t row = (size_t)h * w * c;
    upload_job j = {dst, a, row, h * w, c, transpose, NULL, NULL};
    j.first_bad = malloc((size_t)slots * sizeof *j.first_bad);
    if (transpose) j.scratch = malloc((size_t)slots * row * sizeof(float));
    if (!j.first_bad || (transpose && !j.scratch)) {
        free(j.first_bad);
        free(j.scratch);
        return cnn_set_error(CNN_ERR_MEMORY, "out of host memory converting samples");
    }
    for (int s = 0; s < slots; ++s) j.first_bad[s] = -1;
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, n, 2.0 * (double)row, CNN_GRAIN_ELEMENTS), n,
                     upload_range, &j);
    int64_t bad = -1;
    for (int s = 0; s < slots; ++s)
        if (j.first_bad[s] >= 0 && (bad < 0 || j.first_bad[s] < bad)) bad = j.first_bad[s];
    free(j.first_bad);
    free(j.scratch);
    return bad >= 0 ? cnn_refuse_value(a, (size_t)bad) : CNN_OK;
}
