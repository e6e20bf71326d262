// random_contrast.cu: RandomContrast's training forward for the cuda engine,
// the cpu engine's formula (csrc/cpu/random_contrast.c): one block per
// plane (sample i, channel ch); thread 0 draws the sample's factor f, the
// threads sum the plane in double (thread t the elements t, t + 256, ...,
// then a fixed tree in shared memory: the same sum every run, rounded as
// the cpu engine's row-major double sum up to the double's last bits),
// mean = (float)(sum / (h w)), y = clip((x - mean) f + mean, vmin, vmax).
// Inference copies x.
#include "cuda_common.cuh"
#include "cuda_ops.h"

__global__ void random_contrast_kernel(cnn_aug_desc d, const int64_t *__restrict__ forward,
                                       int64_t row0, const float *__restrict__ x,
                                       float *__restrict__ y)
{
    cnn_kernel_begin();
    __shared__ double part[CNN_THREADS];
    __shared__ float factor;
    const size_t q = blockIdx.x; // plane i*c + ch
    const size_t plane = (size_t)d.h * d.w;
    const float *xs = x + q * plane;
    float *ys = y + q * plane;
    if (threadIdx.x == 0)
        factor = cnn_aug_value(&d, cnn_rng_key(d.key, (uint64_t)*forward),
                               row0 + (int64_t)(q / d.c), 0);
    double sum = 0.0;
    for (size_t p = threadIdx.x; p < plane; p += blockDim.x) sum += (double)xs[p];
    part[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned half = CNN_THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    const float mean = (float)(part[0] / (double)plane), f = factor;
    for (size_t p = threadIdx.x; p < plane; p += blockDim.x) {
        float v = CNN_FADD(CNN_FMUL(CNN_FSUB(xs[p], mean), f), mean);
        v = v < d.vmin ? d.vmin : v;
        ys[p] = v > d.vmax ? d.vmax : v;
    }
}

// x (n, c, h, w) -> y (n, c, h, w)
cnn_status cuda_random_contrast(cnn_ctx *ctx, const cnn_aug_desc *d, int training,
                                const int64_t *forward, int64_t row0, const float *x, float *y)
{
    CNN_TRY(cnn_aug_check("random_contrast", d, row0));
    const size_t planes = (size_t)d->n * d->c;
    if (planes == 0) return CNN_OK;
    cudaStream_t st = cnn_stream(ctx);
    if (!training) {
        CNN_CUDA_TRY(cudaMemcpyAsync(y, x, planes * d->h * d->w * sizeof(float),
                                     cudaMemcpyDeviceToDevice, st),
                     "random_contrast");
        return CNN_OK;
    }
    if (planes > 0x7fffffffu)
        return cnn_set_error(CNN_ERR_VALUE, "random_contrast: %zu planes is too many", planes);
    random_contrast_kernel<<<(unsigned)planes, CNN_THREADS, 0, st>>>(*d, forward, row0, x, y);
    CNN_CUDA_LAUNCHED("random_contrast");
    return CNN_OK;
}
