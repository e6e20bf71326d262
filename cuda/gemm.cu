// gemm.cu: the cuda engine's own SGEMM (no cuBLAS in this engine).
//
// C (m, n) = alpha op(A) op(B) + beta C, all row-major; op(A) is (m, k),
// op(B) is (k, n); trans_a means A is stored (k, m), trans_b that B is (n, k).
// One block computes a 64x64 tile of C with 256 threads, each owning a 4x4
// grid of outputs (rows ty + 16 r, columns tx + 16 c); the K dimension goes
// through shared memory 16 at a time. Tiles at the edges load zeros past the
// matrix and store only inside it. beta == 0 never reads C.
#include "cuda_common.cuh"

namespace {

constexpr int BM = 64, BN = 64, BK = 16, TPB = 256;

template <bool TRANS_A, bool TRANS_B>
__global__ void __launch_bounds__(TPB)
sgemm_tile(int m, int n, int k, float alpha, const float *__restrict__ a, int lda,
           const float *__restrict__ b, int ldb, float beta, float *__restrict__ c, int ldc)
{
    __shared__ float as[BK][BM + 4]; // as[kk][i] = op(A)(row0 + i, k0 + kk)
    __shared__ float bs[BK][BN + 4]; // bs[kk][j] = op(B)(k0 + kk, col0 + j)
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[4][4] = {};

    for (int k0 = 0; k0 < k; k0 += BK) {
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
            if (gi < m && gk < k) v = TRANS_A ? a[(size_t)gk * lda + gi] : a[(size_t)gi * lda + gk];
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
            if (gj < n && gk < k) v = TRANS_B ? b[(size_t)gj * ldb + gk] : b[(size_t)gk * ldb + gj];
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
            float *out = c + (size_t)gi * ldc + gj;
            *out = beta == 0.0f ? alpha * acc[r][s] : alpha * acc[r][s] + beta * *out;
        }
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
    dim3 grid((n + BN - 1) / BN, (m + BM - 1) / BM);
    cudaStream_t st = cnn_stream(ctx);
    if (!trans_a && !trans_b)
        sgemm_tile<false, false><<<grid, TPB, 0, st>>>(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else if (trans_a && !trans_b)
        sgemm_tile<true, false><<<grid, TPB, 0, st>>>(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else if (!trans_a && trans_b)
        sgemm_tile<false, true><<<grid, TPB, 0, st>>>(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        sgemm_tile<true, true><<<grid, TPB, 0, st>>>(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    CNN_CUDA_LAUNCHED("sgemm");
    return CNN_OK;
}
