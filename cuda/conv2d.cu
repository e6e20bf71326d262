// conv2d.cu: 2-D convolution for the cuda engine, by batched im2col + SGEMM.
//
// With K = c*kh*kw, P = oh*ow and NP = n*P, the column matrix col (K, NP)
// holds at row (ch*kh + ki)*kw + kj, column i*P + r*ow + s the input
// x[i, ch, r*sh - pad_top + ki, s*sw - pad_left + kj] (zero outside the
// image). Then, for the whole batch at once:
//   forward          t (f, NP) = W (f, K) col (K, NP);  y[i, f, p] = t[f, i*P + p] + b[f]
//   backward filter  t (f, NP) = dy rearranged;  dW (f, K) = t col^T;  db = row sums of t
//   backward data    dcol (K, NP) = W^T t;  dx by col2im
// The workspace is the layer's own and holds col (K, NP) and t (f, NP) for
// the largest batch. As cnn.h allows, the backward filter reuses the column
// matrix the forward left there, and the backward data reuses the t that
// the backward filter left (it overwrites col with dcol: it runs last).
// col2im computes each input element as a sum over the kernel positions that
// read it, so it needs no atomics and is deterministic.
//
// t is never formed by default: the GEMMs (either SGEMM kernel of gemm.cu)
// read dy and write y in their NCHW layout (n, f, P) themselves, the
// forward's adding the bias as it stores y, and db is a deterministic sum
// per channel of dy (on the tile kernel, the filter gradient's product with
// one more column, of ones: no pass of its own). So the forward writes y
// once instead of t and then y, and the backward skips dy's rearranging.
// conv2d_forward_relu (cnn.h) applies the ReLU in the pass that writes y:
// the GEMM's, or the bias scatter's. CNNCUDA_SGEMM=tile64 keeps the path
// through t described above (the engine before the fused layouts, kept to
// compare).
#include "conv2d_kernels.cuh"
#include "cuda_ops.h"

using namespace cnn_conv2d;

namespace {

size_t col_floats(const cnn_conv_desc *d)
{
    return (size_t)d->c * d->kh * d->kw * (size_t)d->n * d->oh * d->ow;
}

cnn_status check_desc(const char *what, const cnn_conv_desc *d)
{
    if (d->n < 0 || d->c < 1 || d->h < 1 || d->w < 1 || d->f < 1 || d->kh < 1 || d->kw < 1 ||
        d->sh < 1 || d->sw < 1 || d->oh < 1 || d->ow < 1)
        return cnn_set_error(CNN_ERR_VALUE, "%s: bad descriptor", what);
    size_t np = (size_t)d->n * d->oh * d->ow, k = (size_t)d->c * d->kh * d->kw;
    if (np > (size_t)INT32_MAX || k > (size_t)INT32_MAX)
        return cnn_set_error(CNN_ERR_VALUE, "%s: batch too large for one GEMM", what);
    return CNN_OK;
}

cnn_status gather_dy(cnn_ctx *ctx, const cnn_conv_desc *d, const float *dy, float *t)
{
    size_t p = (size_t)d->oh * d->ow, total = (size_t)d->n * d->f * p;
    gather_dy_kernel<<<cnn_blocks(total, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(d->n, d->f, p, dy, t);
    CNN_CUDA_LAUNCHED("conv2d gather dy");
    return CNN_OK;
}

// Whether this engine's GEMMs take the NCHW layouts and the bias
// themselves (every CNNCUDA_SGEMM setting but tile64): t is formed by all of
// a layer's passes or by none.
bool fused_layouts(cnn_ctx *ctx)
{
    return ((const cnn_cuda_impl *)ctx->impl)->sgemm_kernel != CNN_SGEMM_TILE64;
}

} // namespace

cnn_status cnn_cuda_im2col(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x, float *col)
{
    // x: the columns, y: the input channels (im2col_kernel)
    const dim3 grid(cnn_blocks((size_t)d->n * d->oh * d->ow, CNN_THREADS), (unsigned)min(d->c, 65535));
    im2col_kernel<<<grid, CNN_THREADS, 0, cnn_stream(ctx)>>>(*d, x, col);
    CNN_CUDA_LAUNCHED("conv2d im2col");
    return CNN_OK;
}

size_t cuda_conv2d_workspace(const cnn_conv_desc *d)
{
    if (d->n < 1 || d->c < 1 || d->kh < 1 || d->kw < 1 || d->oh < 1 || d->ow < 1) return 0;
    return (col_floats(d) + (size_t)d->f * d->n * d->oh * d->ow) * sizeof(float);
}

namespace {

// y = conv(x) + b, and then the ReLU when relu (conv2d_forward_relu); from
// the column matrix already in ws when col_ready (conv2d_forward_col: the
// kernel before it wrote it, gather_im2col.cu)
cnn_status forward(cnn_ctx *ctx, const char *what, const cnn_conv_desc *d, const float *x,
                   const float *w, const float *b, float *y, void *ws, bool relu, bool col_ready)
{
    CNN_TRY(check_desc(what, d));
    if (d->n == 0) return CNN_OK;
    float *col = (float *)ws, *t = col + col_floats(d);
    const int k = d->c * d->kh * d->kw, np = d->n * d->oh * d->ow;
    const size_t p = (size_t)d->oh * d->ow;
    if (!col_ready) CNN_TRY(cnn_cuda_im2col(ctx, d, x, col));
    if (fused_layouts(ctx)) { // y (n, f, P) written by the GEMM, with the bias and the ReLU
        const cnn_sgemm_extra extra = {0, 0, (int)p, b, relu ? 1 : 0, 0, nullptr};
        return cnn_cuda_sgemm_ex(ctx, 0, 0, d->f, np, k, 1.0f, w, k, col, np, 0.0f, y, np, &extra);
    }
    CNN_TRY(cnn_cuda_sgemm(ctx, 0, 0, d->f, np, k, 1.0f, w, k, col, np, 0.0f, t, np));
    size_t total = (size_t)d->n * d->f * p;
    const unsigned blocks = cnn_blocks(total, CNN_THREADS);
    if (relu)
        scatter_bias_kernel<true><<<blocks, CNN_THREADS, 0, cnn_stream(ctx)>>>(d->n, d->f, p, t, b, y);
    else
        scatter_bias_kernel<false><<<blocks, CNN_THREADS, 0, cnn_stream(ctx)>>>(d->n, d->f, p, t, b, y);
    CNN_CUDA_LAUNCHED("conv2d bias");
    return CNN_OK;
}

} // namespace

cnn_status cuda_conv2d_forward(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x,
                               const float *w, const float *b, float *y, void *ws)
{
    return forward(ctx, "conv2d_forward", d, x, w, b, y, ws, false, false);
}

cnn_status cuda_conv2d_forward_relu(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x,
                                    const float *w, const float *b, float *y, void *ws)
{
    return forward(ctx, "conv2d_forward_relu", d, x, w, b, y, ws, true, false);
}

// The forward from the column matrix that gather_batch_im2col left in ws
// (x is not read: the gather leaves it unwritten).
cnn_status cuda_conv2d_forward_col(cnn_ctx *ctx, const cnn_conv_desc *d, int relu,
                                   const float *x, const float *w, const float *b, float *y,
                                   void *ws)
{
    return forward(ctx, "conv2d_forward_col", d, x, w, b, y, ws, relu != 0, true);
}

cnn_status cuda_conv2d_backward_filter(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x,
                                       const float *dy, float *dw, float *db, void *ws)
{
    CNN_TRY(check_desc("conv2d_backward_filter", d));
    const int k = d->c * d->kh * d->kw, np = d->n * d->oh * d->ow;
    if (d->n == 0) {
        CNN_CUDA_TRY(cudaMemsetAsync(dw, 0, (size_t)d->f * k * sizeof(float), cnn_stream(ctx)), "conv2d dw");
        if (db) CNN_CUDA_TRY(cudaMemsetAsync(db, 0, (size_t)d->f * sizeof(float), cnn_stream(ctx)), "conv2d db");
        return CNN_OK;
    }
    (void)x; /* its column matrix is still in ws from the forward */
    float *col = (float *)ws, *t = col + col_floats(d);
    if (fused_layouts(ctx)) {
        const int p = d->oh * d->ow;
        // A = dy (n, f, P); on the tile kernel, db as the product's column of ones
        const bool sums_in_gemm = db && !cnn_cuda_sgemm_wide_fits(ctx, d->f, k, np);
        const cnn_sgemm_extra extra = {p, 0, 0, nullptr, 0, 0, sums_in_gemm ? db : nullptr};
        CNN_TRY(cnn_cuda_sgemm_ex(ctx, 0, 1, d->f, k, np, 1.0f, dy, np, col, np, 0.0f, dw, k, &extra));
        if (db && !sums_in_gemm) CNN_TRY(cnn_cuda_channel_sums(ctx, d->n, d->f, p, dy, db));
        return CNN_OK;
    }
    CNN_TRY(gather_dy(ctx, d, dy, t));
    CNN_TRY(cnn_cuda_sgemm(ctx, 0, 1, d->f, k, np, 1.0f, t, np, col, np, 0.0f, dw, k));
    if (db) CNN_TRY(cnn_cuda_row_sums(ctx, d->f, np, t, db));
    return CNN_OK;
}

// The filter gradient from x itself (the column matrix made here, not left
// by a forward of this engine): the cudnn engine's own deterministic
// candidate. Leaves col and t in ws, as the backward filter above.
cnn_status cuda_conv2d_backward_filter_from_x(cnn_ctx *ctx, const cnn_conv_desc *d,
                                              const float *x, const float *dy, float *dw,
                                              float *db, void *ws)
{
    CNN_TRY(check_desc("conv2d_backward_filter", d));
    if (d->n > 0) CNN_TRY(cnn_cuda_im2col(ctx, d, x, (float *)ws));
    return cuda_conv2d_backward_filter(ctx, d, x, dy, dw, db, ws);
}

// The backward data's product: dcol (K, NP) = W^T dy into the start of ws
// (where the column matrix was). Also the first half of
// conv2d_backward_data_pool (conv2d_pool_backward.cu).
cnn_status cnn_cuda_conv2d_dcol(cnn_ctx *ctx, const char *what, const cnn_conv_desc *d,
                                const float *dy, const float *w, void *ws)
{
    CNN_TRY(check_desc(what, d));
    if (d->n == 0) return CNN_OK;
    float *col = (float *)ws, *t = col + col_floats(d);
    const int k = d->c * d->kh * d->kw, np = d->n * d->oh * d->ow;
    if (fused_layouts(ctx)) { // B = dy (n, f, P) read in place
        const cnn_sgemm_extra extra = {0, d->oh * d->ow, 0, nullptr, 0, 0, nullptr};
        return cnn_cuda_sgemm_ex(ctx, 1, 0, k, np, d->f, 1.0f, w, k, dy, np, 0.0f, col, np, &extra);
    }
    // dy rearranged into t by the backward filter
    return cnn_cuda_sgemm(ctx, 1, 0, k, np, d->f, 1.0f, w, k, t, np, 0.0f, col, np);
}

cnn_status cuda_conv2d_backward_data(cnn_ctx *ctx, const cnn_conv_desc *d, const float *dy,
                                     const float *w, float *dx, void *ws)
{
    CNN_TRY(cnn_cuda_conv2d_dcol(ctx, "conv2d_backward_data", d, dy, w, ws));
    if (d->n == 0) return CNN_OK;
    const float *col = (const float *)ws;
    size_t total = (size_t)d->n * d->c * d->h * d->w;
    const unsigned blocks = cnn_blocks(total, CNN_THREADS);
    // 32-bit indices where every index of dx and of a column of col fits,
    // with room for the grid-stride step
    const bool small = total + (size_t)blocks * CNN_THREADS < ((size_t)1 << 31);
    const bool unit = d->sh == 1 && d->sw == 1;
    if (small && unit)
        col2im32_kernel<true><<<blocks, CNN_THREADS, 0, cnn_stream(ctx)>>>(*d, col, dx);
    else if (small)
        col2im32_kernel<false><<<blocks, CNN_THREADS, 0, cnn_stream(ctx)>>>(*d, col, dx);
    else
        col2im_kernel<<<blocks, CNN_THREADS, 0, cnn_stream(ctx)>>>(*d, col, dx);
    CNN_CUDA_LAUNCHED("conv2d col2im");
    return CNN_OK;
}
