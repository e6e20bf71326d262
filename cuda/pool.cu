// pool.cu: max and average pooling for the cuda engine.
// Output (r, s) of a plane covers input rows r*sh - pad_top + [0, ph) and
// columns s*sw - pad_left + [0, pw), clipped to the image: max ignores the
// padding (the first maximum in row-major window order wins; an empty window
// gives 0 and argmax -1), average divides by the number of in-image elements.
//
// Forward: one thread per output. Backward: one thread per INPUT element
// (planes over the grid's y, pixels over x: no 64-bit division per element),
// which visits the outputs whose windows cover it in row-major order and
// sums their contributions, so dx is fully overwritten without atomics and
// the sum runs in the same order as the cpu engine's scatter (bit-identical
// results). Max backward adds dy where argmax equals this input's index; an
// argmax that no covering window could have produced (the forward never
// writes one) is ignored, where the cpu engine reports it.
#include "cuda_common.cuh"
#include "cuda_ops.h"

static cnn_status check_desc(const char *what, const cnn_pool_desc *d)
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

// The geometry, passed by value to the kernels.
struct pool_geom {
    int h, w, ph, pw, sh, sw, pad_top, pad_left, oh, ow;
};

static pool_geom geom_of(const cnn_pool_desc *d)
{
    pool_geom g = {d->h, d->w, d->ph, d->pw, d->sh, d->sw, d->pad_top, d->pad_left, d->oh, d->ow};
    return g;
}

// The window [*lo, *hi) of output o along an axis of length in.
static __device__ __forceinline__ void window(int o, int stride, int pad, int k, int in, int *lo,
                                              int *hi)
{
    const int start = o * stride - pad;
    *lo = start < 0 ? 0 : start;
    *hi = start + k > in ? in : start + k;
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

// x (planes, h, w) -> y (planes, oh, ow), argmax (planes, oh, ow): one
// thread per output.
__global__ void max_pool_forward_kernel(size_t total, pool_geom g, const float *__restrict__ x,
                                        float *__restrict__ y, int32_t *__restrict__ argmax)
{
    const size_t out_plane = (size_t)g.oh * g.ow;
    const size_t in_plane = (size_t)g.h * g.w;
    CNN_GRID_LOOP(o, total) {
        const size_t q = o / out_plane;
        const int rest = (int)(o - q * out_plane);
        const int r = rest / g.ow, s = rest - (rest / g.ow) * g.ow;
        int r0, r1, c0, c1;
        window(r, g.sh, g.pad_top, g.ph, g.h, &r0, &r1);
        window(s, g.sw, g.pad_left, g.pw, g.w, &c0, &c1);
        if (r0 >= r1 || c0 >= c1) {
            y[o] = 0.0f;
            argmax[o] = -1;
            continue;
        }
        const float *xq = x + q * in_plane;
        int32_t at = (int32_t)(r0 * g.w + c0);
        float best = xq[at];
        for (int i = r0; i < r1; ++i) {
            for (int j = c0; j < c1; ++j) {
                const int32_t idx = (int32_t)(i * g.w + j);
                const float v = xq[idx];
                if (v > best) { // strict: the first maximum wins
                    best = v;
                    at = idx;
                }
            }
        }
        y[o] = best;
        argmax[o] = at;
    }
}

// x (planes, h, w) -> y (planes, oh, ow), the mean of each clipped window
// (summed in row-major order, as the cpu engine).
__global__ void avg_pool_forward_kernel(size_t total, pool_geom g, const float *__restrict__ x,
                                        float *__restrict__ y)
{
    const size_t out_plane = (size_t)g.oh * g.ow;
    const size_t in_plane = (size_t)g.h * g.w;
    CNN_GRID_LOOP(o, total) {
        const size_t q = o / out_plane;
        const int rest = (int)(o - q * out_plane);
        const int r = rest / g.ow, s = rest - (rest / g.ow) * g.ow;
        int r0, r1, c0, c1;
        window(r, g.sh, g.pad_top, g.ph, g.h, &r0, &r1);
        window(s, g.sw, g.pad_left, g.pw, g.w, &c0, &c1);
        const float *xq = x + q * in_plane;
        float sum = 0.0f;
        for (int i = r0; i < r1; ++i)
            for (int j = c0; j < c1; ++j) sum += xq[(size_t)i * g.w + j];
        const int count = (r1 > r0 && c1 > c0) ? (r1 - r0) * (c1 - c0) : 0;
        y[o] = count ? sum / (float)count : 0.0f;
    }
}

// The backward kernels: one thread per input element, planes (image,
// channel) over y and the pixels of a plane over x (grid-stride in both,
// 32-bit index arithmetic within a plane). With RELU, the ReLU before the
// pool is applied too (pool_backward_relu): dx = 0 where its output y <= 0.

// dy (planes, oh, ow), argmax (planes, oh, ow) -> dx (planes, h, w),
// overwritten. Windows that tile the plane (pool == stride, no padding)
// have one covering output per input, found without the general search.
template <bool RELU>
__global__ void max_pool_backward_kernel(long long planes, pool_geom g,
                                         const float *__restrict__ dy,
                                         const int32_t *__restrict__ argmax,
                                         const float *__restrict__ y, float *__restrict__ dx)
{
    const int out_plane = g.oh * g.ow, in_plane = g.h * g.w;
    const bool tiles = g.ph == g.sh && g.pw == g.sw && g.pad_top == 0 && g.pad_left == 0;
    for (long long q = blockIdx.y; q < planes; q += gridDim.y) {
        const float *gq = dy + (size_t)q * out_plane;
        const int32_t *aq = argmax + (size_t)q * out_plane;
        for (int me = blockIdx.x * blockDim.x + threadIdx.x; me < in_plane; me += blockDim.x * gridDim.x) {
            const int i = me / g.w, j = me - i * g.w;
            float acc = 0.0f;
            if (tiles) {
                const int r = i / g.sh, s = j / g.sw;
                if (r < g.oh && s < g.ow) {
                    const int o = r * g.ow + s;
                    if (aq[o] == me) acc += gq[o];
                }
            } else {
                int rlo, rhi, slo, shi;
                covering(i, g.sh, g.pad_top, g.ph, g.oh, &rlo, &rhi);
                covering(j, g.sw, g.pad_left, g.pw, g.ow, &slo, &shi);
                for (int r = rlo; r <= rhi; ++r)
                    for (int s = slo; s <= shi; ++s) {
                        const int o = r * g.ow + s;
                        if (aq[o] == me) acc += gq[o];
                    }
            }
            const size_t e = (size_t)q * in_plane + me;
            if (RELU) acc = y[e] > 0.0f ? acc : 0.0f;
            dx[e] = acc;
        }
    }
}

// dy (planes, oh, ow) -> dx (planes, h, w), overwritten: each covering
// output passes dy / (its in-image count).
template <bool RELU>
__global__ void avg_pool_backward_kernel(long long planes, pool_geom g,
                                         const float *__restrict__ dy,
                                         const float *__restrict__ y, float *__restrict__ dx)
{
    const int out_plane = g.oh * g.ow, in_plane = g.h * g.w;
    for (long long q = blockIdx.y; q < planes; q += gridDim.y) {
        const float *gq = dy + (size_t)q * out_plane;
        for (int me = blockIdx.x * blockDim.x + threadIdx.x; me < in_plane; me += blockDim.x * gridDim.x) {
            const int i = me / g.w, j = me - i * g.w;
            int rlo, rhi, slo, shi;
            covering(i, g.sh, g.pad_top, g.ph, g.oh, &rlo, &rhi);
            covering(j, g.sw, g.pad_left, g.pw, g.ow, &slo, &shi);
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
            const size_t e = (size_t)q * in_plane + me;
            if (RELU) acc = y[e] > 0.0f ? acc : 0.0f;
            dx[e] = acc;
        }
    }
}

// x (n, c, h, w) -> y (n, c, oh, ow); argmax (n, c, oh, ow) for max (may be
// NULL for average).
cnn_status cuda_pool_forward(cnn_ctx *ctx, const cnn_pool_desc *d, const float *x, float *y,
                             int32_t *argmax)
{
    CNN_TRY(check_desc("pool_forward", d));
    if (d->mode == CNN_POOL_MAX && !argmax)
        return cnn_set_error(CNN_ERR_VALUE, "pool_forward: max pooling needs an argmax buffer");
    const size_t total = (size_t)d->n * d->c * d->oh * d->ow;
    if (total == 0) return CNN_OK;
    const unsigned blocks = cnn_blocks(total, CNN_THREADS);
    const pool_geom g = geom_of(d);
    if (d->mode == CNN_POOL_MAX) {
        max_pool_forward_kernel<<<blocks, CNN_THREADS, 0, cnn_stream(ctx)>>>(total, g, x, y,
                                                                             argmax);
        CNN_CUDA_LAUNCHED("max_pool_forward");
    } else {
        avg_pool_forward_kernel<<<blocks, CNN_THREADS, 0, cnn_stream(ctx)>>>(total, g, x, y);
        CNN_CUDA_LAUNCHED("avg_pool_forward");
    }
    return CNN_OK;
}

// dy (n, c, oh, ow), argmax (n, c, oh, ow) (max only) -> dx (n, c, h, w),
// overwritten; with y (the pool's input, a ReLU's output), dx = 0 where
// y <= 0.
static cnn_status pool_backward(cnn_ctx *ctx, const cnn_pool_desc *d, const float *dy,
                                const int32_t *argmax, const float *y, float *dx)
{
    const char *what = y ? "pool_backward_relu" : "pool_backward";
    CNN_TRY(check_desc(what, d));
    if (d->mode == CNN_POOL_MAX && !argmax)
        return cnn_set_error(CNN_ERR_VALUE, "%s: max pooling needs an argmax buffer", what);
    const long long planes = (long long)d->n * d->c;
    const int hw = d->h * d->w;
    if (planes == 0) return CNN_OK;
    const unsigned threads = hw >= CNN_THREADS ? CNN_THREADS : (unsigned)(hw + 31) / 32 * 32;
    const dim3 grid(cnn_blocks((size_t)hw, threads), (unsigned)(planes < 65535 ? planes : 65535));
    const pool_geom g = geom_of(d);
    cudaStream_t st = cnn_stream(ctx);
    if (d->mode == CNN_POOL_MAX) {
        if (y)
            max_pool_backward_kernel<true><<<grid, threads, 0, st>>>(planes, g, dy, argmax, y, dx);
        else
            max_pool_backward_kernel<false><<<grid, threads, 0, st>>>(planes, g, dy, argmax, y, dx);
        CNN_CUDA_LAUNCHED("max_pool_backward");
    } else {
        if (y)
            avg_pool_backward_kernel<true><<<grid, threads, 0, st>>>(planes, g, dy, y, dx);
        else
            avg_pool_backward_kernel<false><<<grid, threads, 0, st>>>(planes, g, dy, y, dx);
        CNN_CUDA_LAUNCHED("avg_pool_backward");
    }
    return CNN_OK;
}

cnn_status cuda_pool_backward(cnn_ctx *ctx, const cnn_pool_desc *d, const float *dy,
                              const int32_t *argmax, float *dx)
{
    return pool_backward(ctx, d, dy, argmax, nullptr, dx);
}

cnn_status cuda_pool_backward_relu(cnn_ctx *ctx, const cnn_pool_desc *d, const float *dy,
                                   const int32_t *argmax, const float *y, float *dx)
{
    if (!y) return cnn_set_error(CNN_ERR_VALUE, "pool_backward_relu: the ReLU's output is NULL");
    return pool_backward(ctx, d, dy, argmax, y, dx);
}
