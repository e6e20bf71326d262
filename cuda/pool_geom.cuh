// pool_geom.cuh: a pooling layer's geometry as its kernels take it (by
// value), the clipped window of one output, and the forward's value of one
// output; shared by pool.cu, conv2d_pool_backward.cu (which runs the pool's
// backward after col2im) and dev/cuda/pool_im2col_kernels.cuh (the retired
// pool+im2col fusion: the pool's forward that also writes the next
// convolution's column matrix).
#ifndef CNN_POOL_GEOM_CUH
#define CNN_POOL_GEOM_CUH

#include "cuda_common.cuh"

struct pool_geom {
    int h, w, ph, pw, sh, sw, pad_top, pad_left, oh, ow;
};

static inline pool_geom geom_of(const cnn_pool_desc *d)
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

// Output (r, s) of max pooling over the plane xq: the first maximum of the
// clipped window in row-major order, its index in the plane to *at; an
// empty window (all padding) gives 0 and -1.
static __device__ __forceinline__ float max_window(const float *__restrict__ xq,
                                                   const pool_geom &g, int r, int s, int32_t *at)
{
    int r0, r1, c0, c1;
    window(r, g.sh, g.pad_top, g.ph, g.h, &r0, &r1);
    window(s, g.sw, g.pad_left, g.pw, g.w, &c0, &c1);
    if (r0 >= r1 || c0 >= c1) {
        *at = -1;
        return 0.0f;
    }
    int32_t best_at = (int32_t)(r0 * g.w + c0);
    float best = xq[best_at];
    for (int i = r0; i < r1; ++i) {
        for (int j = c0; j < c1; ++j) {
            const int32_t idx = (int32_t)(i * g.w + j);
            const float v = xq[idx];
            if (v > best) { // strict: the first maximum wins
                best = v;
                best_at = idx;
            }
        }
    }
    *at = best_at;
    return best;
}

// Output (r, s) of average pooling over the plane xq: the mean of the
// clipped window, summed in row-major order (as the cpu engine); an empty
// window gives 0.
static __device__ __forceinline__ float avg_window(const float *__restrict__ xq,
                                                   const pool_geom &g, int r, int s)
{
    int r0, r1, c0, c1;
    window(r, g.sh, g.pad_top, g.ph, g.h, &r0, &r1);
    window(s, g.sw, g.pad_left, g.pw, g.w, &c0, &c1);
    float sum = 0.0f;
    for (int i = r0; i < r1; ++i)
        for (int j = c0; j < c1; ++j) sum += xq[(size_t)i * g.w + j];
    const int count = (r1 > r0 && c1 > c0) ? (r1 - r0) * (c1 - c0) : 0;
    return count ? sum / (float)count : 0.0f;
}

#endif
