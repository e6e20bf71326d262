// pool_im2col_kernels.cuh: a pooling layer's forward and the column matrix
// of the convolution after it, in one kernel, and its host entry
// cuda_pool_forward_im2col. Once the cuda engine's pool_forward_im2col
// (CNNCUDA_FUSE_POOL_IM2COL=1), retired from the engine (off by default and
// 1-4% slower on an H100, BENCHMARKS.md); kept here for the stage program
// pool_forward_im2col.cu (its stage 2), which includes it (one translation
// unit only: the host entry is defined here), and for the host emulation
// dev/emu/run_pool_im2col.sh.
//
// Apart, the step runs the pool's forward (pool.cu), which writes the pool's
// output y, then the convolution's im2col (conv2d.cu), which reads y back
// and writes the column matrix col (K, NP) into the convolution's
// workspace: row (ch*kh + ki)*kw + kj, column i*P + r*ow + s holds
// y[i, ch, r*sh + ki, s*sw + kj]. Where the convolution reads only inside
// its input (no padding: pads 0 and the last window inside the image, as
// 'valid' convolutions are) every element of col is one element of y, and
// every element of y lands in at most kh*kw places of col. Here each
// thread, one per element of the pool's output, forms that element as
// pool.cu does (max_window, avg_window: the same reads in the same order,
// so the same bits), writes it and its argmax as pool.cu does, and then
// writes it to each place of col that reads it; y is not read back and
// im2col is not launched. Consecutive threads hold neighbouring columns
// of y, so for each (ki, kj) a warp writes neighbouring columns of col.
// The convolution's forward then starts from col (conv2d_forward_col,
// conv2d.cu).
#include "cuda_ops.h"
#include "pool_geom.cuh"

extern "C" cnn_status cuda_pool_forward_im2col(cnn_ctx *ctx, const cnn_pool_desc *p,
                                               const cnn_conv_desc *d, const float *x, float *y,
                                               int32_t *argmax, void *ws);

namespace {

// One thread per element o of the pool's output (n, c, g.oh, g.ow) = the
// convolution's input (n, d.c, d.h, d.w): the pool's forward of o into y
// (and argmax: MAX), then o's value into col at every (ki, kj, r', s') with
// r'*sh + ki = r and s'*sw + kj = s (0 <= r' < d.oh, 0 <= s' < d.ow).
// Grid-stride; total < 2^31 and d's n*P fits an int (the host checks).
template <bool MAX>
__global__ void pool_forward_im2col_kernel(unsigned total, pool_geom g, cnn_conv_desc d,
                                           const float *__restrict__ x, float *__restrict__ y,
                                           int32_t *__restrict__ argmax, float *__restrict__ col)
{
    cnn_kernel_begin();
    const unsigned out_plane = (unsigned)g.oh * g.ow, in_plane = (unsigned)g.h * g.w;
    const int p = d.oh * d.ow, np = d.n * p;
    for (unsigned o = blockIdx.x * blockDim.x + threadIdx.x; o < total;
         o += blockDim.x * gridDim.x) {
        const unsigned q = o / out_plane; // the plane: image q / c, channel q % c
        const int mo = (int)(o - q * out_plane);
        const int r = mo / g.ow, s = mo - r * g.ow;
        const float *xq = x + (size_t)q * in_plane;
        float v;
        if (MAX) {
            int32_t at;
            v = max_window(xq, g, r, s, &at);
            argmax[o] = at;
        } else {
            v = avg_window(xq, g, r, s);
        }
        y[o] = v;
        const int image = (int)(q / (unsigned)d.c), ch = (int)(q - (unsigned)image * d.c);
        float *base = col + (size_t)ch * d.kh * d.kw * np + (size_t)image * p;
        for (int ki = 0; ki < d.kh; ++ki) {
            const int rr = r - ki; // = r' * sh
            if (rr < 0) break;     // and for every later ki
            if (rr % d.sh) continue;
            const int r2 = rr / d.sh;
            if (r2 >= d.oh) continue;
            for (int kj = 0; kj < d.kw; ++kj) {
                const int cc = s - kj; // = s' * sw
                if (cc < 0) break;
                if (cc % d.sw) continue;
                const int s2 = cc / d.sw;
                if (s2 >= d.ow) continue;
                base[(size_t)(ki * d.kw + kj) * np + r2 * d.ow + s2] = v;
            }
        }
    }
}

} // namespace

cnn_status cuda_pool_forward_im2col(cnn_ctx *ctx, const cnn_pool_desc *p, const cnn_conv_desc *d,
                                    const float *x, float *y, int32_t *argmax, void *ws)
{
    const char *what = "pool_forward_im2col";
    CNN_TRY(cnn_cuda_check_pool_desc(what, p));
    if (p->mode == CNN_POOL_MAX && !argmax)
        return cnn_set_error(CNN_ERR_VALUE, "%s: max pooling needs an argmax buffer", what);
    if (d->n != p->n || d->c != p->c || d->h != p->oh || d->w != p->ow)
        return cnn_set_error(CNN_ERR_VALUE,
                             "%s: the convolution's input (n %d, c %d, %dx%d) is not the pool's "
                             "output (n %d, c %d, %dx%d)",
                             what, d->n, d->c, d->h, d->w, p->n, p->c, p->oh, p->ow);
    if (d->f < 1 || d->kh < 1 || d->kw < 1 || d->sh < 1 || d->sw < 1 || d->oh < 1 || d->ow < 1)
        return cnn_set_error(CNN_ERR_VALUE, "%s: bad convolution descriptor", what);
    if (!cnn_conv_reads_inside(d))
        return cnn_set_error(CNN_ERR_VALUE,
                             "%s: the convolution must read inside its input (pads 0, last "
                             "window inside), got pads %d, %d for a %dx%d kernel over %dx%d",
                             what, d->pad_top, d->pad_left, d->kh, d->kw, d->h, d->w);
    const size_t total = (size_t)p->n * p->c * p->oh * p->ow;
    const size_t in = (size_t)p->n * p->c * p->h * p->w;
    const size_t np = (size_t)d->n * d->oh * d->ow;
    if (total >= 0x7fffffffu || in >= 0x7fffffffu || np > (size_t)INT32_MAX)
        return cnn_set_error(CNN_ERR_VALUE, "%s: batch too large for 32-bit indices", what);
    if (total == 0) return CNN_OK;
    const unsigned blocks = cnn_blocks(total, CNN_THREADS);
    const pool_geom g = geom_of(p);
    float *col = (float *)ws; // the start of the workspace, as conv2d.cu lays it out
    cudaStream_t st = cnn_stream(ctx);
    if (p->mode == CNN_POOL_MAX)
        pool_forward_im2col_kernel<true><<<blocks, CNN_THREADS, 0, st>>>((unsigned)total, g, *d, x,
                                                                         y, argmax, col);
    else
        pool_forward_im2col_kernel<false><<<blocks, CNN_THREADS, 0, st>>>((unsigned)total, g, *d,
                                                                          x, y, argmax, col);
    CNN_CUDA_LAUNCHED(what);
    return CNN_OK;
}
