/* backend_omp.c: the omp engine's table: the cpu engine's kernels on N
 * OpenMP threads of the host.
 *
 * Every kernel cuts its work into parts that never share an output
 * (images, planes, channels, rows, GEMM tiles), so each output is computed by
 * the same serial code whatever the thread count. The one reduction across
 * images, the convolution's filter gradient, is summed from partials over a
 * fixed cut of the batch (conv2d.c) in a fixed order: results are
 * bit-identical for every thread count. registry.c offers this table only
 * when the build has OpenMP. */
#include "cpu.h"

/* More threads than this is a mistake, not a machine. */
#define OMP_MAX_THREADS 1024

static cnn_status omp_ctx_create(cnn_ctx **out, int num_threads, int device)
{
    if (num_threads < 1 || num_threads > OMP_MAX_THREADS)
        return cnn_set_error(CNN_ERR_VALUE, "engine 'omp': threads must be in [1, %d], got %d",
                             OMP_MAX_THREADS, num_threads);
    (void)device;
    return cnn_cpu_ctx_create(&cnn_backend_omp, num_threads, 1, out);
}

const cnn_backend cnn_backend_omp = {
    .name = "omp",
    .ctx_create = omp_ctx_create,
    .ctx_destroy = cnn_cpu_ctx_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .zero = cpu_zero,
    .synchronize = cpu_synchronize,
    .copy = cpu_copy,
    .nchw_from_nhwc = cpu_nchw_from_nhwc,
    .nhwc_from_nchw = cpu_nhwc_from_nchw,
    .upload_samples = cpu_upload_samples,
    .conv2d_workspace = omp_conv2d_workspace,
    .conv2d_forward = cpu_conv2d_forward,
    .conv2d_backward_data = cpu_conv2d_backward_data,
    .conv2d_backward_filter = cpu_conv2d_backward_filter,
    .pool_forward = cpu_pool_forward,
    .pool_backward = cpu_pool_backward,
    .dense_forward = cpu_dense_forward,
    .dense_backward_data = cpu_dense_backward_data,
    .dense_backward_filter = cpu_dense_backward_filter,
    .activation_forward = cpu_activation_forward,
    .activation_backward = cpu_activation_backward,
    .conv2d_forward_relu = cpu_conv2d_forward_relu,
    .pool_backward_relu = cpu_pool_backward_relu,
    .dropout_forward = cpu_dropout_forward,
    .dropout_backward = cpu_dropout_backward,
    .batchnorm_forward_train = cpu_batchnorm_forward_train,
    .batchnorm_forward_infer = cpu_batchnorm_forward_infer,
    .batchnorm_backward = cpu_batchnorm_backward,
    .loss_forward_backward = cpu_loss_forward_backward,
    .gather_batch = cpu_gather_batch,
    .advance_counters = cpu_advance_counters,
    .adam_step = cpu_adam_step,
    .sgd_step = cpu_sgd_step,
};
