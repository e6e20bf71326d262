// backend_cuda.cu: the cuda engine's table and context: device memory, one
// stream per Net, every kernel written in this folder.
#include <stdlib.h>

#include "cuda_common.cuh"
#include "cuda_ops.h"

namespace {

cnn_status cuda_ctx_create(cnn_ctx **out, int num_threads)
{
    int count = 0;
    CNN_CUDA_TRY(cudaGetDeviceCount(&count), "looking for a CUDA GPU");
    if (count < 1) return cnn_set_error(CNN_ERR_UNAVAILABLE, "no CUDA GPU found");
    cnn_ctx *ctx = (cnn_ctx *)calloc(1, sizeof *ctx);
    cnn_cuda_impl *impl = (cnn_cuda_impl *)calloc(1, sizeof *impl);
    if (!ctx || !impl) {
        free(ctx);
        free(impl);
        return cnn_set_error(CNN_ERR_MEMORY, "out of host memory creating a cuda context");
    }
    cudaError_t err = cudaGetDevice(&impl->device);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&impl->sm_count, cudaDevAttrMultiProcessorCount, impl->device);
    if (err == cudaSuccess) err = cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking);
    if (err == cudaSuccess) {
        err = cudaMalloc((void **)&impl->scratch, CNN_CUDA_SCRATCH_FLOATS * sizeof(float));
        if (err != cudaSuccess) cudaStreamDestroy(impl->stream);
    }
    if (err != cudaSuccess) {
        free(ctx);
        free(impl);
        return cnn_cuda_status(err, "creating a cuda context");
    }
    impl->scratch_floats = CNN_CUDA_SCRATCH_FLOATS;
    ctx->backend = &cnn_backend_cuda;
    ctx->num_threads = num_threads;
    ctx->impl = impl;
    *out = ctx;
    return CNN_OK;
}

void cuda_ctx_destroy(cnn_ctx *ctx)
{
    if (!ctx) return;
    cnn_cuda_impl *impl = (cnn_cuda_impl *)ctx->impl;
    if (impl) {
        cudaStreamSynchronize(impl->stream);
        cudaFree(impl->scratch);
        cudaStreamDestroy(impl->stream);
        free(impl);
    }
    free(ctx);
}

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

cnn_backend make_table()
{
    cnn_backend t = {};
    t.name = "cuda";
    t.ctx_create = cuda_ctx_create;
    t.ctx_destroy = cuda_ctx_destroy;
    t.alloc = cuda_alloc;
    t.free = cuda_free;
    t.upload = cuda_upload;
    t.download = cuda_download;
    t.zero = cuda_zero;
    t.synchronize = cuda_synchronize;
    t.nchw_from_nhwc = cuda_nchw_from_nhwc;
    t.nhwc_from_nchw = cuda_nhwc_from_nchw;
    t.conv2d_workspace = cuda_conv2d_workspace;
    t.conv2d_forward = cuda_conv2d_forward;
    t.conv2d_backward_data = cuda_conv2d_backward_data;
    t.conv2d_backward_filter = cuda_conv2d_backward_filter;
    t.pool_forward = cuda_pool_forward;
    t.pool_backward = cuda_pool_backward;
    t.dense_forward = cuda_dense_forward;
    t.dense_backward_data = cuda_dense_backward_data;
    t.dense_backward_filter = cuda_dense_backward_filter;
    t.activation_forward = cuda_activation_forward;
    t.activation_backward = cuda_activation_backward;
    t.dropout_forward = cuda_dropout_forward;
    t.dropout_backward = cuda_dropout_backward;
    t.batchnorm_forward_train = cuda_batchnorm_forward_train;
    t.batchnorm_forward_infer = cuda_batchnorm_forward_infer;
    t.batchnorm_backward = cuda_batchnorm_backward;
    t.loss_forward_backward = cuda_loss_forward_backward;
    t.gather_rows = cuda_gather_rows;
    t.adam_step = cuda_adam_step;
    t.sgd_step = cuda_sgd_step;
    return t;
}

} // namespace

extern "C" const cnn_backend cnn_backend_cuda = make_table();
