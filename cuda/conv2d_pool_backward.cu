// conv2d_pool_backward.cu: a convolution's data gradient and the backward of
// the pooling layer before it (and of the ReLU before that, where there is
// one), in one kernel after the convolution's product (the cuda engine's
// conv2d_backward_data_pool, cnn.h).
//
// Apart, the step runs col2im (conv2d.cu), which writes the gradient of the
// pool's output, dpool, from the product dcol (K, NP); then the pool's
// backward (pool.cu), which reads dpool and the argmax and writes the
// gradient of the pool's input. Where the pool's windows do not overlap
// (pool no larger than the stride, pads >= 0: pool.cu's disjoint case) an
// input element lies in at most one window, so its gradient needs one
// element of dpool: here each thread, one per element of the pool's INPUT,
// finds its window's output (r, s), decides as the pool's backward does
// whether it receives gradient (max: it is the window's argmax; with the
// ReLU, whose output is the pool's input, that output > 0; average: always),
// and if so forms dpool[r, s] itself, the sum col2im forms (col2im_sum32,
// conv2d_kernels.cuh: the same terms in the same order), then applies the
// pool's arithmetic to it: 0 + v (max), 0 + v / count (average, count the
// window's in-image elements), 0 where it receives none. The same bits as
// the two kernels (and as the ReLU's backward after an average pool's), and
// dpool is never written: one launch and dpool's trip through memory fewer.
// In a max window only the argmax's thread sums (the warp's other lanes
// idle through its loop); in an average window every thread sums, the same
// addresses (one load for the warp's lanes that share them).
#include "conv2d_kernels.cuh"
#include "cuda_ops.h"

namespace {

// The pooling's geometry, by value to the kernel (as pool.cu's pool_geom).
struct pool_geom {
    int h, w, ph, pw, sh, sw, pad_top, pad_left, oh, ow;
};

// One thread per element e of the pool's input (n, c, g.h, g.w), grid-
// stride (total <= INT32_MAX: e and e + the stride fit 32 bits unsigned).
// d: the convolution, whose input (n, c, d.h = g.oh, d.w = g.ow) is the
// pool's output. MAX: max pooling (argmax), else average. UNIT: the
// convolution's strides are 1 (col2im32_kernel's UNIT).
template <bool MAX, bool UNIT>
__global__ void col2im_pool_backward_kernel(unsigned total, cnn_conv_desc d, pool_geom g,
                                            const float *__restrict__ col,
                                            const int32_t *__restrict__ argmax,
                                            const float *__restrict__ relu_y,
                                            float *__restrict__ dx)
{
    cnn_kernel_begin();
    const unsigned in_plane = (unsigned)g.h * g.w, out_plane = (unsigned)g.oh * g.ow;
    const int p = d.oh * d.ow, np = d.n * p;
    for (unsigned e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        const unsigned q = e / in_plane; // the plane: image q / c, channel q % c
        const int me = (int)(e - q * in_plane);
        const int i = me / g.w, j = me - (me / g.w) * g.w;
        const int ti = i + g.pad_top, tj = j + g.pad_left; // both >= 0
        const int r = ti / g.sh, s = tj / g.sw;            // the only window that may hold it
        float acc = 0.0f;
        if (r < g.oh && s < g.ow && ti - r * g.sh < g.ph && tj - s * g.sw < g.pw &&
            (!relu_y || relu_y[e] > 0.0f) &&
            (!MAX || argmax[q * out_plane + (unsigned)(r * g.ow + s)] == me)) {
            const int image = (int)(q / (unsigned)d.c), ch = (int)(q - (unsigned)image * d.c);
            const float v =
                cnn_conv2d::col2im_sum32<UNIT>(d, col + (size_t)image * p, np, ch, r, s);
            if (MAX) {
                acc += v;
            } else { // pool.cu's avg_pool_backward_kernel: the window clipped to the image
                const int top = r * g.sh - g.pad_top, left = s * g.sw - g.pad_left;
                const int r0 = max(top, 0), r1 = min(top + g.ph, g.h);
                const int c0 = max(left, 0), c1 = min(left + g.pw, g.w);
                acc += v / (float)((r1 - r0) * (c1 - c0));
            }
        }
        dx[e] = acc;
    }
}

template <bool MAX>
void launch(cnn_ctx *ctx, unsigned total, const cnn_conv_desc *d, const pool_geom &g,
            const float *col, const int32_t *argmax, const float *y, float *dx)
{
    const unsigned blocks = cnn_blocks(total, CNN_THREADS);
    cudaStream_t st = cnn_stream(ctx);
    if (d->sh == 1 && d->sw == 1)
        col2im_pool_backward_kernel<MAX, true><<<blocks, CNN_THREADS, 0, st>>>(total, *d, g, col,
                                                                               argmax, y, dx);
    else
        col2im_pool_backward_kernel<MAX, false><<<blocks, CNN_THREADS, 0, st>>>(total, *d, g, col,
                                                                                argmax, y, dx);
}

} // namespace

cnn_status cuda_conv2d_backward_data_pool(cnn_ctx *ctx, const cnn_conv_desc *d,
                                          const cnn_pool_desc *p, const float *dy,
                                          const float *w, const int32_t *argmax, const float *y,
                                          float *dx, void *ws)
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
    if (total == 0) return CNN_OK;
    const pool_geom g = {p->h, p->w, p->ph, p->pw, p->sh, p->sw, p->pad_top, p->pad_left,
                         p->oh, p->ow};
    if (p->mode == CNN_POOL_MAX)
        launch<true>(ctx, (unsigned)total, d, g, (const float *)ws, argmax, y, dx);
    else
        launch<false>(ctx, (unsigned)total, d, g, (const float *)ws, nullptr, y, dx);
    CNN_CUDA_LAUNCHED(what);
    return CNN_OK;
}
