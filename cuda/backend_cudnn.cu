// backend_cudnn.cu: the cudnn engine: the cuda engine's table with
// convolution, activations and softmax replaced by cuDNN calls and dense
// layers by cuBLAS, and the ReLU after a conv or before a max pool fused
// into our bias and pooling kernels. The convolutions' bias (add and gradient), pooling,
// dropout, batchnorm, the losses, the optimizers,
// the layouts and the gathers stay the cuda engine's kernels: the table's
// pooling backward gets the forward's argmax, not the input and output that
// cuDNN's pooling backward needs.
#include <stdlib.h>
#include <string.h>

#include "cuda_ops.h"
#include "cudnn_common.cuh"

extern "C" const cnn_backend cnn_backend_cudnn;

namespace {

constexpr size_t CUBLAS_WORKSPACE_BYTES = (size_t)32 << 20;

// The handles and memory are released on their own device, whichever
// thread (and current device) the destroy comes from.
void release(cnn_cudnn_impl *impl, int base_ready)
{
    const int device = impl->base.device;
    const int previous = base_ready ? cnn_cuda_device_enter(device) : device;
    cnn_cudnn_release_convs(impl);
    if (impl->act) cudnnDestroyActivationDescriptor(impl->act);
    if (impl->t0) cudnnDestroyTensorDescriptor(impl->t0);
    if (impl->t1) cudnnDestroyTensorDescriptor(impl->t1);
    if (impl->cublas) cublasDestroy(impl->cublas);
    if (impl->cudnn) cudnnDestroy(impl->cudnn);
    if (base_ready) {
        cudaStreamSynchronize(impl->base.stream);
        if (impl->cublas_workspace) cudaFree(impl->cublas_workspace);
        cnn_cuda_impl_fini(&impl->base);
        cnn_cuda_device_leave(previous, device);
    }
    free(impl);
}

cnn_status setup(cnn_cudnn_impl *impl)
{
    CNN_TRY(cnn_cudnn_algo_settings(impl));
    cudnnStatus_t s = cudnnCreate(&impl->cudnn);
    if (s != CUDNN_STATUS_SUCCESS) {
        impl->cudnn = NULL;
        return cnn_set_error(CNN_ERR_UNAVAILABLE, "cuDNN could not start on this machine: %s",
                             cudnnGetErrorString(s));
    }
    CNN_CUDNN_TRY(cudnnSetStream(impl->cudnn, impl->base.stream), "cudnnSetStream");
    cublasStatus_t b = cublasCreate(&impl->cublas);
    if (b != CUBLAS_STATUS_SUCCESS) {
        impl->cublas = NULL;
        return cnn_cublas_status(b, "cublasCreate");
    }
    CNN_CUBLAS_TRY(cublasSetStream(impl->cublas, impl->base.stream), "cublasSetStream");
    // cuBLAS's workspace is ours, made once, so no call of it allocates
    CNN_CUDA_TRY(cudaMalloc(&impl->cublas_workspace, CUBLAS_WORKSPACE_BYTES), "cuBLAS workspace");
    CNN_CUBLAS_TRY(cublasSetWorkspace(impl->cublas, impl->cublas_workspace, CUBLAS_WORKSPACE_BYTES),
                   "cublasSetWorkspace");
    CNN_CUDNN_TRY(cudnnCreateTensorDescriptor(&impl->t0), "descriptors");
    CNN_CUDNN_TRY(cudnnCreateTensorDescriptor(&impl->t1), "descriptors");
    CNN_CUDNN_TRY(cudnnCreateActivationDescriptor(&impl->act), "descriptors");
    return CNN_OK;
}

cnn_status cudnn_ctx_create(cnn_ctx **out, int num_threads, int device)
{
    cnn_ctx *ctx = (cnn_ctx *)calloc(1, sizeof *ctx);
    cnn_cudnn_impl *impl = (cnn_cudnn_impl *)calloc(1, sizeof *impl);
    if (!ctx || !impl) {
        free(ctx);
        free(impl);
        return cnn_set_error(CNN_ERR_MEMORY, "out of host memory creating a cudnn context");
    }
    cnn_status st = cnn_cuda_impl_init(&impl->base, device);
    if (st != CNN_OK) {
        free(ctx);
        free(impl);
        return st;
    }
    st = setup(impl);
    if (st != CNN_OK) {
        release(impl, 1);
        free(ctx);
        return st;
    }
    ctx->backend = &cnn_backend_cudnn;
    ctx->num_threads = num_threads;
    ctx->device = device;
    ctx->impl = impl;
    *out = ctx;
    return CNN_OK;
}

void cudnn_ctx_destroy(cnn_ctx *ctx)
{
    if (!ctx) return;
    if (ctx->impl) release((cnn_cudnn_impl *)ctx->impl, 1);
    free(ctx);
}

} // namespace

// The ReLU fusions only: its dense layers are cuBLAS's (no dense_forward_relu
// or activation_backward_bias), its convolutions cuDNN's, which take no column
// matrix (no conv2d_forward_col or gather_batch_im2col) and give no data
// gradient into a pool (no conv2d_backward_data_pool), its softmax cuDNN's
// (no softmax_loss_forward_backward); dense_loss_head was tried: its 20-step
// CIFAR run left the reference's 5% band, so cuBLAS stays there.
extern "C" const cnn_fused_ops cnn_cudnn_fused = {
    .conv2d_forward_relu = cudnn_conv2d_forward_relu,
    .pool_backward_relu = cuda_pool_backward_relu,
};

// The cuda engine's table with the cuDNN and cuBLAS entries in place of its
// own (constant-initialized, in declaration order, as the cuda table).
extern "C" const cnn_backend cnn_backend_cudnn = {
    .name = "cudnn",
    .ctx_create = cudnn_ctx_create,
    .ctx_destroy = cudnn_ctx_destroy,
    .activate = cuda_activate,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .zero = cuda_zero,
    .synchronize = cuda_synchronize,
    .copy = cuda_copy,
    .nchw_from_nhwc = cuda_nchw_from_nhwc,
    .nhwc_from_nchw = cuda_nhwc_from_nchw,
    .upload_samples = cuda_upload_samples,
    .conv2d_workspace = cudnn_conv2d_workspace,
    .conv2d_forward = cudnn_conv2d_forward,
    .conv2d_backward_data = cudnn_conv2d_backward_data,
    .conv2d_backward_filter = cudnn_conv2d_backward_filter,
    .pool_forward = cuda_pool_forward,
    .pool_backward = cuda_pool_backward,
    .dense_forward = cublas_dense_forward,
    .dense_backward_data = cublas_dense_backward_data,
    .dense_backward_filter = cublas_dense_backward_filter,
    .activation_forward = cudnn_activation_forward,
    .activation_backward = cudnn_activation_backward,
    .elementwise_forward = cuda_elementwise_forward,
    .elementwise_backward = cuda_elementwise_backward,
    .prelu_forward = cuda_prelu_forward,
    .prelu_backward = cuda_prelu_backward,
    .add = cuda_add,
    .concat_forward = cuda_concat_forward,
    .concat_backward = cuda_concat_backward,
    .dropout_forward = cuda_dropout_forward,
    .dropout_backward = cuda_dropout_backward,
    .random_flip = cuda_random_flip,
    .random_affine = cuda_random_affine,
    .random_contrast = cuda_random_contrast,
    .random_crop = cuda_random_crop,
    .spatial_dropout_forward = cuda_spatial_dropout_forward,
    .spatial_dropout_backward = cuda_spatial_dropout_backward,
    .rescale = cuda_rescale,
    .reshape = cuda_reshape,
    .pad2d = cuda_pad2d,
    .upsample_forward = cuda_upsample_forward,
    .upsample_backward = cuda_upsample_backward,
    .upsample_bilinear_forward = cuda_upsample_bilinear_forward,
    .upsample_bilinear_backward = cuda_upsample_bilinear_backward,
    .batchnorm_forward_train = cuda_batchnorm_forward_train,
    .batchnorm_forward_infer = cuda_batchnorm_forward_infer,
    .batchnorm_backward = cuda_batchnorm_backward,
    .batchnorm_backward_infer = cuda_batchnorm_backward_infer,
    .batchnorm_infer_stats = cuda_batchnorm_infer_stats,
    .regularize = cuda_regularize,
    .loss_forward_backward = cuda_loss_forward_backward,
    .gather_batch = cuda_gather_batch,
    .advance_counters = cuda_advance_counters,
    .adam_step = cuda_adam_step,
    .sgd_step = cuda_sgd_step,
    .rmsprop_step = cuda_rmsprop_step,
    .adagrad_step = cuda_adagrad_step,
    .adadelta_step = cuda_adadelta_step,
    .adamax_step = cuda_adamax_step,
    .nadam_step = cuda_nadam_step,
    .adamw_step = cuda_adamw_step,
    .loss_scale = cuda_loss_scale,
    .loss_unscale = cuda_loss_unscale,
    .loss_scale_update = cuda_loss_scale_update,
    .capture_begin = cuda_capture_begin,
    .capture_end = cuda_capture_end,
    .replay = cuda_replay,
    .recording_free = cuda_recording_free,
    .timer_mark = cuda_timer_mark,
    .timer_elapsed = cuda_timer_elapsed,
    .fused = &cnn_cudnn_fused,
    .input_slice = cuda_input_slice,
    .labels_from_floats = cuda_labels_from_floats,
    .regression_loss_forward_backward = cuda_regression_loss_forward_backward,
};

// The versions of the cuDNN and cuBLAS libraries loaded (cudnnGetVersion's
// number, e.g. 91400; cuBLAS as 10000*major + 100*minor + patch).
extern "C" void cnn_cudnn_library_versions(long *cudnn, long *cublas)
{
    *cudnn = (long)cudnnGetVersion();
    int major = 0, minor = 0, patch = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
        cublasGetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
        cublasGetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS)
        *cublas = 0;
    else
        *cublas = 10000L * major + 100L * minor + patch;
}
