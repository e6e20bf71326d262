// pool_geom.cuh: a pooling layer's geometry as its kernels take it (by
// value), and the clipped window of one output; shared by pool.cu and
// conv2d_pool_backward.cu (which runs the pool's backward after col2im).
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

#endif
