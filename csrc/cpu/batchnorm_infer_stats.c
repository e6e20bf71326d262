/* batchnorm_infer_stats.c: the statistics of batch normalization's
 * inference mode in the form the training backward takes them, for the cpu
 * and omp engines: save_mean = moving_mean, save_invstd = 1 / sqrt(
 * moving_var + epsilon) (batchnorm_backward_infer's float math), per
 * channel. A trainable layer run in inference mode in training (Keras's
 * training=False on its call) takes its gamma and beta gradients from
 * batchnorm_backward with them; c values: one thread. */
#include <math.h>

#include "cpu.h"

/* moving_mean, moving_var (c) -> save_mean, save_invstd (c) */
cnn_status cpu_batchnorm_infer_stats(cnn_ctx *ctx, const cnn_bn_desc *d, const float *moving_mean,
                                     const float *moving_var, float *save_mean,
                                     float *save_invstd)
{
    (void)ctx;
    if (d->c < 1)
        return cnn_set_error(CNN_ERR_VALUE, "batchnorm_infer_stats: c must be >= 1, got %d",
                             d->c);
    for (int ch = 0; ch < d->c; ++ch) {
        save_mean[ch] = moving_mean[ch];
        save_invstd[ch] = 1.0f / sqrtf(moving_var[ch] + d->epsilon);
    }
    return CNN_OK;
}
