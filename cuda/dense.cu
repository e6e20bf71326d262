// dense.cu: fully connected layers for the cuda engine, on our own SGEMM.
//   forward          y (n, out) = x (n, in) w (in, out) + b (added by the GEMM as it stores y)
//                    dense_forward_relu: y = relu(x w + b), the ReLU in the same store
//                    (with a bias; see there)
//   backward data    dx (n, in) = dy (n, out) w^T
//   backward filter  dw (in, out) = x^T dy;  db = column sums of dy
//
// db is not the GEMM's row_sums column (cnn_sgemm_extra): that column is the
// sums of op(A)'s rows against a column of ones appended to a transposed B.
// For db, op(A)'s rows must be the units and its columns the batch, so
// op(A) = dy^T and the product dw^T (out, in) = dy^T x (which the GEMM
// could store into dw (in, out) transposed, cp = 1); but then op(B) = x,
// stored (n, in) = (k, columns), which is B untransposed, and the column of
// ones exists only for a transposed B. x is never stored (in, n). The
// other products with k = n (dw = x^T dy) give row sums of x, and the
// backward data's (k = out) per-sample sums. So db stays a pass of its own
// (cnn_cuda_column_sums), except where the launch that writes this dy can
// sum it too: the backward of an activation after the layer
// (activation.cu: activation_backward_bias) or the training head above it
// (dense_head.cu: db_below); the Net then passes db NULL here.
#include "cuda_common.cuh"
#include "cuda_ops.h"

namespace {

cnn_status forward(cnn_ctx *ctx, int n, int in, int out, const float *x, const float *w,
                   const float *b, float *y, bool relu)
{
    if (n <= 0 || out <= 0) return CNN_OK;
    // + b[column], then the ReLU, as the GEMM (or its split-K sum) stores y
    const cnn_sgemm_extra extra = {0, 0, 0, b, relu ? 1 : 0, 1, nullptr};
    return cnn_cuda_sgemm_ex(ctx, 0, 0, n, out, in, 1.0f, x, in, w, out, 0.0f, y, out, &extra);
}

} // namespace

cnn_status cuda_dense_forward(cnn_ctx *ctx, int n, int in, int out, const float *x,
                              const float *w, const float *b, float *y)
{
    return forward(ctx, n, in, out, x, w, b, y, false);
}

// Without a bias the ReLU stays a pass of its own: a product with no extra
// at all is split-K summed by gemm.cu's plain sum_slices, one with any extra
// (the ReLU alone too) by sum_slices_wide, in another order; so the ReLU in
// the GEMM would change the bits of dense_forward + ReLU there.
cnn_status cuda_dense_forward_relu(cnn_ctx *ctx, int n, int in, int out, const float *x,
                                   const float *w, const float *b, float *y)
{
    if (b) return forward(ctx, n, in, out, x, w, b, y, true);
    CNN_TRY(forward(ctx, n, in, out, x, w, nullptr, y, false));
    return cuda_activation_forward(ctx, CNN_ACT_RELU, n, out, y, y);
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
