// cublas_dense.cu: dense layers through cuBLAS. cuBLAS is column-major; a
// row-major (r, c) matrix is its column-major transpose, so each product is
// written for the transposes:
//   forward          y^T (out, n) = w^T (out, in) x^T (in, n), then y += b
//   backward data    dx^T (in, n) = w (in, out) dy^T (out, n)
//   backward filter  dw^T (out, in) = dy^T (out, n) x (n, in);  db = column sums of dy
// Strict float32 (CUBLAS_DEFAULT_MATH never uses TF32 for SGEMM) unless the
// Net asked for another precision: tf32 CUBLAS_TF32_TENSOR_OP_MATH; bf16 and
// fp16 cublasGemmEx on float matrices with the compute types
// CUBLAS_COMPUTE_32F_FAST_16BF / _FAST_16F (operands converted to bfloat16 /
// float16 for tensor cores, float32 sums).
#include "cudnn_common.cuh"

namespace {

__global__ void add_bias_kernel(int n, int out, const float *__restrict__ b, float *__restrict__ y)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(o, (size_t)n * out) y[o] += b[o % out];
}

cnn_status gemm(cnn_ctx *ctx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                const float *a, int lda, const float *b, int ldb, float *c, int ldc)
{
    cublasHandle_t h = cnn_cudnn(ctx)->cublas;
    const float one = 1.0f, zero = 0.0f;
    if (ctx->precision == CNN_PRECISION_BF16 || ctx->precision == CNN_PRECISION_FP16) {
        CNN_CUBLAS_TRY(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cuBLAS math mode");
        const cublasComputeType_t compute = ctx->precision == CNN_PRECISION_BF16
                                                ? CUBLAS_COMPUTE_32F_FAST_16BF
                                                : CUBLAS_COMPUTE_32F_FAST_16F;
        CNN_CUBLAS_TRY(cublasGemmEx(h, ta, tb, m, n, k, &one, a, CUDA_R_32F, lda, b, CUDA_R_32F,
                                    ldb, &zero, c, CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT),
                       "cublasGemmEx");
        return CNN_OK;
    }
    CNN_CUBLAS_TRY(cublasSetMathMode(h, ctx->precision == CNN_PRECISION_TF32
                                            ? CUBLAS_TF32_TENSOR_OP_MATH
                                            : CUBLAS_DEFAULT_MATH),
                   "cuBLAS math mode");
    CNN_CUBLAS_TRY(cublasSgemm(h, ta, tb, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc),
                   "cublasSgemm");
    return CNN_OK;
}

} // namespace

cnn_status cublas_dense_forward(cnn_ctx *ctx, int n, int in, int out, const float *x,
                                const float *w, const float *b, float *y)
{
    if (n <= 0 || out <= 0) return CNN_OK;
    CNN_TRY(gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_N, out, n, in, w, out, x, in, y, out));
    if (b) {
        add_bias_kernel<<<cnn_blocks((size_t)n * out, CNN_THREADS), CNN_THREADS, 0,
                          cnn_stream(ctx)>>>(n, out, b, y);
        CNN_CUDA_LAUNCHED("dense bias");
    }
    return CNN_OK;
}

cnn_status cublas_dense_backward_data(cnn_ctx *ctx, int n, int in, int out, const float *dy,
                                      const float *w, float *dx)
{
    if (n <= 0 || in <= 0) return CNN_OK;
    return gemm(ctx, CUBLAS_OP_T, CUBLAS_OP_N, in, n, out, w, out, dy, out, dx, in);
}

cnn_status cublas_dense_backward_filter(cnn_ctx *ctx, int n, int in, int out, const float *x,
                                        const float *dy, float *dw, float *db)
{
    if (in <= 0 || out <= 0) return CNN_OK;
    CNN_TRY(gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_T, out, in, n, dy, out, x, in, dw, out));
    if (db) CNN_TRY(cnn_cuda_column_sums(ctx, n, out, dy, db));
    return CNN_OK;
}
