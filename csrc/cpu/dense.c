/* dense.c: fully connected layer for the cpu and omp engines, y = x w + b,
 * with the kernel stored (in, out) as Keras. The products are threaded over
 * tiles of their output (cnn_cpu_sgemm); the bias terms, at most a few
 * thousand values at the batch sizes here, stay serial. */
#include <string.h>

#include "cpu.h"

/* Columns summed per block in double, on the stack. */
#define DENSE_DB_BLOCK 256

static cnn_status check_dims(const char *what, int n, int in, int out)
{
    if (n < 0 || in < 1 || out < 1)
        return cnn_set_error(CNN_ERR_VALUE, "%s: bad shape (n %d, in %d, out %d)", what, n, in,
                             out);
    return CNN_OK;
}

/* x (n, in), w (in, out), b (out) or NULL -> y (n, out). */
cnn_status cpu_dense_forward(cnn_ctx *ctx, int n, int in, int out, const float *restrict x,
                             const float *restrict w, const float *restrict b,
                             float *restrict y)
{
    CNN_TRY(check_dims("dense_forward", n, in, out));
    if (n == 0) return CNN_OK;
    cnn_cpu_sgemm(ctx, 0, 0, n, out, in, 1.0f, x, in, w, out, 0.0f, y, out);
    if (b) {
        for (int i = 0; i < n; ++i) {
            float *restrict yi = y + (size_t)i * out;
            for (int j = 0; j < out; ++j) yi[j] += b[j];
        }
    }
    return CNN_OK;
}

/* dy (n, out), w (in, out) -> dx (n, in) = dy w^T. */
cnn_status cpu_dense_backward_data(cnn_ctx *ctx, int n, int in, int out,
                                   const float *restrict dy, const float *restrict w,
                                   float *restrict dx)
{
    CNN_TRY(check_dims("dense_backward_data", n, in, out));
    if (n == 0) return CNN_OK;
    cnn_cpu_sgemm(ctx, 0, 1, n, in, out, 1.0f, dy, out, w, out, 0.0f, dx, in);
    return CNN_OK;
}

/* x (n, in), dy (n, out) -> dw (in, out) = x^T dy and db (out) or NULL = the
 * column sums of dy, both overwritten. */
cnn_status cpu_dense_backward_filter(cnn_ctx *ctx, int n, int in, int out,
                                     const float *restrict x, const float *restrict dy,
                                     float *restrict dw, float *restrict db)
{
    CNN_TRY(check_dims("dense_backward_filter", n, in, out));
    if (n == 0)
        memset(dw, 0, (size_t)in * out * sizeof(float));
    else
        cnn_cpu_sgemm(ctx, 1, 0, in, out, n, 1.0f, x, in, dy, out, 0.0f, dw, out);
    if (db) {
        for (int j0 = 0; j0 < out; j0 += DENSE_DB_BLOCK) {
            const int len = out - j0 < DENSE_DB_BLOCK ? out - j0 : DENSE_DB_BLOCK;
            double acc[DENSE_DB_BLOCK];
            for (int j = 0; j < len; ++j) acc[j] = 0.0;
            for (int i = 0; i < n; ++i) {
                const float *restrict row = dy + (size_t)i * out + j0;
                for (int j = 0; j < len; ++j) acc[j] += row[j];
            }
            for (int j = 0; j < len; ++j) db[j0 + j] = (float)acc[j];
        }
    }
    return CNN_OK;
}
