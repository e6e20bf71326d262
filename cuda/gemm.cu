// gemm.cu: the cuda engine's own SGEMM (no cuBLAS in this engine).
//
// C (m, n) = alpha op(A) op(B) + beta C, all row-major: the kernels, a
// 64x64-tile shared-memory SGEMM and the sum of split-K slices, are in
// gemm_kernels.cuh (shared with dev/cuda/); this file plans and launches them.
//
// Split-K: when C has too few tiles to fill the GPU and K is long (the
// convolution's filter gradient: a 32x27 result summed over 28,800 columns;
// a dense layer of batch 32: a 32x64 result summed over 1,024 inputs),
// blockIdx.z takes one slice of K and writes its partial tile to scratch;
// a second kernel adds the slices in a fixed order (deterministic) into C.
#include "gemm_kernels.cuh"

using namespace cnn_gemm;

cnn_status cnn_cuda_sgemm(cnn_ctx *ctx, int trans_a, int trans_b, int m, int n, int k,
                          float alpha, const float *a, int lda, const float *b, int ldb,
                          float beta, float *c, int ldc)
{
    if (m <= 0 || n <= 0) return CNN_OK;
    if (m > 65535 * BM)
        return cnn_set_error(CNN_ERR_VALUE, "sgemm: m = %d rows is too many for one grid", m);
    const cnn_cuda_impl *impl = (const cnn_cuda_impl *)ctx->impl;
    const int tiles = ((n + BN - 1) / BN) * ((m + BM - 1) / BM);
    // slices of K: enough blocks for two waves over the SMs, at least 64
    // columns of K per slice, and partial sums that fit the scratch
    int slices = 1;
    if (tiles < 2 * impl->sm_count && k >= 256) {
        slices = (2 * impl->sm_count + tiles - 1) / tiles;
        slices = min(slices, k / 64);
        slices = (int)min((size_t)slices, impl->scratch_floats / ((size_t)m * n));
        if (slices < 1) slices = 1;
    }
    int k_slice = (k + slices - 1) / slices;
    k_slice = (k_slice + BK - 1) / BK * BK;
    slices = k > 0 ? (k + k_slice - 1) / k_slice : 1;
    float *partial = slices > 1 ? impl->scratch : nullptr;
    dim3 grid((n + BN - 1) / BN, (m + BM - 1) / BM, slices);
    cudaStream_t st = cnn_stream(ctx);
#define CNN_SGEMM_ARGS m, n, k, k_slice, alpha, a, lda, b, ldb, beta, c, ldc, partial
    if (!trans_a && !trans_b)
        sgemm_tile<false, false><<<grid, TPB, 0, st>>>(CNN_SGEMM_ARGS);
    else if (trans_a && !trans_b)
        sgemm_tile<true, false><<<grid, TPB, 0, st>>>(CNN_SGEMM_ARGS);
    else if (!trans_a && trans_b)
        sgemm_tile<false, true><<<grid, TPB, 0, st>>>(CNN_SGEMM_ARGS);
    else
        sgemm_tile<true, true><<<grid, TPB, 0, st>>>(CNN_SGEMM_ARGS);
#undef CNN_SGEMM_ARGS
    CNN_CUDA_LAUNCHED("sgemm");
    if (slices > 1) {
        sum_slices<<<cnn_blocks((size_t)m * n, CNN_THREADS), CNN_THREADS, 0, st>>>(
            m, n, slices, partial, beta, c, ldc);
        CNN_CUDA_LAUNCHED("sgemm split-k sum");
    }
    return CNN_OK;
}
