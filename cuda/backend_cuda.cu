// backend_cuda.cu: the cuda engine's table and context: device memory, one
// stream per Net, every kernel written in this folder.
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "../csrc/switches.h"

// The stream and split-K scratch of a context on CUDA device `device`
// (shared with cudnn). Leaves `device` current on the calling thread: the
// Net allocates its buffers right after, on the current device.
cnn_status cnn_cuda_impl_init(cnn_cuda_impl *impl, int device)
{
    int count = 0;
    CNN_CUDA_TRY(cudaGetDeviceCount(&count), "looking for a CUDA GPU");
    if (count < 1) return cnn_set_error(CNN_ERR_UNAVAILABLE, "no CUDA GPU found");
    if (device < 0 || device >= count)
        return cnn_set_error(CNN_ERR_VALUE, "device: expected a CUDA device index in [0, %d), got %d",
                             count, device);
    CNN_CUDA_TRY(cudaSetDevice(device), "selecting the context's GPU");
    impl->device = device;
    int major = 0;
    cudaError_t err =
        cudaDeviceGetAttribute(&impl->sm_count, cudaDevAttrMultiProcessorCount, impl->device);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, impl->device);
    impl->tensor_cores = major >= 8;
    if (err == cudaSuccess) err = cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking);
    if (err == cudaSuccess) {
        err = cudaMalloc((void **)&impl->scratch, CNN_CUDA_SCRATCH_FLOATS * sizeof(float));
        if (err != cudaSuccess) cudaStreamDestroy(impl->stream);
    }
    if (err == cudaSuccess) {
        err = cudaMalloc((void **)&impl->meet, sizeof(cnn_cuda_meet));
        // on the stream (non-blocking: a plain cudaMemset would not be
        // ordered before its kernels)
        if (err == cudaSuccess)
            err = cudaMemsetAsync(impl->meet, 0, sizeof(cnn_cuda_meet), impl->stream);
        if (err != cudaSuccess) {
            cudaFree(impl->meet); // NULL or the failed memset's block
            impl->meet = NULL;
            cudaFree(impl->scratch);
            cudaStreamDestroy(impl->stream);
        }
    }
    if (err != cudaSuccess) return cnn_cuda_status(err, "creating a cuda context");
    impl->scratch_floats = CNN_CUDA_SCRATCH_FLOATS;
    return CNN_OK;
}

// Called with impl->device current (see cnn_cuda_device_enter).
void cnn_cuda_impl_fini(cnn_cuda_impl *impl)
{
    cudaStreamSynchronize(impl->stream);
    cnn_cuda_uploader_free(impl);
    for (int i = 0; i < CNN_TIMER_MARKS; i++)
        if (impl->marks[i]) cudaEventDestroy(impl->marks[i]);
    cudaFree(impl->scratch);
    cudaFree(impl->meet);
    cudaStreamDestroy(impl->stream);
}

// A context may be destroyed from a thread whose current device is another
// one (Python frees a Net wherever its last reference goes): the stream,
// handles and memory must be released on their own device, and the
// caller's device is given back afterwards. Returns the caller's device.
int cnn_cuda_device_enter(int device)
{
    int previous = device;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = device;
    if (previous != device) cudaSetDevice(device);
    cudaGetLastError(); // nothing to report from a destroy: leave no error behind
    return previous;
}

void cnn_cuda_device_leave(int previous, int device)
{
    if (previous != device) cudaSetDevice(previous);
    cudaGetLastError();
}

// The activate entry of both GPU tables: the context's device becomes the
// calling thread's current one, so every later runtime call (allocations
// included) lands on it.
cnn_status cuda_activate(cnn_ctx *ctx)
{
    const cnn_cuda_impl *impl = (const cnn_cuda_impl *)ctx->impl;
    CNN_CUDA_TRY(cudaSetDevice(impl->device), "making the context's GPU current");
    return CNN_OK;
}

namespace {

cnn_status cuda_ctx_create(cnn_ctx **out, int num_threads, int device)
{
    cnn_switches sw;
    CNN_TRY(cnn_switches_read(&sw));
    const int early = sw.early_launch;
    cnn_ctx *ctx = (cnn_ctx *)calloc(1, sizeof *ctx);
    cnn_cuda_impl *impl = (cnn_cuda_impl *)calloc(1, sizeof *impl);
    if (!ctx || !impl) {
        free(ctx);
        free(impl);
        return cnn_set_error(CNN_ERR_MEMORY, "out of host memory creating a cuda context");
    }
    cnn_status st = cnn_cuda_impl_init(impl, device);
    if (st != CNN_OK) {
        free(ctx);
        free(impl);
        return st;
    }
    // Only this engine: every kernel it records is one of ours and starts
    // with cnn_kernel_begin (the cudnn engine's recordings hold library
    // kernels that do not wait for the kernel before them).
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    impl->early_launch = major >= 9 && early;
    ctx->backend = &cnn_backend_cuda;
    ctx->num_threads = num_threads;
    ctx->device = device;
    ctx->impl = impl;
    *out = ctx;
    return CNN_OK;
}

void cuda_ctx_destroy(cnn_ctx *ctx)
{
    if (!ctx) return;
    cnn_cuda_impl *impl = (cnn_cuda_impl *)ctx->impl;
    if (impl) {
        const int previous = cnn_cuda_device_enter(impl->device);
        cnn_cuda_impl_fini(impl);
        cnn_cuda_device_leave(previous, impl->device);
        free(impl);
    }
    free(ctx);
}

} // namespace

// Memory: shared with the cudnn table.
cnn_status cuda_alloc(cnn_ctx *ctx, void **p, size_t bytes)
{
    (void)ctx;
    *p = NULL;
    cudaError_t err = cudaMalloc(p, bytes ? bytes : 4);
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        *p = NULL;
        return cnn_set_error(CNN_ERR_MEMORY, "CUDA out of memory: could not allocate %zu bytes",
                             bytes);
    }
    return cnn_cuda_status(err, "cudaMalloc");
}

void cuda_free(cnn_ctx *ctx, void *p)
{
    (void)ctx;
    if (p) cudaFree(p);
}

cnn_status cuda_upload(cnn_ctx *ctx, void *dst, const void *host_src, size_t bytes)
{
    if (!bytes) return CNN_OK;
    CNN_CUDA_TRY(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, cnn_stream(ctx)),
                 "upload to the GPU");
    return CNN_OK;
}

cnn_status cuda_download(cnn_ctx *ctx, void *host_dst, const void *src, size_t bytes)
{
    if (!bytes) return CNN_OK;
    CNN_CUDA_TRY(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, cnn_stream(ctx)),
                 "download from the GPU");
    CNN_CUDA_TRY(cudaStreamSynchronize(cnn_stream(ctx)), "download from the GPU");
    return CNN_OK;
}

cnn_status cuda_zero(cnn_ctx *ctx, void *p, size_t bytes)
{
    if (!bytes) return CNN_OK;
    CNN_CUDA_TRY(cudaMemsetAsync(p, 0, bytes, cnn_stream(ctx)), "cudaMemset");
    return CNN_OK;
}

cnn_status cuda_synchronize(cnn_ctx *ctx)
{
    CNN_CUDA_TRY(cudaStreamSynchronize(cnn_stream(ctx)), "synchronize");
    return CNN_OK;
}

cnn_status cuda_copy(cnn_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    if (!bytes) return CNN_OK;
    CNN_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cnn_stream(ctx)),
                 "copy on the GPU");
    return CNN_OK;
}

// The fused ops (backend_table.h), constant-initialized as the table.
extern "C" const cnn_fused_ops cnn_cuda_fused = {
    .conv2d_forward_relu = cuda_conv2d_forward_relu,
    .pool_backward_relu = cuda_pool_backward_relu,
    .dense_forward_relu = cuda_dense_forward_relu,
    .activation_backward_bias = cuda_activation_backward_bias,
    .conv2d_backward_data_pool = cuda_conv2d_backward_data_pool,
    .conv2d_forward_col = cuda_conv2d_forward_col,
    .softmax_loss_forward_backward = cuda_softmax_loss_forward_backward,
    .dense_loss_head = cuda_dense_loss_head,
    // a step's gather writes the first convolution's column matrix
    .gather_batch_im2col = cuda_gather_batch_im2col,
};

// Designated initializers in declaration order: a constant initialization,
// so the table is complete before any other file's static initializers run.
extern "C" const cnn_backend cnn_backend_cuda = {
    .name = "cuda",
    .ctx_create = cuda_ctx_create,
    .ctx_destroy = cuda_ctx_destroy,
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
    .conv2d_workspace = cuda_conv2d_workspace,
    .conv2d_forward = cuda_conv2d_forward,
    .conv2d_backward_data = cuda_conv2d_backward_data,
    .conv2d_backward_filter = cuda_conv2d_backward_filter,
    .pool_forward = cuda_pool_forward,
    .pool_backward = cuda_pool_backward,
    .dense_forward = cuda_dense_forward,
    .dense_backward_data = cuda_dense_backward_data,
    .dense_backward_filter = cuda_dense_backward_filter,
    .activation_forward = cuda_activation_forward,
    .activation_backward = cuda_activation_backward,
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
    .fused = &cnn_cuda_fused,
    .input_slice = cuda_input_slice,
    .labels_from_floats = cuda_labels_from_floats,
    .regression_loss_forward_backward = cuda_regression_loss_forward_backward,
};
