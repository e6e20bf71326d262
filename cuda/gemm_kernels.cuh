// gemm_kernels.cuh: the kernels of the cuda engine's SGEMM (gemm.cu), in a
// header so that the kernel-development programs (dev/cuda/sgemm.cu and the
// conv programs) launch the very kernels the engine runs. The host side (the
// split-K plan and the launches) stays in gemm.cu.
//
// C (m, n) = alpha op(A) op(B) + beta C, all row-major; op(A) is (m, k),
// op(B) is (k, n); trans_a means A is stored (k, m), trans_b that B is (n, k).
// One block computes a 64x64 tile of C with 256 threads, each owning a 4x4
// grid of outputs (rows ty + 16 r, columns tx + 16 c); the K dimension goes
// through shared memory 16 at a time. Tiles at the edges load zeros past the
// matrix and store only inside it. beta == 0 never reads C.
#ifndef CNN_GEMM_KERNELS_CUH
#define CNN_GEMM_KERNELS_CUH

#include "cuda_common.cuh"

namespace cnn_gemm {
namespace { // internal linkage: every .cu that includes this has its own copy

constexpr int BM = 64, BN = 64, BK = 16, TPB = 256;

// C tile over k in [k_begin, k_end) with k_begin = blockIdx.z * k_slice; with
// partial != NULL the tile goes to partial[z] (m, n) instead of C.
template <bool TRANS_A, bool TRANS_B>
__global__ void __launch_bounds__(TPB)
sgemm_tile(int m, int n, int k, int k_slice, float alpha, const float *__restrict__ a, int lda,
           const float *__restrict__ b, int ldb, float beta, float *__restrict__ c, int ldc,
           float *__restrict__ partial, cnn_sgemm_extra x = cnn_sgemm_extra{
                                                                0, 0, 0, nullptr, 0, 0, nullptr})
{
    cnn_kernel_begin();
    __shared__ float as[BK][BM + 4]; // as[kk][i] = op(A)(row0 + i, k0 + kk)
    __shared__ float bs[BK][BN + 4]; // bs[kk][j] = op(B)(k0 + kk, col0 + j)
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[4][4] = {};
    const int k_begin = blockIdx.z * k_slice;
    const int k_end = min(k, k_begin + k_slice);
    // B (k, n) not transposed: this thread's column j = tid % BN is the same
    // at every load (TPB is a multiple of BN), so its offset is found once
    size_t b_col = 0, b_row_step = (size_t)ldb;
    if (!TRANS_B) {
        const int gj = col0 + tid % BN;
        if (x.bp > 0) {
            const int img = gj / x.bp;
            b_col = (size_t)img * k * x.bp + (gj - img * x.bp);
            b_row_step = (size_t)x.bp;
        } else {
            b_col = (size_t)gj;
        }
    }

    // Each thread loads 4 elements of each tile per k step; the index order
    // follows the stored layout so that a warp reads consecutive addresses.
    // The next step's elements are loaded into registers while this step's
    // are multiplied from shared memory (the global loads' latency hidden
    // behind the multiply-adds; the same sums in the same order).
    float ra[(BM * BK) / TPB], rb[(BN * BK) / TPB];
    auto load = [&](int k0) {
        // A batched: column gk = k0 + tid % BK of op(A) is in image gk / P
        const int a_gk = k0 + tid % BK;
        size_t a_batched = 0; // offset of (row 0, column a_gk)
        if (!TRANS_A && x.ap > 0 && a_gk < k_end) {
            const int img = a_gk / x.ap;
            a_batched = (size_t)img * m * x.ap + (a_gk - img * x.ap);
        }
#pragma unroll
        for (int q = 0; q < (BM * BK) / TPB; ++q) {
            const int l = tid + q * TPB;
            int i, kk;
            if (TRANS_A) { i = l % BM; kk = l / BM; } // A (k, m): contiguous in i
            else { kk = l % BK; i = l / BK; }         // A (m, k): contiguous in kk
            const int gi = row0 + i, gk = k0 + kk;
            float v = 0.0f;
            if (gi < m && gk < k_end) {
                if (TRANS_A) v = a[(size_t)gk * lda + gi];
                else v = x.ap > 0 ? a[a_batched + (size_t)gi * x.ap] : a[(size_t)gi * lda + gk];
            }
            ra[q] = v;
        }
#pragma unroll
        for (int q = 0; q < (BN * BK) / TPB; ++q) {
            const int l = tid + q * TPB;
            int j, kk;
            if (TRANS_B) { kk = l % BK; j = l / BK; } // B (n, k): contiguous in kk
            else { j = l % BN; kk = l / BN; }         // B (k, n): contiguous in j
            const int gj = col0 + j, gk = k0 + kk;
            float v = 0.0f;
            if (gj < n && gk < k_end)
                v = TRANS_B ? b[(size_t)gj * ldb + gk] : b[b_col + (size_t)gk * b_row_step];
            else if (TRANS_B && x.row_sums && gj == n && gk < k_end)
                v = 1.0f; // the column of ones whose product is op(A)'s row sums
            rb[q] = v;
        }
    };
    if (k_begin < k_end) load(k_begin);
    for (int k0 = k_begin; k0 < k_end; k0 += BK) {
#pragma unroll
        for (int q = 0; q < (BM * BK) / TPB; ++q) {
            const int l = tid + q * TPB;
            if (TRANS_A) as[l / BM][l % BM] = ra[q];
            else as[l % BK][l / BK] = ra[q];
        }
#pragma unroll
        for (int q = 0; q < (BN * BK) / TPB; ++q) {
            const int l = tid + q * TPB;
            if (TRANS_B) bs[l % BK][l / BK] = rb[q];
            else bs[l / BN][l % BN] = rb[q];
        }
        __syncthreads();
        if (k0 + BK < k_end) load(k0 + BK);
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
    // the columns' offsets in C, once (a division each where C is batched)
    size_t c_col[4];
    const size_t c_row_step = x.cp > 0 ? (size_t)x.cp : (size_t)ldc;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
        const int gj = col0 + tx + 16 * s, img = x.cp > 0 ? gj / x.cp : 0;
        c_col[s] = x.cp > 0 ? (size_t)img * m * x.cp + (gj - img * x.cp) : (size_t)gj;
    }
    const int nc = x.row_sums ? n + 1 : n; // the product's columns, the ones' included
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const int gi = row0 + ty + 16 * r;
        if (gi >= m) continue;
        const float bv = x.bias && !partial && !x.bias_columns ? x.bias[gi] : 0.0f;
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            const int gj = col0 + tx + 16 * s;
            if (gj >= nc) continue;
            if (partial) {
                partial[((size_t)blockIdx.z * m + gi) * nc + gj] = alpha * acc[r][s];
                continue;
            }
            if (gj == n) { // x.row_sums
                x.row_sums[gi] = alpha * acc[r][s];
                continue;
            }
            float v = alpha * acc[r][s];
            if (x.bias) v += x.bias_columns ? x.bias[gj] : bv;
            if (x.relu) v = v < 0.0f ? 0.0f : v;
            float *out = c + c_col[s] + (size_t)gi * c_row_step;
            *out = beta == 0.0f ? v : v + beta * *out;
        }
    }
}

// C (m, n) = sum over the slices of partial (slices, m, n) + beta C.
__global__ void sum_slices(int m, int n, int slices, const float *__restrict__ partial,
                           float beta, float *__restrict__ c, int ldc)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(t, (size_t)m * n) {
        float sum = 0.0f;
        for (int z = 0; z < slices; ++z) sum += partial[(size_t)z * m * n + t];
        float *out = c + (t / n) * ldc + t % n;
        *out = beta == 0.0f ? sum : sum + beta * *out;
    }
}

} // namespace
} // namespace cnn_gemm

#endif
