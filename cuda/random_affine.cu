// random_affine.cu: RandomRotation's, RandomZoom's and RandomTranslation's
// training forward for the cuda engine, with the cpu engine's arithmetic
// (augment.h: cnn_aug_matrix once per sample, by thread 0 into shared
// memory; cnn_aug_source and cnn_aug_sample per output, every float
// operation rounded on its own, so the bits are the cpu engine's up to the
// double cosine and sine of a rotation, rounded to float32). Inference
// copies x.
#include "augment_grid.cuh"
#include "cuda_ops.h"

__global__ void random_affine_kernel(cnn_aug_desc d, const int64_t *__restrict__ forward,
                                     int64_t row0, const float *__restrict__ x,
                                     float *__restrict__ y)
{
    cnn_kernel_begin();
    __shared__ float m[6];
    const int i = blockIdx.x;
    if (threadIdx.x == 0) cnn_aug_matrix(&d, cnn_rng_key(d.key, (uint64_t)*forward), row0 + i, m);
    __syncthreads();
    float mm[6];
    for (int k = 0; k < 6; k++) mm[k] = m[k];
    const size_t plane = (size_t)d.h * d.w, per = (size_t)d.c * plane;
    const float *xs = x + (size_t)i * per;
    float *ys = y + (size_t)i * per;
    for (size_t e = CNN_AUGMENT_FIRST; e < per; e += CNN_AUGMENT_STRIDE) {
        const size_t ch = e / plane, p = e - ch * plane;
        const int r = (int)(p / d.w), s = (int)(p - (size_t)r * d.w);
        float sy, sx;
        cnn_aug_source(mm, r, s, &sy, &sx);
        ys[e] = cnn_aug_sample(&d, xs + ch * plane, sy, sx);
    }
}

// x (n, c, h, w) -> y (n, c, h, w)
cnn_status cuda_random_affine(cnn_ctx *ctx, const cnn_aug_desc *d, int training,
                              const int64_t *forward, int64_t row0, const float *x, float *y)
{
    CNN_TRY(cnn_aug_check("random_affine", d, row0));
    if (d->affine < CNN_AFFINE_ROTATION || d->affine > CNN_AFFINE_TRANSLATION)
        return cnn_set_error(CNN_ERR_VALUE, "random_affine: transform %d unknown", d->affine);
    const size_t per = (size_t)d->c * d->h * d->w;
    if (d->n == 0) return CNN_OK;
    cudaStream_t st = cnn_stream(ctx);
    if (!training) {
        CNN_CUDA_TRY(cudaMemcpyAsync(y, x, (size_t)d->n * per * sizeof(float),
                                     cudaMemcpyDeviceToDevice, st),
                     "random_affine");
        return CNN_OK;
    }
    random_affine_kernel<<<cnn_augment_grid(d->n, per), CNN_THREADS, 0, st>>>(*d, forward, row0,
                                                                              x, y);
    CNN_CUDA_LAUNCHED("random_affine");
    return CNN_OK;
}
