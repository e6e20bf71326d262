// pool_col_stages.cuh: the first fused kernel of a convolution's data
// gradient and the backward of the pooling (and ReLU) before it, kept for
// dev/cuda/conv2d_backward_data_pool.cu (version 2) after the engine replaced
// it (2026-11-25) by one thread per pool OUTPUT (cuda/conv2d_pool_backward.cu).
// The kernel is the engine's of commit 38e5aed (cuda/conv2d_pool_backward.cu,
// col2im_pool_backward_kernel), unchanged but for its namespace (and the engine's pool_geom, now in
// cuda/pool_geom.cuh); the col2im
// sum it calls, cnn_conv2d::col2im_sum32, is still the engine's
// (cuda/conv2d_kernels.cuh).
//
// One thread per element of the pool's INPUT: where the pool's windows do not
// overlap (pool no larger than the stride, pads >= 0) an input element lies
// in at most one window, so its gradient needs one element of dpool, the
// convolution's input gradient: the thread finds its window's output (r, s),
// decides as the pool's backward does whether it receives gradient (max: it
// is the window's argmax; with the ReLU, whose output is the pool's input,
// that output > 0; average: always), and if so forms dpool[r, s] itself (the
// sum col2im forms, the same terms in the same order), then applies the
// pool's arithmetic: 0 + v (max), 0 + v / count (average, count the window's
// in-image elements), 0 where it receives none. In a max window only the
// argmax's thread sums: the other lanes of the warp wait (it was slower than
// col2im + the pool's backward apart on an H100: BENCHMARKS.md).
#ifndef DEV_CUDA_POOL_COL_STAGES_CUH
#define DEV_CUDA_POOL_COL_STAGES_CUH

#include <cuda_runtime.h>

#include "conv2d_kernels.cuh"
#include "pool_geom.cuh" // the engine's pool_geom and geom_of

namespace pool_col_stages {

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

// The launch of commit 38e5aed's engine (one thread per element of the
// pool's input, grid of cnn_blocks), on stream st. The caller checks, as the
// engine's entry does, that the windows are disjoint and that the pool's
// input has at most INT32_MAX elements. relu_y may be NULL (no ReLU); argmax
// is read only by max pooling.
inline void launch(cudaStream_t st, const cnn_conv_desc &d, const cnn_pool_desc &p,
                   const float *col, const int32_t *argmax, const float *relu_y, float *dx)
{
    const size_t total = (size_t)p.n * p.c * p.h * p.w;
    if (total == 0) return;
    const unsigned blocks = cnn_blocks(total, CNN_THREADS);
    const pool_geom g = geom_of(&p);
    const bool unit = d.sh == 1 && d.sw == 1;
    if (p.mode == CNN_POOL_MAX) {
        if (unit)
            col2im_pool_backward_kernel<true, true>
                <<<blocks, CNN_THREADS, 0, st>>>((unsigned)total, d, g, col, argmax, relu_y, dx);
        else
            col2im_pool_backward_kernel<true, false>
                <<<blocks, CNN_THREADS, 0, st>>>((unsigned)total, d, g, col, argmax, relu_y, dx);
    } else {
        if (unit)
            col2im_pool_backward_kernel<false, true>
                <<<blocks, CNN_THREADS, 0, st>>>((unsigned)total, d, g, col, nullptr, relu_y, dx);
        else
            col2im_pool_backward_kernel<false, false>
                <<<blocks, CNN_THREADS, 0, st>>>((unsigned)total, d, g, col, nullptr, relu_y, dx);
    }
}

} // namespace pool_col_stages

#endif
