// dense.cu: fully connected layers for the cuda engine, on our own SGEMM.
//   forward          y (n, out) = b (broadcast) ; y += x (n, in) w (in, out)
//   backward data    dx (n, in) = dy (n, out) w^T
//   backward filter  dw (in, out) = x^T dy;  db = column sums of dy
#include "cuda_common.cuh"
#include "cuda_ops.h"

namespace {

__global__ void broadcast_rows_kernel(int n, int out, const float *__restrict__ b,
                                      float *__restrict__ y)
{
    CNN_GRID_LOOP(o, (size_t)n * out) y[o] = b[o % out];
}

} // namespace

cnn_status cuda_dense_forward(cnn_ctx *ctx, int n, int in, int out, const float *x,
                              const float *w, const float *b, float *y)
{
    if (n <= 0 || out <= 0) return CNN_OK;
    if (b) {
        broadcast_rows_kernel<<<cnn_blocks((size_t)n * out, CNN_THREADS), CNN_THREADS, 0,
                                cnn_stream(ctx)>>>(n, out, b, y);
        CNN_CUDA_LAUNCHED("dense bias");
    }
    return cnn_cuda_sgemm(ctx, 0, 0, n, out, in, 1.0f, x, in, w, out, b ? 1.0f : 0.0f, y, out);
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
