// gemm.cu: the cuda engine's own SGEMM (no cuBLAS in this engine).
//
// C (m, n) = alpha op(A) op(B) + beta C, all row-major; op(A) is (m, k),
// op(B) is (k, n); trans_a means A is stored (k, m), trans_b that B is (n, k).
// One block computes a 64x64 tile of C with 256 threads, each owning a 4x4
// grid of outputs (rows ty + 16 r, columns tx + 16 c); the K dimension goes
// through shared memory 16 at a time. Tiles at the edges load zeros past the
// matrix and store only inside it. beta == 0 never reads C.
//
// Split-K: when C has too few tiles to fill the GPU and K is long (the
// convolution's filter gradient: a 32x27 result summed over 28,800 columns;
// a dense layer of batch 32: a 32x64 result summed over 1,024 inputs),
// blockIdx.z takes one slice of K and writes its partial tile to scratch;
// a second kernel adds the slices in a fixed order (deterministic) into C.
#include "cuda_common.cuh"

namespace {

constexpr int BM = 64, BN = 64, BK = 16, TPB = 256;

// C tile over k in [k_begin, k_end) with k_begin = blockIdx.z * k_slice; with
// partial != NULL the tile goes to partial[z] (m, n) instead of C.
template <bool TRANS_A, bool TRANS_B>
__global__ void __launch_bounds__(TPB)
sgemm_tile(int m, int n, int k, int k_slice, float alpha, const float *__restrict__ a, int lda,
           const float *__restrict__ b, int ldb, float beta, float *__restrict__ c, int ldc,
           float *__restrict__ partial)
{
    __shared__ float as[BK][BM + 4]; // as[kk][i] = op(A)(row0 + i, k0 + kk)
    __shared__ float bs[BK][BN + 4]; // bs[kk][j] = op(B)(k0 + kk, col0 + j)
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[4][4] = {};
    const int k_begin = blockIdx.z * k_slice;
    const int k_end = min(k, k_begin + k_slice);

    for (int k0 = k_begin; k0 < k_end; k0 += BK) {
        // each thread loads 4 elements of each tile; the index order follows
        // the stored layout so that a warp reads consecutive addresses
#pragma unroll
        for (int q = 0; q < (BM * BK) / TPB; ++q) {
            const int l = tid + q * TPB;
            int i, kk;
            if (TRANS_A) { i = l % BM; kk = l / BM; } // A (k, m): contiguous in i
            else { kk = l % BK; i = l / BK; }         // A (m, k): contiguous in kk
            const int gi = row0 + i, gk = k0 + kk;
            float v = 0.0f;
            if (gi < m && gk < k_end) v = TRANS_A ? a[(size_t)gk * lda + gi] : a[(size_t)gi * lda + gk];
            as[kk][i] = v;
        }
#pragma unroll
        for (int q = 0; q < (BN * BK) / TPB; ++q) {
            const int l = tid + q * TPB;
            int j, kk;
            if (TRANS_B) { kk = l % BK; j = l / BK; } // B (n, k): contiguous in kk
            else { j = l % BN; kk = l / BN; }         // B (k, n): contiguous in j
            const int gj = col0 + j, gk = k0 + kk;
            float v = 0.0f;
            if (gj < n && gk < k_end) v = TRANS_B ? b[(size_t)gj * ldb + gk] : b[(size_t)gk * ldb + gj];
            bs[kk][j] = v;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float ar[4], br[4];
#pragma unroll
            for (int r = 0; r < 4; ++r) ar[r] = as[kk][ty + 16 * r];
#pragma unroll
            for (int s = 0; s < 4; ++s) br[s] = bs[kk][tx + 16 * s];
#pragma unroll
            for (int r = 0; r < 4; ++r)
#pragma unroll
                for (int s = 0; s < 4; ++s) acc[r][s] = fmaf(ar[r], br[s], acc[r][s]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const int gi = row0 + ty + 16 * r;
        if (gi >= m) continue;
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            const int gj = col0 + tx + 16 * s;
            if (gj >= n) continue;
            if (partial) {
                partial[((size_t)blockIdx.z * m + gi) * n + gj] = alpha * acc[r][s];
                continue;
            }
            float *out = c + (size_t)gi * ldc + gj;
            *out = beta == 0.0f ? alpha * acc[r][s] : alpha * acc[r][s] + beta * *out;
        }
    }
}

// C (m, n) = sum over the slices of partial (slices, m, n) + beta C.
__global__ void sum_slices(int m, int n, int slices, const float *__restrict__ partial,
                           float beta, float *__restrict__ c, int ldc)
{
    CNN_GRID_LOOP(t, (size_t)m * n) {
        float sum = 0.0f;
        for (int z = 0; z < slices; ++z) sum += partial[(size_t)z * m * n + t];
        float *out = c + (t / n) * ldc + t % n;
        *out = beta == 0.0f ? sum : sum + beta * *out;
    }
}

} // namespace

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
