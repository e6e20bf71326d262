// cudnn_common.cuh: the cudnn engine's context and status checks. Its impl
// starts with the cuda engine's, so every cuda kernel the table keeps finds
// its stream and scratch where it expects them.
#ifndef CNN_CUDNN_COMMON_CUH
#define CNN_CUDNN_COMMON_CUH

#include <cublas_v2.h>
#include <cudnn.h>

#include "cuda_common.cuh"

// One convolution shape's descriptors and chosen algorithms, made on first
// use and kept for the context's life; each direction's algorithm is chosen
// on that direction's first call (cudnn_algo.cu), bit dir of chosen.
enum { CNN_CUDNN_FWD = 0, CNN_CUDNN_BWD_DATA = 1, CNN_CUDNN_BWD_FILTER = 2 };

// The backward-filter "algorithm" that is ours: the cuda engine's im2col and
// deterministic split-K SGEMM (cuda_conv2d_backward_filter_from_x), a
// candidate beside cuDNN's where measured.
#define CNN_CUDNN_ALGO_OURS 64

struct cnn_cudnn_conv {
    cnn_conv_desc key;
    int precision; // cnn_precision: the math type it was made with
    int chosen;
    int filter_ours; // the backward filter is CNN_CUDNN_ALGO_OURS
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws_fwd, ws_bwd_data, ws_bwd_filter; // bytes each algorithm uses
};

#define CNN_CUDNN_MAX_CONVS 64

// How algorithms are chosen (CNNCUDA_CUDNN_ALGO; cudnn_algo.cu).
enum {
    CNN_CUDNN_ALGO_MEASURED = 0,
    CNN_CUDNN_ALGO_HEURISTIC = 1,
    CNN_CUDNN_ALGO_NONDETERMINISTIC = 2
};

struct cnn_cudnn_impl {
    cnn_cuda_impl base; // first: cuda kernels cast impl to cnn_cuda_impl
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    void *cublas_workspace;
    cudnnTensorDescriptor_t t0, t1; // re-set per call for elementwise ops
    cudnnActivationDescriptor_t act;
    cnn_cudnn_conv convs[CNN_CUDNN_MAX_CONVS];
    int n_convs;
    // switches (switches.h) read when the context was made:
    int algo_mode; // CNN_CUDNN_ALGO_* (CNNCUDA_CUDNN_ALGO)
    int own_wgrad; // CNNCUDA_CUDNN_OWN_WGRAD: -1 a measured candidate, 0 never, 1 always
    int verbose;   // CNNCUDA_CUDNN_VERBOSE: each measured choice printed to stderr
};

static inline cnn_cudnn_impl *cnn_cudnn(cnn_ctx *ctx) { return (cnn_cudnn_impl *)ctx->impl; }

static inline cnn_status cnn_cudnn_status(cudnnStatus_t st, const char *what)
{
    if (st == CUDNN_STATUS_SUCCESS) return CNN_OK;
    if (st == CUDNN_STATUS_ALLOC_FAILED)
        return cnn_set_error(CNN_ERR_MEMORY, "%s: cuDNN could not allocate memory (%s)", what,
                             cudnnGetErrorString(st));
    return cnn_set_error(CNN_ERR_DEVICE, "%s: cuDNN error %d: %s", what, (int)st,
                         cudnnGetErrorString(st));
}

static inline cnn_status cnn_cublas_status(cublasStatus_t st, const char *what)
{
    if (st == CUBLAS_STATUS_SUCCESS) return CNN_OK;
    if (st == CUBLAS_STATUS_ALLOC_FAILED)
        return cnn_set_error(CNN_ERR_MEMORY, "%s: cuBLAS could not allocate memory (%s)", what,
                             cublasGetStatusString(st));
    return cnn_set_error(CNN_ERR_DEVICE, "%s: cuBLAS error %d: %s", what, (int)st,
                         cublasGetStatusString(st));
}

#define CNN_CUDNN_TRY(call, what)                                   \
    do {                                                            \
        cnn_status cnn_dnn_s_ = cnn_cudnn_status((call), (what));   \
        if (cnn_dnn_s_ != CNN_OK) return cnn_dnn_s_;                \
    } while (0)

#define CNN_CUBLAS_TRY(call, what)                                  \
    do {                                                            \
        cnn_status cnn_blas_s_ = cnn_cublas_status((call), (what)); \
        if (cnn_blas_s_ != CNN_OK) return cnn_blas_s_;              \
    } while (0)

// cudnn_conv2d.cu
cnn_conv2d_workspace_fn cudnn_conv2d_workspace;
cnn_conv2d_forward_fn cudnn_conv2d_forward, cudnn_conv2d_forward_relu;
cnn_conv2d_backward_data_fn cudnn_conv2d_backward_data;
cnn_conv2d_backward_filter_fn cudnn_conv2d_backward_filter;
void cnn_cudnn_release_convs(cnn_cudnn_impl *impl);

// cudnn_algo.cu
cnn_status cnn_cudnn_algo_settings(cnn_cudnn_impl *impl);
// Sets c's algorithm of direction dir (CNN_CUDNN_*) and its workspace size:
// the process's earlier choice for this shape, or one made now (measured on
// the layer's buffers: a, b the direction's inputs, out its output, which
// is overwritten; ws of ws_bytes the layer's workspace).
cnn_status cnn_cudnn_choose(cnn_ctx *ctx, cnn_cudnn_conv *c, int dir, const void *a,
                            const void *b, void *out, void *ws, size_t ws_bytes);

// cudnn_activation.cu
cnn_activation_forward_fn cudnn_activation_forward;
cnn_activation_backward_fn cudnn_activation_backward;

// cublas_dense.cu
cnn_dense_forward_fn cublas_dense_forward;
cnn_dense_backward_data_fn cublas_dense_backward_data;
cnn_dense_backward_filter_fn cublas_dense_backward_filter;

#endif
