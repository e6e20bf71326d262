// gemm_kernels.cuh: the kernels of the cuda engine's SGEMM (gemm.cu), in a
// header so that the kernel-development programs (dev/cuda/sgemm.cu and the
// conv programs) launch the very kernels the engine runs. The host side (the
// tile choice, the split-K plan and the launches) stays in gemm.cu.
//
// C (m, n) = alpha op(A) op(B) + beta C, all row-major; op(A) is (m, k),
// op(B) is (k, n); trans_a means A is stored (k, m), trans_b that B is (n, k).
// One block computes a TBM x TBN tile of C (16, 32 or 64 rows; 32 or 64
// columns) with (TBM / 4) x (TBN / 4) threads, each owning 4x4 outputs; the
// K dimension goes through shared memory 16 at a time, the next step's
// elements loaded into registers while the current one is multiplied. Tiles
// at the edges load zeros past the matrix and store only inside it. beta ==
// 0 never reads C.
#ifndef CNN_GEMM_KERNELS_CUH
#define CNN_GEMM_KERNELS_CUH

#include "cuda_common.cuh"

namespace cnn_gemm {
namespace { // internal linkage: every .cu that includes this has its own copy

constexpr int BM = 64, BN = 64, BK = 16, TPB = 256;

// C tile over k in [k_begin, k_end) with k_begin = blockIdx.z * k_slice; with
// partial != NULL the tile goes to partial[z] (m, nc) instead of C (nc = n,
// or n + 1 with x.row_sums: the column of ones).
//
// VEC (the engine's default): a thread owns rows 4 ty + r and columns 4 tx +
// s, so each k step reads its four values of op(A) and of op(B) from shared
// memory as one 16-byte load each (2 loads per 16 multiply-adds), and stores
// its four columns of a row as one 16-byte store where they are consecutive
// and aligned in C (or in the partial tiles). !VEC, only at 64x64: rows ty +
// 16 r and columns tx + 16 s, 8 scalar shared loads per 16 multiply-adds and
// scalar stores: the engine's tile before the shaped tiles, kept as a stage
// (CNN_TILE_SCALAR, dev/cuda's sgemm stages). Every output is the same chain of fmaf over k
// in order in both, so for the same tiles and slices they give the same bits.
template <bool TRANS_A, bool TRANS_B, int TBM, int TBN, bool VEC = true, int MIN_BLOCKS = 0>
__global__ void __launch_bounds__((TBM / 4) * (TBN / 4), MIN_BLOCKS)
sgemm_tile(int m, int n, int k, int k_slice, float alpha, const float *__restrict__ a, int lda,
           const float *__restrict__ b, int ldb, float beta, float *__restrict__ c, int ldc,
           float *__restrict__ partial, cnn_sgemm_extra x)
{
    cnn_kernel_begin();
    constexpr int T = (TBM / 4) * (TBN / 4), TX = TBN / 4, TY = TBM / 4;
    static_assert(T % BK == 0 && T % TBN == 0 && T % TBM == 0, "tile and threads do not fit");
    __shared__ __align__(16) float as[BK][TBM + 4]; // as[kk][i] = op(A)(row0 + i, k0 + kk)
    __shared__ __align__(16) float bs[BK][TBN + 4]; // bs[kk][j] = op(B)(k0 + kk, col0 + j)
    const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
    const int row0 = blockIdx.y * TBM, col0 = blockIdx.x * TBN;
    // this thread's r-th row and s-th column within the tile
    auto row_of = [&](int r) { return VEC ? 4 * ty + r : ty + TY * r; };
    auto col_of = [&](int s) { return VEC ? 4 * tx + s : tx + TX * s; };
    float acc[4][4] = {};
    const int k_begin = blockIdx.z * k_slice;
    const int k_end = min(k, k_begin + k_slice);
    // B (k, n) not transposed: this thread's column j = tid % TBN is the same
    // at every load (T is a multiple of TBN), so its offset is found once
    size_t b_col = 0, b_row_step = (size_t)ldb;
    if (!TRANS_B) {
        const int gj = col0 + tid % TBN;
        if (x.bp > 0) {
            const int img = gj / x.bp;
            b_col = (size_t)img * k * x.bp + (gj - img * x.bp);
            b_row_step = (size_t)x.bp;
        } else {
            b_col = (size_t)gj;
        }
    }

    // Each thread loads (TBM * BK) / T elements of op(A) and (TBN * BK) / T
    // of op(B) per k step; the index order follows the stored layout so that
    // a warp reads consecutive addresses.
    float ra[(TBM * BK) / T], rb[(TBN * BK) / T];
    auto load = [&](int k0) {
        // A batched: column gk = k0 + tid % BK of op(A) is in image gk / P
        const int a_gk = k0 + tid % BK;
        size_t a_batched = 0; // offset of (row 0, column a_gk)
        if (!TRANS_A && x.ap > 0 && a_gk < k_end) {
            const int img = a_gk / x.ap;
            a_batched = (size_t)img * m * x.ap + (a_gk - img * x.ap);
        }
#pragma unroll
        for (int q = 0; q < (TBM * BK) / T; ++q) {
            const int l = tid + q * T;
            int i, kk;
            if (TRANS_A) { i = l % TBM; kk = l / TBM; } // A (k, m): contiguous in i
            else { kk = l % BK; i = l / BK; }           // A (m, k): contiguous in kk
            const int gi = row0 + i, gk = k0 + kk;
            float v = 0.0f;
            if (gi < m && gk < k_end) {
                if (TRANS_A) v = a[(size_t)gk * lda + gi];
                else v = x.ap > 0 ? a[a_batched + (size_t)gi * x.ap] : a[(size_t)gi * lda + gk];
            }
            ra[q] = v;
        }
#pragma unroll
        for (int q = 0; q < (TBN * BK) / T; ++q) {
            const int l = tid + q * T;
            int j, kk;
            if (TRANS_B) { kk = l % BK; j = l / BK; }   // B (n, k): contiguous in kk
            else { j = l % TBN; kk = l / TBN; }         // B (k, n): contiguous in j
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
        for (int q = 0; q < (TBM * BK) / T; ++q) {
            const int l = tid + q * T;
            if (TRANS_A) as[l / TBM][l % TBM] = ra[q];
            else as[l % BK][l / BK] = ra[q];
        }
#pragma unroll
        for (int q = 0; q < (TBN * BK) / T; ++q) {
            const int l = tid + q * T;
            if (TRANS_B) bs[l % BK][l / BK] = rb[q];
            else bs[l / TBN][l % TBN] = rb[q];
        }
        __syncthreads();
        if (k0 + BK < k_end) load(k0 + BK);
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float ar[4], br[4];
            if (VEC) {
                const float4 av = *reinterpret_cast<const float4 *>(&as[kk][4 * ty]);
                const float4 bv = *reinterpret_cast<const float4 *>(&bs[kk][4 * tx]);
                ar[0] = av.x; ar[1] = av.y; ar[2] = av.z; ar[3] = av.w;
                br[0] = bv.x; br[1] = bv.y; br[2] = bv.z; br[3] = bv.w;
            } else {
#pragma unroll
                for (int r = 0; r < 4; ++r) ar[r] = as[kk][row_of(r)];
#pragma unroll
                for (int s = 0; s < 4; ++s) br[s] = bs[kk][col_of(s)];
            }
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
        const int gj = col0 + col_of(s), img = x.cp > 0 ? gj / x.cp : 0;
        c_col[s] = x.cp > 0 ? (size_t)img * m * x.cp + (gj - img * x.cp) : (size_t)gj;
    }
    const int nc = x.row_sums ? n + 1 : n; // the product's columns, the ones' included
    // this thread's four columns as one 16-byte store: consecutive (VEC),
    // inside the product, and 16-byte aligned in their destination (in C
    // batched, the image's plane a multiple of 4 so that they share an image)
    const int gj0 = col0 + col_of(0);
    bool vec = VEC;
    if (partial)
        vec = vec && nc % 4 == 0 && gj0 + 3 < nc;
    else
        vec = vec && gj0 + 3 < n && (x.cp > 0 ? x.cp % 4 == 0 : ldc % 4 == 0) &&
              ((uintptr_t)c & 15) == 0;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const int gi = row0 + row_of(r);
        if (gi >= m) continue;
        const float bv = x.bias && !partial && !x.bias_columns ? x.bias[gi] : 0.0f;
        if (vec) {
            float v[4];
#pragma unroll
            for (int s = 0; s < 4; ++s) {
                v[s] = alpha * acc[r][s];
                if (!partial && x.bias) v[s] += x.bias_columns ? x.bias[gj0 + s] : bv;
                if (!partial && x.relu) v[s] = v[s] < 0.0f ? 0.0f : v[s];
            }
            float4 *out = reinterpret_cast<float4 *>(
                partial ? partial + ((size_t)blockIdx.z * m + gi) * nc + gj0
                        : c + c_col[0] + (size_t)gi * c_row_step);
            if (!partial && beta != 0.0f) {
                const float4 o = *out;
                v[0] += beta * o.x;
                v[1] += beta * o.y;
                v[2] += beta * o.z;
                v[3] += beta * o.w;
            }
            *out = make_float4(v[0], v[1], v[2], v[3]);
            continue;
        }
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            const int gj = col0 + col_of(s);
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
