// random_crop.cu: RandomCrop for the cuda engine, the cpu engine's windows
// (augment.h: cnn_aug_crop_offsets, drawn once per sample by thread 0 in
// training forwards, the centre at inference).
#include "augment_grid.cuh"
#include "cuda_ops.h"

__global__ void random_crop_kernel(cnn_aug_desc d, int training,
                                   const int64_t *__restrict__ forward, int64_t row0,
                                   const float *__restrict__ x, float *__restrict__ y)
{
    cnn_kernel_begin();
    __shared__ int off[2];
    const int i = blockIdx.x;
    if (threadIdx.x == 0)
        cnn_aug_crop_offsets(&d, training, training ? cnn_rng_key(d.key, (uint64_t)*forward) : 0,
                             row0 + i, &off[0], &off[1]);
    __syncthreads();
    const size_t in_plane = (size_t)d.h * d.w, plane = (size_t)d.oh * d.ow;
    const size_t per = (size_t)d.c * plane;
    const float *xs = x + (size_t)i * d.c * in_plane;
    float *ys = y + (size_t)i * per;
    for (size_t e = CNN_AUGMENT_FIRST; e < per; e += CNN_AUGMENT_STRIDE) {
        const size_t ch = e / plane, p = e - ch * plane;
        const int r = (int)(p / d.ow), s = (int)(p - (size_t)r * d.ow);
        ys[e] = xs[ch * in_plane + (size_t)(r + off[0]) * d.w + (s + off[1])];
    }
}

// x (n, c, h, w) -> y (n, c, oh, ow)
cnn_status cuda_random_crop(cnn_ctx *ctx, const cnn_aug_desc *d, int training,
                            const int64_t *forward, int64_t row0, const float *x, float *y)
{
    CNN_TRY(cnn_aug_check("random_crop", d, row0));
    if (d->n == 0) return CNN_OK;
    const size_t per = (size_t)d->c * d->oh * d->ow;
    random_crop_kernel<<<cnn_augment_grid(d->n, per), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        *d, training, forward, row0, x, y);
    CNN_CUDA_LAUNCHED("random_crop");
    return CNN_OK;
}
