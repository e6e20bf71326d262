// reshape.cu: Reshape for the cuda engine, the cpu engine's mapping: y (n,
// oc, oh, ow) NCHW takes at channel k, pixel q the value of NHWC index
// j = q*oc + k of the sample, which x (n, c, h, w) holds at channel j % c,
// pixel j / c. With c == oc that is a copy. One thread per value of y.
#include "cuda_common.cuh"
#include "cuda_ops.h"

__global__ void reshape_kernel(size_t total, size_t count, size_t c, size_t plane, size_t oc,
                               size_t oplane, const float *__restrict__ x, float *__restrict__ y)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(e, total) {
        const size_t i = e / count, rest = e - i * count;
        const size_t k = rest / oplane, q = rest - k * oplane;
        const size_t j = q * oc + k;
        y[e] = x[i * count + (j % c) * plane + j / c];
    }
}

cnn_status cuda_reshape(cnn_ctx *ctx, int n, int c, int h, int w, int oc, int oh, int ow,
                        const float *x, float *y)
{
    if (n < 0 || c < 1 || h < 1 || w < 1 || oc < 1 || oh < 1 || ow < 1 ||
        (size_t)c * h * w != (size_t)oc * oh * ow)
        return cnn_set_error(CNN_ERR_VALUE,
                             "reshape: (%d, %d, %d, %d) cannot become (%d, %d, %d, %d)", n, c,
                             h, w, n, oc, oh, ow);
    const size_t count = (size_t)c * h * w, total = (size_t)n * count;
    if (total == 0) return CNN_OK;
    cudaStream_t st = cnn_stream(ctx);
    if (c == oc) {
        CNN_CUDA_TRY(cudaMemcpyAsync(y, x, total * sizeof(float), cudaMemcpyDeviceToDevice, st),
                     "reshape");
        return CNN_OK;
    }
    reshape_kernel<<<cnn_blocks(total, CNN_THREADS), CNN_THREADS, 0, st>>>(
        total, count, (size_t)c, (size_t)h * w, (size_t)oc, (size_t)oh * ow, x, y);
    CNN_CUDA_LAUNCHED("reshape");
    return CNN_OK;
}
