// pool.cu: max and average pooling for the cuda engine.
// Output (r, s) of a plane covers input rows r*sh - pad_top + [0, ph) and
// columns s*sw - pad_left + [0, pw), clipped to the image: max ignores the
// padding (the first maximum in row-major window order wins; an empty window
// gives 0 and argmax -1), average divides by the number of in-image elements.
//
// Forward: one thread per output. Backward: one thread per INPUT element,
// which visits the outputs whose windows cover it in row-major order and
// sums their contributions, so dx is fully overwritten without atomics and
// the sum runs in the same order as the cpu engine's scatter (bit-identical
// results). Max backward adds dy where argmax equals this input's index; an
// argmax that no covering window could have produced (the forward never
// writes one) is ignored, where the cpu engine reports it.
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "pool_geom.cuh"

// Also conv2d_pool_backward.cu's check of its pooling (cuda_common.cuh).
cnn_status cnn_cuda_check_pool_desc(const char *what, const cnn_pool_desc *d)
{
    if (d->mode != CNN_POOL_MAX && d->mode != CNN_POOL_AVG)
        return cnn_set_error(CNN_ERR_VALUE, "%s: unknown pool mode %d", what, d->mode);
    if (d->n < 0 || d->c < 1 || d->h < 1 || d->w < 1 || d->ph < 1 || d->pw < 1 || d->sh < 1 ||
        d->sw < 1 || d->oh < 1 || d->ow < 1)
        return cnn_set_error(CNN_ERR_VALUE,
                             "%s: bad descriptor (n %d, c %d, h %d, w %d, pool %dx%d, "
                             "stride %dx%d, out %dx%d)",
                             what, d->n, d->c, d->h, d->w, d->ph, d->pw, d->sh, d->sw, d->oh,
                             d->ow);
    if ((size_t)d->h * (size_t)d->w > 0x7fffffff)
        return cnn_set_error(CNN_ERR_VALUE, "%s: a %dx%d plane does not fit an int32 argmax",
                             what, d->h, d->w);
    return CNN_OK;
}

// floor(a / b) for b > 0 and any a.
static __device__ __forceinline__ int floor_div(int a, int b)
{
    const int q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

// The outputs [*lo, *hi] (inclusive; empty when lo > hi) along an axis whose
// windows o*stride - pad + [0, k) contain input position i.
static __device__ __forceinline__ void covering(int i, int stride, int pad, int k, int out,
                                                int *lo, int *hi)
{
    // o*stride - pad <= i  and  i < o*stride - pad + k
    int a = floor_div(i + pad - k, stride) + 1; // smallest o with o*stride > i + pad - k
    int b = floor_div(i + pad, stride);         // largest o with o*stride <= i + pad
    *lo = a < 0 ? 0 : a;
    *hi = b > out - 1 ? out - 1 : b;
}

// Every kernel is compiled for two index types: unsigned 32-bit when the
// input and the output have fewer than 2^31 elements (GPU integer division is
// much cheaper in 32 bits), size_t otherwise.
#define POOL_LOOP(I, i, n)                                                     \
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (I)blockDim.x * gridDim.x)

// x (planes, h, w) -> y (planes, oh, ow), argmax (planes, oh, ow): one
// thread per output.
template <typename I>
__global__ void max_pool_forward_kernel(I total, pool_geom g, const float *__restrict__ x,
                                        float *__restrict__ y, int32_t *__restrict__ argmax)
{
    cnn_kernel_begin();
    const I out_plane = (I)g.oh * g.ow;
    const I in_plane = (I)g.h * g.w;
    POOL_LOOP(I, o, total) {
        const I q = o / out_plane;
        const int rest = (int)(o - q * out_plane);
        const int r = rest / g.ow, s = rest - (rest / g.ow) * g.ow;
        int32_t at;
        y[o] = max_window(x + q * in_plane, g, r, s, &at);
        argmax[o] = at;
    }
}

// Max pooling over 2x2 windows with strides 2 and no padding, none clipped
// (pool_2x2_fits): the seed networks' pools, each window's four reads and
// three comparisons written out. The generic kernel's loops and clipping
// were most of its instructions (ncu, H200, seed CIFAR-10 CNN at batch 512,
// pool 1: 22.8 M warp instructions for 3.7 M outputs, 0.78 issued a cycle,
// the DRAM half busy). The same comparisons in the same row-major order as
// max_window (whose first, of the first element with itself, is false even
// for NaN): the same bits and the same argmax. PAIRS: w even (and x 8-byte
// aligned), so that each of the window's rows is one 8-byte load. (Its name
// holds "max_pool_forward", which tests/fusions/test_im2col_fusion.py counts
// launches by.)
template <bool PAIRS>
__global__ void max_pool_forward_2x2_kernel(unsigned total, pool_geom g,
                                            const float *__restrict__ x, float *__restrict__ y,
                                            int32_t *__restrict__ argmax)
{
    cnn_kernel_begin();
    const unsigned out_plane = (unsigned)g.oh * g.ow, in_plane = (unsigned)g.h * g.w;
    POOL_LOOP(unsigned, o, total) {
        const unsigned q = o / out_plane, rest = o - q * out_plane;
        const unsigned r = rest / g.ow, s = rest - r * g.ow;
        const int32_t at = (int32_t)(2 * r * g.w + 2 * s); // the window's first element
        const float *xq = x + q * in_plane + at;
        float v0, v1, v2, v3;
        if (PAIRS) {
            const float2 top = *reinterpret_cast<const float2 *>(xq);
            const float2 bottom = *reinterpret_cast<const float2 *>(xq + g.w);
            v0 = top.x, v1 = top.y, v2 = bottom.x, v3 = bottom.y;
        } else {
            v0 = xq[0], v1 = xq[1], v2 = xq[g.w], v3 = xq[g.w + 1];
        }
        float best = v0;
        int32_t best_at = at;
        if (v1 > best) best = v1, best_at = at + 1;
        if (v2 > best) best = v2, best_at = at + g.w;
        if (v3 > best) best = v3, best_at = at + g.w + 1;
        y[o] = best;
        argmax[o] = best_at;
    }
}

// x (planes, h, w) -> y (planes, oh, ow), the mean of each clipped window
// (summed in row-major order, as the cpu engine).
template <typename I>
__global__ void avg_pool_forward_kernel(I total, pool_geom g, const float *__restrict__ x,
                                        float *__restrict__ y)
{
    cnn_kernel_begin();
    const I out_plane = (I)g.oh * g.ow;
    const I in_plane = (I)g.h * g.w;
    POOL_LOOP(I, o, total) {
        const I q = o / out_plane;
        const int rest = (int)(o - q * out_plane);
        const int r = rest / g.ow, s = rest - (rest / g.ow) * g.ow;
        y[o] = avg_window(x + q * in_plane, g, r, s);
    }
}

// dy (planes, oh, ow), argmax (planes, oh, ow) -> dx (planes, h, w),
// overwritten: one thread per input element.
template <typename I>
__global__ void max_pool_backward_kernel(I total, pool_geom g, const float *__restrict__ dy,
                                         const int32_t *__restrict__ argmax,
                                         float *__restrict__ dx)
{
    cnn_kernel_begin();
    const I out_plane = (I)g.oh * g.ow;
    const I in_plane = (I)g.h * g.w;
    POOL_LOOP(I, e, total) {
        const I q = e / in_plane;
        const int me = (int)(e - q * in_plane); // index into the input plane
        const int i = me / g.w, j = me - (me / g.w) * g.w;
        int rlo, rhi, slo, shi;
        covering(i, g.sh, g.pad_top, g.ph, g.oh, &rlo, &rhi);
        covering(j, g.sw, g.pad_left, g.pw, g.ow, &slo, &shi);
        const float *gq = dy + q * out_plane;
        const int32_t *aq = argmax + q * out_plane;
        float acc = 0.0f;
        for (int r = rlo; r <= rhi; ++r)
            for (int s = slo; s <= shi; ++s) {
                const int o = r * g.ow + s;
                if (aq[o] == me) acc += gq[o];
            }
        dx[e] = acc;
    }
}

// Max backward where windows do not overlap (pool no larger than the
// stride): an input lies in at most one window, found by one division per
// axis; it gets 0 + dy there when it is that window's argmax, else 0 (the
// generic kernel's sum of one term, bit for bit).
// With relu_y (the pool's input, a ReLU's output; else NULL), also that
// ReLU's backward: 0 where relu_y is not positive.
__global__ void max_pool_backward_disjoint_kernel(unsigned total, pool_geom g,
                                                  const float *__restrict__ dy,
                                                  const int32_t *__restrict__ argmax,
                                                  const float *__restrict__ relu_y,
                                                  float *__restrict__ dx)
{
    cnn_kernel_begin();
    const unsigned out_plane = (unsigned)g.oh * g.ow;
    const unsigned in_plane = (unsigned)g.h * g.w;
    POOL_LOOP(unsigned, e, total) {
        const unsigned q = e / in_plane;
        const int me = (int)(e - q * in_plane);
        const int i = me / g.w, j = me - (me / g.w) * g.w;
        const int ti = i + g.pad_top, tj = j + g.pad_left; // both >= 0
        const int r = ti / g.sh, s = tj / g.sw;
        float acc = 0.0f;
        if (r < g.oh && s < g.ow && ti - r * g.sh < g.ph && tj - s * g.sw < g.pw) {
            const unsigned o = q * out_plane + (unsigned)(r * g.ow + s);
            if (argmax[o] == me) acc += dy[o];
        }
        if (relu_y && !(relu_y[e] > 0.0f)) acc = 0.0f;
        dx[e] = acc;
    }
}

// dy (planes, oh, ow) -> dx (planes, h, w), overwritten: each covering
// output passes dy / (its in-image count); one thread per input element.
template <typename I>
__global__ void avg_pool_backward_kernel(I total, pool_geom g, const float *__restrict__ dy,
                                         float *__restrict__ dx)
{
    cnn_kernel_begin();
    const I out_plane = (I)g.oh * g.ow;
    const I in_plane = (I)g.h * g.w;
    POOL_LOOP(I, e, total) {
        const I q = e / in_plane;
        const int me = (int)(e - q * in_plane);
        const int i = me / g.w, j = me - (me / g.w) * g.w;
        int rlo, rhi, slo, shi;
        covering(i, g.sh, g.pad_top, g.ph, g.oh, &rlo, &rhi);
        covering(j, g.sw, g.pad_left, g.pw, g.ow, &slo, &shi);
        const float *gq = dy + q * out_plane;
        float acc = 0.0f;
        for (int r = rlo; r <= rhi; ++r) {
            int r0, r1;
            window(r, g.sh, g.pad_top, g.ph, g.h, &r0, &r1);
            for (int s = slo; s <= shi; ++s) {
                int c0, c1;
                window(s, g.sw, g.pad_left, g.pw, g.w, &c0, &c1);
                // this input lies in the window, so the count is positive
                acc += gq[r * g.ow + s] / (float)((r1 - r0) * (c1 - c0));
            }
        }
        dx[e] = acc;
    }
}

// Whether the input and output planes of d can use 32-bit indices.
static int fits_32(const cnn_pool_desc *d)
{
    const size_t in = (size_t)d->n * d->c * d->h * d->w, out = (size_t)d->n * d->c * d->oh * d->ow;
    return in < 0x7fffffffu && out < 0x7fffffffu;
}

// Whether max_pool_forward_2x2_kernel takes d: max pooling over 2x2 windows
// with strides 2, no padding, no window clipped, 32-bit indices.
static int pool_2x2_fits(const cnn_pool_desc *d)
{
    return d->mode == CNN_POOL_MAX && d->ph == 2 && d->pw == 2 && d->sh == 2 && d->sw == 2 &&
           d->pad_top == 0 && d->pad_left == 0 && 2 * d->oh <= d->h && 2 * d->ow <= d->w &&
           fits_32(d);
}

// x (n, c, h, w) -> y (n, c, oh, ow); argmax (n, c, oh, ow) for max (may be
// NULL for average).
cnn_status cuda_pool_forward(cnn_ctx *ctx, const cnn_pool_desc *d, const float *x, float *y,
                             int32_t *argmax)
{
    CNN_TRY(cnn_cuda_check_pool_desc("pool_forward", d));
    if (d->mode == CNN_POOL_MAX && !argmax)
        return cnn_set_error(CNN_ERR_VALUE, "pool_forward: max pooling needs an argmax buffer");
    const size_t total = (size_t)d->n * d->c * d->oh * d->ow;
    if (total == 0) return CNN_OK;
    const unsigned blocks = cnn_blocks(total, CNN_THREADS);
    const pool_geom g = geom_of(d);
    cudaStream_t st = cnn_stream(ctx);
    const int narrow = fits_32(d);
    if (pool_2x2_fits(d)) {
        if (d->w % 2 == 0 && ((uintptr_t)x & 7) == 0)
            max_pool_forward_2x2_kernel<true><<<blocks, CNN_THREADS, 0, st>>>(
                (unsigned)total, g, x, y, argmax);
        else
            max_pool_forward_2x2_kernel<false><<<blocks, CNN_THREADS, 0, st>>>(
                (unsigned)total, g, x, y, argmax);
        CNN_CUDA_LAUNCHED("max_pool_forward");
    } else if (d->mode == CNN_POOL_MAX) {
        if (narrow)
            max_pool_forward_kernel<unsigned><<<blocks, CNN_THREADS, 0, st>>>((unsigned)total, g,
                                                                             x, y, argmax);
        else
            max_pool_forward_kernel<size_t><<<blocks, CNN_THREADS, 0, st>>>(total, g, x, y, argmax);
        CNN_CUDA_LAUNCHED("max_pool_forward");
    } else {
        if (narrow)
            avg_pool_forward_kernel<unsigned><<<blocks, CNN_THREADS, 0, st>>>((unsigned)total, g,
                                                                             x, y);
        else
            avg_pool_forward_kernel<size_t><<<blocks, CNN_THREADS, 0, st>>>(total, g, x, y);
        CNN_CUDA_LAUNCHED("avg_pool_forward");
    }
    return CNN_OK;
}

// dy (n, c, oh, ow), argmax (n, c, oh, ow) (max only) -> dx (n, c, h, w),
// overwritten; with relu_y (the pool's input, a ReLU's output; else NULL),
// also that ReLU's backward: dx = 0 where relu_y <= 0 (in the same pass for
// disjoint max windows, in a second pass otherwise): the bits of the two
// entries one after the other.
static cnn_status pool_backward(cnn_ctx *ctx, const char *what, const cnn_pool_desc *d,
                                const float *dy, const int32_t *argmax, const float *relu_y,
                                float *dx)
{
    CNN_TRY(cnn_cuda_check_pool_desc(what, d));
    if (d->mode == CNN_POOL_MAX && !argmax)
        return cnn_set_error(CNN_ERR_VALUE, "%s: max pooling needs an argmax buffer", what);
    const size_t total = (size_t)d->n * d->c * d->h * d->w;
    if (total == 0) return CNN_OK;
    const unsigned blocks = cnn_blocks(total, CNN_THREADS);
    const pool_geom g = geom_of(d);
    cudaStream_t st = cnn_stream(ctx);
    const int narrow = fits_32(d);
    if (d->mode == CNN_POOL_MAX && narrow && d->ph <= d->sh && d->pw <= d->sw &&
        d->pad_top >= 0 && d->pad_left >= 0) {
        max_pool_backward_disjoint_kernel<<<blocks, CNN_THREADS, 0, st>>>((unsigned)total, g, dy,
                                                                          argmax, relu_y, dx);
        CNN_CUDA_LAUNCHED(what);
        return CNN_OK;
    }
    if (d->mode == CNN_POOL_MAX) {
        if (narrow)
            max_pool_backward_kernel<unsigned><<<blocks, CNN_THREADS, 0, st>>>((unsigned)total, g,
                                                                              dy, argmax, dx);
        else
            max_pool_backward_kernel<size_t><<<blocks, CNN_THREADS, 0, st>>>(total, g, dy, argmax,
                                                                            dx);
    } else {
        if (narrow)
            avg_pool_backward_kernel<unsigned><<<blocks, CNN_THREADS, 0, st>>>((unsigned)total, g,
                                                                              dy, dx);
        else
            avg_pool_backward_kernel<size_t><<<blocks, CNN_THREADS, 0, st>>>(total, g, dy, dx);
    }
    CNN_CUDA_LAUNCHED(what);
    if (relu_y) // the ReLU's backward, in place (activation.cu)
        return cuda_activation_backward(ctx, CNN_ACT_RELU, d->n * d->c, d->h * d->w, relu_y, dx,
                                        dx);
    return CNN_OK;
}

cnn_status cuda_pool_backward(cnn_ctx *ctx, const cnn_pool_desc *d, const float *dy,
                              const int32_t *argmax, float *dx)
{
    return pool_backward(ctx, "pool_backward", d, dy, argmax, NULL, dx);
}

// The table's pool_backward_relu: pool_backward with the mask of the ReLU
// whose output y is the pool's input.
cnn_status cuda_pool_backward_relu(cnn_ctx *ctx, const cnn_pool_desc *d, const float *dy,
                                   const int32_t *argmax, const float *y, float *dx)
{
    if (!y) return cnn_set_error(CNN_ERR_VALUE, "pool_backward_relu: the ReLU's output is NULL");
    return pool_backward(ctx, "pool_backward_relu", d, dy, argmax, y, dx);
}
