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
// element of dpool feeds one window only: here each thread, one per element
// of the pool's OUTPUT (n, c, oh, ow), forms dpool[r, s] itself, the sum
// col2im forms (col2im_sum32, conv2d_kernels.cuh: the same terms in the same
// order), and writes the part of the pool's input it owns (its window, and
// the rows and columns after it up to the next window), applying the pool's
// backward as pool.cu does: 0 + v where the element is the window's argmax
// (max) or 0 + v / count (average, count the window's in-image elements),
// 0 where it is not, or where the ReLU before the pool (whose output is the
// pool's input) is not > 0, or outside every window. The same bits as the
// two kernels (and as the ReLU's backward after an average pool's), and
// dpool is never written: one launch and dpool's trip through memory fewer.
// (A first version ran one thread per element of the pool's INPUT: in a max
// window only the argmax's lane summed, and it was slower than the two
// kernels apart on an H100: BENCHMARKS.md.)
#include "conv2d_kernels.cuh"
#include "cuda_ops.h"
#include "pool_geom.cuh"

namespace {

// One thread per element o of the pool's output (n, c, g.oh, g.ow), which is
// the convolution's input: it forms that element's col2im sum once (as
// col2im32_kernel does, the lanes of a warp on neighbouring elements), then
// writes every element of the pool's input that it owns: the rows from its
// window's first (r sh - pad_top, at least 0; 0 for r = 0) up to the next
// window's first (h for the last r), the same for the columns, so that the
// owners partition the input (rows in the padding, in gaps between windows
// or past the last window are written 0 by the nearest owner before them).
// An owned element in the window gets the pool's backward of v: 0 + v where
// it is the argmax (max), 0 + v / count (average), in both cases 0 where the
// ReLU's output there is not > 0; 0 outside the window. Grid-stride, total
// <= INT32_MAX. d: the convolution, whose input (n, c, d.h = g.oh, d.w =
// g.ow) is the pool's output. MAX: max pooling (argmax), else average. UNIT:
// the convolution's strides are 1 (col2im32_kernel's UNIT).
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
    for (unsigned o = blockIdx.x * blockDim.x + threadIdx.x; o < total;
         o += blockDim.x * gridDim.x) {
        const unsigned q = o / out_plane; // the plane: image q / c, channel q % c
        const int mo = (int)(o - q * out_plane);
        const int r = mo / g.ow, s = mo - r * g.ow;
        const int image = (int)(q / (unsigned)d.c), ch = (int)(q - (unsigned)image * d.c);
        const float v = cnn_conv2d::col2im_sum32<UNIT>(d, col + (size_t)image * p, np, ch, r, s);
        const int top = r * g.sh - g.pad_top, left = s * g.sw - g.pad_left; // the window
        int win_r0, win_r1, win_c0, win_c1; // it clipped to the image
        window(r, g.sh, g.pad_top, g.ph, g.h, &win_r0, &win_r1);
        window(s, g.sw, g.pad_left, g.pw, g.w, &win_c0, &win_c1);
        const int rows0 = r == 0 ? 0 : min(max(top, 0), g.h);
        const int rows1 = r == g.oh - 1 ? g.h : min(max(top + g.sh, 0), g.h);
        const int cols0 = s == 0 ? 0 : min(max(left, 0), g.w);
        const int cols1 = s == g.ow - 1 ? g.w : min(max(left + g.sw, 0), g.w);
        float grad; // what an element of the window that passes gradient gets
        int mark = -1; // max: the argmax's index in the plane
        if (MAX) {
            grad = 0.0f + v;
            mark = argmax[o];
        } else { // as pool.cu's avg_pool_backward_kernel: over the clipped window's count
            grad = 0.0f + v / (float)((win_r1 - win_r0) * (win_c1 - win_c0));
        }
        const unsigned plane0 = q * in_plane;
        for (int i = rows0; i < rows1; ++i) {
            for (int j = cols0; j < cols1; ++j) {
                const int me = i * g.w + j;
                const unsigned e = plane0 + (unsigned)me;
                const bool in_window = i >= win_r0 && i < win_r1 && j >= win_c0 && j < win_c1;
                const bool passes = in_window && (!MAX || mark == me) &&
                                    (!relu_y || relu_y[e] > 0.0f);
                dx[e] = passes ? grad : 0.0f;
            }
        }
    }
}

template <bool MAX>
void launch(cnn_ctx *ctx, unsigned total, const cnn_conv_desc *d, const pool_geom &g,
            const float *col, const int32_t *argmax, const float *y, float *dx)
{
    const unsigned blocks = cnn_blocks(total, CNN_THREADS); // total: the pool's outputs
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
    const size_t outputs = (size_t)p->n * p->c * p->oh * p->ow; // the kernel's threads
    if (total == 0 || outputs == 0) return CNN_OK;
    const pool_geom g = geom_of(p);
    if (p->mode == CNN_POOL_MAX)
        launch<true>(ctx, (unsigned)outputs, d, g, (const float *)ws, argmax, y, dx);
    else
        launch<false>(ctx, (unsigned)outputs, d, g, (const float *)ws, nullptr, y, dx);
    CNN_CUDA_LAUNCHED(what);
    return CNN_OK;
}
