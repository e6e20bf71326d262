// batchnorm_infer_stats.cu: the statistics of batch normalization's
// inference mode in the form the training backward takes them, for the cuda
// and cudnn engines: save_mean = moving_mean, save_invstd = 1 / sqrt(
// moving_var + epsilon) (batchnorm_backward_infer.cu's float math), one
// thread per channel. A trainable layer run in inference mode in training
// (Keras's training=False on its call) takes its gamma and beta gradients
// from batchnorm_backward with them.
#include "cuda_common.cuh"
#include "cuda_ops.h"

__global__ void bn_infer_stats_kernel(int c, float eps, const float *__restrict__ moving_mean,
                                      const float *__restrict__ moving_var,
                                      float *__restrict__ save_mean,
                                      float *__restrict__ save_invstd)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(ch, (size_t)c) {
        save_mean[ch] = moving_mean[ch];
        save_invstd[ch] = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(moving_var[ch], eps)));
    }
}

// moving_mean, moving_var (c) -> save_mean, save_invstd (c)
cnn_status cuda_batchnorm_infer_stats(cnn_ctx *ctx, const cnn_bn_desc *d,
                                      const float *moving_mean, const float *moving_var,
                                      float *save_mean, float *save_invstd)
{
    if (d->c < 1)
        return cnn_set_error(CNN_ERR_VALUE, "batchnorm_infer_stats: c must be >= 1, got %d",
                             d->c);
    const size_t total = (size_t)d->c;
    bn_infer_stats_kernel<<<cnn_blocks(total, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        d->c, d->epsilon, moving_mean, moving_var, save_mean, save_invstd);
    CNN_CUDA_LAUNCHED("batchnorm_infer_stats");
    return CNN_OK;
}
