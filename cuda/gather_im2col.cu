// gather_im2col.cu: the start of a training step on resident data when the
// network's first layer is a convolution, for the cuda engine, in one
// kernel (gather_batch_im2col, cnn.h): the batch's labels (or targets)
// gathered as gather.cu gathers them, the Net's counters moved on for the
// step, and instead of the batch's images the column matrix of the first
// convolution over them, read straight from the resident images, into its
// workspace.
//
// Apart, the step runs gather_batch (gather.cu), which copies the batch's
// rows of the resident images into the Net's input x, then the
// convolution's im2col (conv2d.cu), which reads x back and writes the
// column matrix col (K, NP): row (ch*kh + ki)*kw + kj, column i*P + r*ow +
// s holds image i's x[ch, r*sh - pad_top + ki, s*sw - pad_left + kj], 0
// outside the image. Here image i is the resident row order[position + i]
// (a negative index: a zero image, as gather.cu's zero row), so x is
// neither written nor read back; the convolution's forward then starts from
// col (conv2d_forward_col, conv2d.cu), and its filter gradient reads col
// as it always does. The values are copies, so col holds the bits im2col
// would write.
//
// Threads: one per column q of col and input channel ch, writing the kh*kw
// rows of ch with im2col_kernel's im2col_column (conv2d_kernels.cuh) (consecutive threads, consecutive
// columns), then one per unit of the targets' rows (gather.cu's copy_unit
// order), over one grid-stride loop. Counters: cnn_step_position
// (cuda_common.cuh), with gather.cu's ticket (one of the two kernels runs
// per step).
#include "conv2d_kernels.cuh"
#include "cuda_ops.h"

namespace {

// T: the targets' unit (4 or 1 bytes); I: the index type of the loop
// (unsigned where every index fits 31 bits: GPU division is much cheaper in
// 32 bits; size_t otherwise). data: (rows, c, h, w) resident images;
// t_units per target row (0: no targets). OUT: col's precision
// (cnn_cuda_conv2d_col16: float, or 16 bits). KS: the kernel size
// im2col_column is compiled for (cnn_conv2d::im2col_size), 0: any.
template <typename I, typename T, int OUT = CNN_PRECISION_FLOAT32, int KS = 0>
__global__ void gather_im2col_kernel(cnn_conv_desc d, long long rows,
                                     const int32_t *__restrict__ order, int64_t *counters,
                                     unsigned int *ticket, const float *__restrict__ data,
                                     typename cnn_conv2d::col_elem<OUT>::type *__restrict__ col,
                                     I t_units,
                                     const T *__restrict__ src_t, T *__restrict__ dst_t)
{
    cnn_kernel_begin();
    const int32_t *idx = order + cnn_step_position(counters, ticket, rows);
    const int p = d.oh * d.ow, np = d.n * p;
    const size_t plane = (size_t)d.h * d.w, image = (size_t)d.c * plane;
    const I col_units = (I)d.c * (I)np;
    const I total = col_units + (I)d.n * t_units;
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (I)blockDim.x * gridDim.x) {
        if (e >= col_units) { // a unit of the targets, as gather.cu's copy_unit
            const I u = e - col_units, i = u / t_units, k = u - i * t_units;
            const int32_t r = idx[i];
            T val{};
            if (r >= 0) val = src_t[(size_t)r * t_units + k];
            dst_t[u] = val;
            continue;
        }
        const int ch = (int)(e / (I)np), q = (int)(e - (I)ch * (I)np);
        const int32_t src = idx[q / p];
        cnn_conv2d::im2col_column<OUT, KS>(
            d, src >= 0 ? data + (size_t)src * image + (size_t)ch * plane : nullptr, ch, q, col);
    }
}

template <typename I, typename T, int OUT, int KS>
void launch_size(cnn_ctx *ctx, const cnn_conv_desc *d, long rows, const int32_t *order,
                 int64_t *counters, const float *data, void *col, size_t t_row_bytes,
                 const void *src_t, void *dst_t)
{
    const size_t t_units = t_row_bytes / sizeof(T);
    const size_t total = (size_t)d->c * d->n * d->oh * d->ow + (size_t)d->n * t_units;
    gather_im2col_kernel<I, T, OUT, KS><<<cnn_blocks(total, CNN_THREADS), CNN_THREADS, 0,
                                          cnn_stream(ctx)>>>(
        *d, (long long)rows, order, counters, &cnn_meet(ctx)->tickets[CNN_TICKET_GATHER], data,
        (typename cnn_conv2d::col_elem<OUT>::type *)col, (I)t_units, (const T *)src_t,
        (T *)dst_t);
}

// the kernel compiled for d's kernel size where there is one
// (cnn_conv2d::im2col_size)
template <typename I, typename T, int OUT>
void launch_out(cnn_ctx *ctx, const cnn_conv_desc *d, long rows, const int32_t *order,
                int64_t *counters, const float *data, void *col, size_t t_row_bytes,
                const void *src_t, void *dst_t)
{
#define CNN_GATHER_ARGS ctx, d, rows, order, counters, data, col, t_row_bytes, src_t, dst_t
    const int ks = cnn_conv2d::im2col_size(*d);
    if (ks == 3) launch_size<I, T, OUT, 3>(CNN_GATHER_ARGS);
    else if (ks == 5) launch_size<I, T, OUT, 5>(CNN_GATHER_ARGS);
    else launch_size<I, T, OUT, 0>(CNN_GATHER_ARGS);
#undef CNN_GATHER_ARGS
}

template <typename I, typename T>
cnn_status launch(cnn_ctx *ctx, const cnn_conv_desc *d, long rows, const int32_t *order,
                  int64_t *counters, const float *data, void *col, size_t t_row_bytes,
                  const void *src_t, void *dst_t)
{
    const int out = cnn_cuda_conv2d_col16(ctx, d); // as conv2d.cu's forward reads it
#define CNN_GATHER_ARGS ctx, d, rows, order, counters, data, col, t_row_bytes, src_t, dst_t
    if (out == CNN_PRECISION_BF16) launch_out<I, T, CNN_PRECISION_BF16>(CNN_GATHER_ARGS);
    else if (out == CNN_PRECISION_FP16) launch_out<I, T, CNN_PRECISION_FP16>(CNN_GATHER_ARGS);
    else launch_out<I, T, CNN_PRECISION_FLOAT32>(CNN_GATHER_ARGS);
#undef CNN_GATHER_ARGS
    CNN_CUDA_LAUNCHED("gather_batch_im2col");
    return CNN_OK;
}

// The index type for `total` units (with room for the grid-stride step).
template <typename T>
cnn_status launch_sized(cnn_ctx *ctx, const cnn_conv_desc *d, long rows, const int32_t *order,
                        int64_t *counters, const float *data, void *col, size_t t_row_bytes,
                        const void *src_t, void *dst_t)
{
    const size_t total = (size_t)d->c * d->n * d->oh * d->ow + (size_t)d->n * (t_row_bytes / sizeof(T));
    const size_t step = (size_t)cnn_blocks(total, CNN_THREADS) * CNN_THREADS;
    if (total + step < ((size_t)1 << 31))
        return launch<unsigned, T>(ctx, d, rows, order, counters, data, col, t_row_bytes, src_t, dst_t);
    return launch<size_t, T>(ctx, d, rows, order, counters, data, col, t_row_bytes, src_t, dst_t);
}

} // namespace

// gather_batch (gather.cu) with the images' rows replaced by the column
// matrix of convolution d over them, into d's workspace ws (cnn.h); dst_x
// is not written.
cnn_status cuda_gather_batch_im2col(cnn_ctx *ctx, const int32_t *order, int64_t *counters,
                                    int count, long rows, size_t x_row_bytes, const void *src_x,
                                    void *dst_x, size_t t_row_bytes, const void *src_t,
                                    void *dst_t, const cnn_conv_desc *d, void *ws)
{
    const char *what = "gather_batch_im2col";
    (void)dst_x;
    if (count < 0) return cnn_set_error(CNN_ERR_VALUE, "%s: negative count %d", what, count);
    if (d->n != count || d->c < 1 || d->h < 1 || d->w < 1 || d->f < 1 || d->kh < 1 ||
        d->kw < 1 || d->sh < 1 || d->sw < 1 || d->oh < 1 || d->ow < 1)
        return cnn_set_error(CNN_ERR_VALUE,
                             "%s: bad convolution descriptor (n %d for %d rows, c %d, %dx%d, "
                             "kernel %dx%d, out %dx%d)",
                             what, d->n, count, d->c, d->h, d->w, d->kh, d->kw, d->oh, d->ow);
    if (x_row_bytes != (size_t)d->c * d->h * d->w * sizeof(float))
        return cnn_set_error(CNN_ERR_VALUE,
                             "%s: rows of %zu bytes are not the convolution's %dx%dx%d images",
                             what, x_row_bytes, d->c, d->h, d->w);
    const size_t np = (size_t)d->n * d->oh * d->ow;
    if (np > (size_t)INT32_MAX || (size_t)d->c * d->kh * d->kw > (size_t)INT32_MAX)
        return cnn_set_error(CNN_ERR_VALUE, "%s: batch too large for one GEMM", what);
    if (!src_t) t_row_bytes = 0;
    const float *data = (const float *)src_x;
    void *col = ws; // the start of the workspace, as conv2d.cu lays it out
    const uintptr_t align = (uintptr_t)src_t | (uintptr_t)dst_t;
    if (t_row_bytes % 4 == 0 && align % 4 == 0)
        return launch_sized<uint32_t>(ctx, d, rows, order, counters, data, col, t_row_bytes,
                                      src_t, dst_t);
    return launch_sized<uint8_t>(ctx, d, rows, order, counters, data, col, t_row_bytes, src_t,
                                 dst_t);
}
