/* reshape.c: Reshape for the cpu and omp engines (omp: the samples cut
 * into ranges, one per thread). Keras reshapes NHWC tensors, whose element
 * order is the flat order; the engines keep images NCHW, so y (oc, oh, ow)
 * takes, at NCHW position (k, q) (q the pixel), the value of NHWC index
 * j = q*oc + k, which x (c, h, w) holds at channel j % c, pixel j / c. With
 * c == oc (the same channels: a regrouping of the pixels) that is the same
 * bytes, copied. Features (n, f) are (n, f, 1, 1). */
#include <string.h>

#include "cpu.h"

typedef struct reshape_job {
    int c, oc;
    size_t plane, oplane, count; /* per sample: h*w, oh*ow, c*h*w */
    const float *x;
    float *y;
} reshape_job;

static void reshape_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const reshape_job *j = arg;
    for (long i = lo; i < hi; ++i) {
        const float *x = j->x + (size_t)i * j->count;
        float *y = j->y + (size_t)i * j->count;
        if (j->c == j->oc) {
            memcpy(y, x, j->count * sizeof(float));
            continue;
        }
        for (int k = 0; k < j->oc; ++k) {
            float *row = y + (size_t)k * j->oplane;
            for (size_t q = 0; q < j->oplane; ++q) {
                const size_t at = q * (size_t)j->oc + (size_t)k;
                row[q] = x[(at % (size_t)j->c) * j->plane + at / (size_t)j->c];
            }
        }
    }
}

cnn_status cpu_reshape(cnn_ctx *ctx, int n, int c, int h, int w, int oc, int oh, int ow,
                       const float *x, float *y)
{
    if (n < 0 || c < 1 || h < 1 || w < 1 || oc < 1 || oh < 1 || ow < 1 ||
        (size_t)c * h * w != (size_t)oc * oh * ow)
        return cnn_set_error(CNN_ERR_VALUE,
                             "reshape: (%d, %d, %d, %d) cannot become (%d, %d, %d, %d)", n, c,
                             h, w, n, oc, oh, ow);
    reshape_job j = {c, oc, (size_t)h * w, (size_t)oh * ow, (size_t)c * h * w, x, y};
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, n, 2.0 * (double)j.count, CNN_GRAIN_ELEMENTS), n,
                     reshape_range, &j);
    return CNN_OK;
}
