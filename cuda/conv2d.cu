// conv2d.cu: 2-D convolution for the cuda engine, by batched im2col + SGEMM.
//
// With K = c*kh*kw, P = oh*ow and NP = n*P, the column matrix col (K, NP)
// holds at row (ch*kh + ki)*kw + kj, column i*P + r*ow + s the input
// x[i, ch, r*sh - pad_top + ki, s*sw - pad_left + kj] (zero outside the
// image). Then, for the whole batch at once, with y and dy in their NCHW
// layout (n, f, P) read and written by the GEMMs themselves (gemm.cu's
// fused layouts):
//   forward          y = W (f, K) col (K, NP) + b, the bias (and the ReLU of
//                    conv2d_forward_relu) added as the GEMM stores y
//   backward filter  dW (f, K) = dy col^T; db the per-channel sums of dy (on
//                    the tile kernel, narrow products included, the
//                    product's column of ones: no pass of its own; on the
//                    wide kernel outside TF32, a row of ones after col's K
//                    rows, which the workspace has room for)
//   backward data    dcol (K, NP) = W^T dy;  dx by col2im
// The workspace is the layer's own and holds col for the largest batch, and
// one row more (the row of ones). As
// cnn.h allows, the backward filter reuses the column matrix the forward
// left there, and the backward data overwrites it with dcol (it runs last).
// col2im computes each input element as a sum over the kernel positions that
// read it, so it needs no atomics and is deterministic.
// In the 16-bit precisions ("bf16", "fp16"), where both products that read
// col (the forward and the filter gradient) run on the wide SGEMM's 16-bit
// instances, col is stored in those 16 bits (cnn_cuda_conv2d_col16): im2col
// (or gather_im2col.cu) rounds each value as the SGEMM would, so the
// products see the same operands and give the same sums, from half the
// bytes, copied 16 bytes at a time. (Until 2026-11-25
// the GEMMs went through a rearranged copy t (f, NP) of y and dy; dev/cuda's
// conv2d stages keep that path to compare.)
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

} // namespace

int cnn_cuda_conv2d_col16(cnn_ctx *ctx, const cnn_conv_desc *d)
{
    const int prec = cnn_cuda_sgemm_precision(ctx);
    if (prec != CNN_PRECISION_BF16 && prec != CNN_PRECISION_FP16) return CNN_PRECISION_FLOAT32;
    const long long k = (long long)d->c * d->kh * d->kw, np = (long long)d->n * d->oh * d->ow;
    // its rows 16-byte aligned (np a multiple of 8); the forward and the
    // filter gradient (with its bias gradient's row sums or without) on the
    // 16-bit wide kernel
    if (np < 1 || np % 8 != 0 || np > INT32_MAX || k > INT32_MAX) return CNN_PRECISION_FLOAT32;
    const bool fits = cnn_cuda_sgemm_b16_fits(ctx, 0, d->f, (int)np, (int)k, 0) &&
                      cnn_cuda_sgemm_b16_fits(ctx, 1, d->f, (int)k, (int)np, 0) &&
                      cnn_cuda_sgemm_b16_fits(ctx, 1, d->f, (int)k, (int)np, 1);
    return fits ? prec : CNN_PRECISION_FLOAT32;
}

namespace {

// col (K, NP) in the precision `out` (cnn_cuda_conv2d_col16) from x
template <int OUT>
void launch_im2col(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x, void *col)
{
    // x: the columns, y: the input channels (im2col_kernel)
    const dim3 grid(cnn_blocks((size_t)d->n * d->oh * d->ow, CNN_THREADS), (unsigned)min(d->c, 65535));
    typedef typename col_elem<OUT>::type elem;
    const int ks = im2col_size(*d);
    cudaStream_t st = cnn_stream(ctx);
    if (ks == 3) im2col_kernel<OUT, 3><<<grid, CNN_THREADS, 0, st>>>(*d, x, (elem *)col);
    else if (ks == 5) im2col_kernel<OUT, 5><<<grid, CNN_THREADS, 0, st>>>(*d, x, (elem *)col);
    else im2col_kernel<OUT><<<grid, CNN_THREADS, 0, st>>>(*d, x, (elem *)col);
}

cnn_status im2col(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x, void *col, int out)
{
    if (out == CNN_PRECISION_BF16) launch_im2col<CNN_PRECISION_BF16>(ctx, d, x, col);
    else if (out == CNN_PRECISION_FP16) launch_im2col<CNN_PRECISION_FP16>(ctx, d, x, col);
    else launch_im2col<CNN_PRECISION_FLOAT32>(ctx, d, x, col);
    CNN_CUDA_LAUNCHED("conv2d im2col");
    return CNN_OK;
}

} // namespace

cnn_status cnn_cuda_im2col(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x, float *col)
{
    return im2col(ctx, d, x, col, CNN_PRECISION_FLOAT32);
}

size_t cuda_conv2d_workspace(const cnn_conv_desc *d)
{
    if (d->n < 1 || d->c < 1 || d->kh < 1 || d->kw < 1 || d->oh < 1 || d->ow < 1) return 0;
    return (col_floats(d) + (size_t)d->n * d->oh * d->ow) * sizeof(float); // + the row of ones
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
    const int k = d->c * d->kh * d->kw, np = d->n * d->oh * d->ow;
    const int p = d->oh * d->ow;
    const int out = cnn_cuda_conv2d_col16(ctx, d); // gather_im2col.cu asks the same
    if (!col_ready) CNN_TRY(im2col(ctx, d, x, ws, out));
    // y (n, f, P) written by the GEMM, with the bias and the ReLU
    const cnn_sgemm_extra extra = {0, 0, p, b, relu ? 1 : 0, 0, nullptr};
    if (out != CNN_PRECISION_FLOAT32)
        return cnn_cuda_sgemm_b16(ctx, 0, d->f, np, k, 1.0f, w, k, (const uint16_t *)ws, np,
                                  0.0f, y, np, &extra);
    return cnn_cuda_sgemm_ex(ctx, 0, 0, d->f, np, k, 1.0f, w, k, (const float *)ws, np, 0.0f, y,
                             np, &extra);
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
    const int p = d->oh * d->ow;
    const int out = cnn_cuda_conv2d_col16(ctx, d); // as the forward stored it
    // A = dy (n, f, P); db as the product's column of ones where the SGEMM
    // takes it (conv1's at batch 512, its 27 columns a narrow product: H100,
    // ncu, the channel sums' 46 us a step gone, the product 76 -> 81 us;
    // the wide products too, outside TF32, where the column fits their
    // padding)
    const int sums = db ? cnn_cuda_sgemm_row_sums(ctx, d->f, k, np) : CNN_ROW_SUMS_NONE;
    if (sums == CNN_ROW_SUMS_READ_B) {
        // the row of ones after col's K rows (the workspace has room for it)
        const unsigned blocks = cnn_blocks(np, CNN_THREADS);
        cudaStream_t st = cnn_stream(ctx);
        if (out == CNN_PRECISION_BF16)
            ones_row_kernel<CNN_PRECISION_BF16><<<blocks, CNN_THREADS, 0, st>>>(
                np, (unsigned short *)ws + (size_t)k * np);
        else if (out == CNN_PRECISION_FP16)
            ones_row_kernel<CNN_PRECISION_FP16><<<blocks, CNN_THREADS, 0, st>>>(
                np, (unsigned short *)ws + (size_t)k * np);
        else
            ones_row_kernel<<<blocks, CNN_THREADS, 0, st>>>(np, (float *)ws + (size_t)k * np);
        CNN_CUDA_LAUNCHED("conv2d bias gradient's row of ones");
    }
    const cnn_sgemm_extra extra = {p, 0, 0, nullptr, 0, 0,
                                   sums != CNN_ROW_SUMS_NONE ? db : nullptr};
    if (out != CNN_PRECISION_FLOAT32)
        CNN_TRY(cnn_cuda_sgemm_b16(ctx, 1, d->f, k, np, 1.0f, dy, np, (const uint16_t *)ws, np,
                                   0.0f, dw, k, &extra));
    else
        CNN_TRY(cnn_cuda_sgemm_ex(ctx, 0, 1, d->f, k, np, 1.0f, dy, np, (const float *)ws, np,
                                  0.0f, dw, k, &extra));
    if (db && sums == CNN_ROW_SUMS_NONE) CNN_TRY(cnn_cuda_channel_sums(ctx, d->n, d->f, p, dy, db));
    return CNN_OK;
}

// The filter gradient from x itself (the column matrix made here, not left
// by a forward of this engine): the cudnn engine's own deterministic
// candidate. Leaves col in ws, as the backward filter above.
cnn_status cuda_conv2d_backward_filter_from_x(cnn_ctx *ctx, const cnn_conv_desc *d,
                                              const float *x, const float *dy, float *dw,
                                              float *db, void *ws)
{
    CNN_TRY(check_desc("conv2d_backward_filter", d));
    if (d->n > 0) CNN_TRY(im2col(ctx, d, x, ws, cnn_cuda_conv2d_col16(ctx, d)));
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
    float *col = (float *)ws;
    const int k = d->c * d->kh * d->kw, np = d->n * d->oh * d->ow;
    // B = dy (n, f, P) read in place
    const cnn_sgemm_extra extra = {0, d->oh * d->ow, 0, nullptr, 0, 0, nullptr};
    return cnn_cuda_sgemm_ex(ctx, 1, 0, k, np, d->f, 1.0f, w, k, dy, np, 0.0f, col, np, &extra);
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
