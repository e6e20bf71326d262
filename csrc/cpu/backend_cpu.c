/* backend_cpu.c: the cpu engine's table and context. Host memory, one
 * thread. The memory entries are shared with the omp table (backend_omp.c). */
#define _POSIX_C_SOURCE 200112L
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

static void *aligned_alloc64(size_t bytes)
{
    void *p = NULL;
    if (bytes == 0) bytes = 64;
    if (posix_memalign(&p, 64, bytes) != 0) return NULL;
    return p;
}

/* One thread whatever is asked: the cpu engine never enters a parallel
 * region (every kernel's loop runs as one part on the calling thread). */
static cnn_status cpu_ctx_create(cnn_ctx **out, int num_threads, int device)
{
    (void)num_threads;
    (void)device;
    return cnn_cpu_ctx_create(&cnn_backend_cpu, 1, 0, out);
}

cnn_status cpu_alloc(cnn_ctx *ctx, void **p, size_t bytes)
{
    (void)ctx;
    *p = aligned_alloc64(bytes);
    if (!*p)
        return cnn_set_error(CNN_ERR_MEMORY, "out of host memory: could not allocate %zu bytes",
                             bytes);
    return CNN_OK;
}

void cpu_free(cnn_ctx *ctx, void *p)
{
    (void)ctx;
    free(p);
}

cnn_status cpu_copy(cnn_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (bytes) memcpy(dst, src, bytes);
    return CNN_OK;
}

cnn_status cpu_zero(cnn_ctx *ctx, void *p, size_t bytes)
{
    (void)ctx;
    if (bytes) memset(p, 0, bytes);
    return CNN_OK;
}

cnn_status cpu_synchronize(cnn_ctx *ctx)
{
    (void)ctx;
    return CNN_OK;
}

const cnn_backend cnn_backend_cpu = {
    .name = "cpu",
    .ctx_create = cpu_ctx_create,
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
    .conv2d_workspace = cpu_conv2d_workspace,
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
