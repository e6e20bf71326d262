// conv2d_pool_backward.cu: a convolution's data gradient and the backward of
// the pooling layer before it (and of the ReLU before that, where there is
// one), in one kernel after the convolution's product (the cuda engine's
// conv2d_backward_data_pool, cnn.h).
//
// Apart, the step runs col2im (conv2d.cu), which writes the gradient of the
// pool's output, dpool, from the product dcol (K, NP); then the pool's
// backward (pool.cu), which reads dpool and the argmax and writes the
// gradient of the pool's input. Where the pool's windows do not overlap
// (pool no larger than the stride, pads >= 0: pool.cu's disjoint case) each
// element of dpool feeds one window only, so both run as one kernel
// (conv2d_pool_backward_kernels.cuh) that forms each dpool[r, s] itself, the
// sum col2im forms (col2im_sum32, conv2d_kernels.cuh: the same terms in the
// same order), and writes the gradient of the pool's input, applying the
// pool's backward as pool.cu does: 0 + v where the element is the window's
// argmax (max) or 0 + v / count (average, count the window's in-image
// elements), 0 where it is not, or where the ReLU before the pool (whose
// output is the pool's input) is not > 0 (for a max pool tested on the
// pool's output, which holds the ReLU's output at the argmax), or outside
// every window. The same bits as the two kernels (and as the ReLU's
// backward after an average pool's), and dpool is never written: one launch
// and dpool's trip through memory fewer. Where a plane's share of dcol fits
// shared memory (the seed CNNs' at any batch), whole planes a block
// (col2im_pool_backward_planes: dcol read coalesced into shared memory);
// else a thread a pool output
// (col2im_pool_backward_kernel).
// H100, seed CIFAR-10 CNN: BENCHMARKS.md.
// (A first version ran one thread per element of the pool's INPUT: in a max
// window only the argmax's lane summed, and it was slower than the two
// kernels apart on an H100.)
#include "conv2d_pool_backward_kernels.cuh"
#include "cuda_ops.h"

using namespace cnn_pool_col;

namespace {

template <bool MAX>
void launch(cnn_ctx *ctx, unsigned total, const cnn_conv_desc *d, const pool_geom &g,
            const float *col, const int32_t *argmax, const float *y, const float *pool_y,
            float *dx)
{
    cudaStream_t st = cnn_stream(ctx);
    const bool unit = d->sh == 1 && d->sw == 1;
    // Planes a block for col2im_pool_backward_planes; 0 where no plane fits
    // its shared memory: then a thread a pool output. The plane kernel
    // wherever it fits: since its phases were merged it pays at batch 32
    // too (H200, seed CIFAR-10 CNN, 2026-11-28: conv2's 9.0 -> 6.0 us,
    // conv3's 9.6 -> 8.2; the epoch 0.212 -> 0.209 s, LeNet-5's 0.173 ->
    // 0.171). Before the merge it had paid from 16 blocks an SM of a
    // thread a pool output only, batch 512 (BENCHMARKS.md).
    const int pb = plane_group_of(*d, g, ((const cnn_cuda_impl *)ctx->impl)->sm_count);
    if (pb > 0) {
        const unsigned blocks = (unsigned)((long long)d->n * d->c / pb);
        const size_t smem = plane_group_floats(*d, g, pb) * sizeof(float);
        const bool aligned = plane_copies_aligned(*d, col);
        if (unit && d->kh == 3 && d->kw == 3) // the sums unrolled
            col2im_pool_backward_planes<MAX, true, 3, 3><<<blocks, CNN_THREADS, smem, st>>>(
                *d, g, pb, aligned, col, argmax, y, pool_y, dx);
        else if (unit)
            col2im_pool_backward_planes<MAX, true><<<blocks, CNN_THREADS, smem, st>>>(
                *d, g, pb, aligned, col, argmax, y, pool_y, dx);
        else
            col2im_pool_backward_planes<MAX, false><<<blocks, CNN_THREADS, smem, st>>>(
                *d, g, pb, aligned, col, argmax, y, pool_y, dx);
        return;
    }
    const unsigned blocks = cnn_blocks(total, CNN_THREADS); // total: the pool's outputs
    if (unit)
        col2im_pool_backward_kernel<MAX, true><<<blocks, CNN_THREADS, 0, st>>>(
            total, *d, g, col, argmax, y, pool_y, dx);
    else
        col2im_pool_backward_kernel<MAX, false><<<blocks, CNN_THREADS, 0, st>>>(
            total, *d, g, col, argmax, y, pool_y, dx);
}

} // namespace

cnn_status cuda_conv2d_backward_data_pool(cnn_ctx *ctx, const cnn_conv_desc *d,
                                          const cnn_pool_desc *p, const float *dy,
                                          const float *w, const int32_t *argmax, const float *y,
                                          const float *pool_y, float *dx, void *ws)
{
    const char *what = "conv2d_backward_data_pool";
    CNN_TRY(cnn_cuda_check_pool_desc(what, p));
    if (p->n != d->n || p->c != d->c || p->oh != d->h || p->ow != d->w)
        return cnn_set_error(CNN_ERR_VALUE,
                             "%s: the pool's output (n %d, c %d, %dx%d) is not the "
                             "convolution's input (n %d, c %d, %dx%d)",
                             what, p->n, p->c, p->oh, p->ow, d->n, d->c, d->h, d->w);
    if (p->ph > p->sh || p->pw > p->sw || p->pad_top < 0 || p->pad_left < 0)
        return cnn_set_error(CNN_ERR_VALUE,
                             "%s: the pool's windows overlap or start outside the image (pool "
                             "%dx%d, stride %dx%d, pads %d, %d)",
                             what, p->ph, p->pw, p->sh, p->sw, p->pad_top, p->pad_left);
    if (p->mode == CNN_POOL_MAX && !argmax)
        return cnn_set_error(CNN_ERR_VALUE, "%s: max pooling needs an argmax buffer", what);
    const size_t total = (size_t)p->n * p->c * p->h * p->w;
    if (total > (size_t)INT32_MAX)
        return cnn_set_error(CNN_ERR_VALUE, "%s: %zu input elements of the pool, more than %d",
                             what, total, INT32_MAX);
    CNN_TRY(cnn_cuda_conv2d_dcol(ctx, what, d, dy, w, ws)); // dcol at the start of ws
    const size_t outputs = (size_t)p->n * p->c * p->oh * p->ow; // the kernel's threads
    if (total == 0 || outputs == 0) return CNN_OK;
    const pool_geom g = geom_of(p);
    // a max pool's ReLU test on its output where given: the ReLU's output at
    // the argmax is the pool's output (H100, batch 512, ncu: into pool 1
    // 116.7 -> 104.6 us, into pool 2 39.8 -> 32.2; BENCHMARKS.md)
    if (p->mode == CNN_POOL_MAX)
        launch<true>(ctx, (unsigned)outputs, d, g, (const float *)ws, argmax, y,
                     y ? pool_y : nullptr, dx);
    else
        launch<false>(ctx, (unsigned)outputs, d, g, (const float *)ws, nullptr, y, nullptr, dx);
    CNN_CUDA_LAUNCHED(what);
    return CNN_OK;
}
