/* pad2d.c: ZeroPadding2D and Cropping2D for the cpu and omp engines (omp:
 * the planes cut into ranges, one per thread). y[r][s] = x[r - top][s - left]
 * where that is inside x, else 0: top and left > 0 pad, < 0 crop, so each
 * layer's backward is this op the other way (padding's: a crop of dy). */
#include <string.h>

#include "cpu.h"

typedef struct pad_job {
    int h, w, oh, ow, top, left;
    const float *x;
    float *y;
} pad_job;

static void pad_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const pad_job *j = arg;
    /* the output columns [s0, s1) that read inside x */
    const int s0 = j->left > 0 ? j->left : 0;
    const int s1 = j->w + j->left < j->ow ? j->w + j->left : j->ow;
    for (long q = lo; q < hi; ++q) {
        const float *x = j->x + (size_t)q * j->h * j->w;
        float *y = j->y + (size_t)q * j->oh * j->ow;
        for (int r = 0; r < j->oh; ++r) {
            float *row = y + (size_t)r * j->ow;
            const int src = r - j->top;
            if (src < 0 || src >= j->h || s0 >= s1) {
                memset(row, 0, (size_t)j->ow * sizeof(float));
                continue;
            }
            if (s0 > 0) memset(row, 0, (size_t)s0 * sizeof(float));
            memcpy(row + s0, x + (size_t)src * j->w + (s0 - j->left),
                   (size_t)(s1 - s0) * sizeof(float));
            if (s1 < j->ow) memset(row + s1, 0, (size_t)(j->ow - s1) * sizeof(float));
        }
    }
}

cnn_status cpu_pad2d(cnn_ctx *ctx, int n, int c, int h, int w, int oh, int ow, int top,
                     int left, const float *x, float *y)
{
    if (n < 0 || c < 0 || h < 1 || w < 1 || oh < 1 || ow < 1)
        return cnn_set_error(CNN_ERR_VALUE, "pad2d: shapes (%d, %d, %d, %d) -> (%d, %d, %d, %d)",
                             n, c, h, w, n, c, oh, ow);
    pad_job j = {h, w, oh, ow, top, left, x, y};
    const long planes = (long)n * c;
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, planes, (double)h * w + (double)oh * ow,
                                        CNN_GRAIN_ELEMENTS),
                     planes, pad_range, &j);
    return CNN_OK;
}
