// batchnorm_backward_infer.cu: the backward of batch normalization in
// inference mode (a frozen layer in training, as Keras 3 runs it), for the
// cuda and cudnn engines: dx = dy (gamma invstd), invstd = 1 / sqrt(
// moving_var + epsilon), per channel, one thread per element, with the cpu
// engine's float math (bit for bit).
#include "cuda_common.cuh"
#include "cuda_ops.h"

__global__ void bn_backward_infer_kernel(size_t total, int c, int sp, float eps,
                                         const float *__restrict__ dy,
                                         const float *__restrict__ gamma,
                                         const float *__restrict__ moving_var,
                                         float *__restrict__ dx)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(e, total) {
        const int ch = (int)((e / (size_t)sp) % (size_t)c);
        const float invstd = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(moving_var[ch], eps)));
        dx[e] = __fmul_rn(dy[e], __fmul_rn(gamma[ch], invstd));
    }
}

// dy (n, c, spatial), gamma, moving_var (c) -> dx like dy
cnn_status cuda_batchnorm_backward_infer(cnn_ctx *ctx, const cnn_bn_desc *d, const float *dy,
                                         const float *gamma, const float *moving_var, float *dx)
{
    if (d->n < 1 || d->c < 1 || d->spatial < 1)
        return cnn_set_error(CNN_ERR_VALUE, "batchnorm_backward_infer: n, c and spatial must "
                             "be >= 1, got %d, %d, %d", d->n, d->c, d->spatial);
    const size_t total = (size_t)d->n * (size_t)d->c * (size_t)d->spatial;
    bn_backward_infer_kernel<<<cnn_blocks(total, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        total, d->c, d->spatial, d->epsilon, dy, gamma, moving_var, dx);
    CNN_CUDA_LAUNCHED("batchnorm_backward_infer");
    return CNN_OK;
}
