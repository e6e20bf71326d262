// dense.cu: fully connected layers for the cuda engine, on our own SGEMM.
//   forward          y (n, out) = x (n, in) w (in, out) + b (added by the GEMM as it stores y)
//   backward data    dx (n, in) = dy (n, out) w^T
//   backward filter  dw (in, out) = x^T dy;  db = column sums of dy
#include "cuda_common.cuh"
#include "cuda_ops.h"

cnn_status cuda_dense_forward(cnn_ctx *ctx, int n, int in, int out, const float *x,
                              const float *w, const float *b, float *y)
{
    if (n <= 0 || out <= 0) return CNN_OK;
    const cnn_sgemm_extra extra = {0, 0, 0, b, 0, 1, nullptr}; // + b[column], as the GEMM stores y
    return cnn_cuda_sgemm_ex(ctx, 0, 0, n, out, in, 1.0f, x, in, w, out, 0.0f, y, out, &extra);
}

cnn_status cuda_dense_backward_data(cnn_ctx *ctx, int n, int in, int out, const float *dy,
                                    const float *w, float *dx)
{
    return cnn_cuda_sgemm(ctx, 0, 1, n, in, out, 1.0f, dy, out, w, out, 0.0f, dx, in);
}

cnn_status cuda_dense_backward_filter(cnn_ctx *ctx, int n, int in, int out, const float *x,
                                      const float *dy, float *dw, float *db)
{
    CNN_TRY(cnn_cuda_sgemm(ctx, 1, 0, in, out, n, 1.0f, x, in, dy, out, 0.0f, dw, out));
    if (db) CNN_TRY(cnn_cuda_column_sums(ctx, n, out, dy, db));
    return CNN_OK;
}
