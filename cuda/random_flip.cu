// random_flip.cu: RandomFlip's training forward for the cuda engine, the cpu
// engine's (csrc/cpu/random_flip.c): sample i (row row0 + i of the whole
// batch) is flipped when its draw u0 <= 0.5, on every axis of the mode at
// once; the key is read on the device (a recorded step draws anew each
// replay). Inference copies x.
#include "augment_grid.cuh"
#include "cuda_ops.h"

__global__ void random_flip_kernel(cnn_aug_desc d, const int64_t *__restrict__ forward,
                                   int64_t row0, const float *__restrict__ x,
                                   float *__restrict__ y)
{
    cnn_kernel_begin();
    __shared__ int flip;
    const int i = blockIdx.x;
    if (threadIdx.x == 0)
        flip = cnn_aug_draw(cnn_rng_key(d.key, (uint64_t)*forward), row0 + i, 0) <= 0.5f;
    __syncthreads();
    const int fh = flip && d.flip_h, fv = flip && d.flip_v;
    const size_t plane = (size_t)d.h * d.w, per = (size_t)d.c * plane;
    const float *xs = x + (size_t)i * per;
    float *ys = y + (size_t)i * per;
    for (size_t e = CNN_AUGMENT_FIRST; e < per; e += CNN_AUGMENT_STRIDE) {
        const size_t ch = e / plane, p = e - ch * plane;
        const int r = (int)(p / d.w), s = (int)(p - (size_t)r * d.w);
        ys[e] = xs[ch * plane + (size_t)(fv ? d.h - 1 - r : r) * d.w + (fh ? d.w - 1 - s : s)];
    }
}

// x (n, c, h, w) -> y (n, c, h, w)
cnn_status cuda_random_flip(cnn_ctx *ctx, const cnn_aug_desc *d, int training,
                            const int64_t *forward, int64_t row0, const float *x, float *y)
{
    CNN_TRY(cnn_aug_check("random_flip", d, row0));
    const size_t per = (size_t)d->c * d->h * d->w;
    if (d->n == 0) return CNN_OK;
    cudaStream_t st = cnn_stream(ctx);
    if (!training) {
        CNN_CUDA_TRY(cudaMemcpyAsync(y, x, (size_t)d->n * per * sizeof(float),
                                     cudaMemcpyDeviceToDevice, st),
                     "random_flip");
        return CNN_OK;
    }
    random_flip_kernel<<<cnn_augment_grid(d->n, per), CNN_THREADS, 0, st>>>(*d, forward, row0, x,
                                                                            y);
    CNN_CUDA_LAUNCHED("random_flip");
    return CNN_OK;
}
