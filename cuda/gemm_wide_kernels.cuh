// gemm_wide_kernels.cuh: the cuda engine's SGEMM for large products (gemm.cu
// chooses it; gemm_kernels.cuh keeps the 64x64 tile for small ones and as the
// CNNCUDA_SGEMM=tile64 path). In a header so that dev/cuda/sgemm.cu launches
// the very kernels the engine runs.
//
// C (m, n) = alpha op(A) op(B) + beta C, row-major, as in gemm_kernels.cuh.
// One block computes a BM x 128 tile of C (BM = 32, 64 or 128) with
// BM * 2 threads, each owning 8 x 8 outputs: rows ty*4 + [0, 4) and
// BM/2 + ty*4 + [0, 4), columns tx*4 + [0, 4) and 64 + tx*4 + [0, 4), so that
// each k step reads two float4 of A and two float4 of B from shared memory
// for 64 multiply-adds (the 4x4 tile: 8 scalar reads for 16). K goes through
// shared memory 16 at a time, double-buffered: the next tile is read from
// global memory into registers while the current one is multiplied, then
// stored to the other buffer, one barrier per step. Strict fp32: fmaf in
// the order of k, one chain per output (no TF32, no atomics), so a product
// without split-K gives the same bits as the 64x64 tile kernel.
//
// Operands and output may also be in the "batched" layout of a
// convolution's tensors: a matrix X (R, n*P) stored as a tensor (n, R, P),
// X[r, i*P + p] at ((i*R + r)*P + p). A (not transposed, R = m), B (not
// transposed, R = k) and C (R = m) take it when their ap, bp, cp is P > 0
// (0: plain row-major with the leading dimension). So the convolution's
// GEMMs read dy and write y in NCHW without a rearranging pass. bias (may be
// NULL) adds bias[row] to every output of that row before beta * C.
#ifndef CNN_GEMM_WIDE_KERNELS_CUH
#define CNN_GEMM_WIDE_KERNELS_CUH

#include "cuda_common.cuh"

namespace cnn_gemm {
namespace { // internal linkage: every .cu that includes this has its own copy

constexpr int WBN = 128;

// K per step: 16 for 128-row tiles, 8 for the smaller ones (fewer threads
// share the B tile: its prefetch would take 16 or 32 registers a thread)
__host__ __device__ constexpr int wide_bk(int bm) { return bm >= 128 ? 16 : 8; }

__host__ __device__ constexpr int wide_threads(int bm) { return bm * 2; } // (bm / 8) * (WBN / 8)

// Where the element (r, j) of a matrix of `rows` rows lies: plain row-major
// with leading dimension ld, or batched with image size p.
__device__ __forceinline__ size_t wide_offset(int r, int j, int rows, int ld, int p)
{
    if (p <= 0) return (size_t)r * ld + j;
    const int i = j / p;
    return ((size_t)i * rows + r) * p + (j - i * p);
}

// Extra arguments of the wide kernel: the layouts and the bias.
struct WideExtra {
    int ap, bp, cp;     // image sizes of batched A, B, C (0: plain)
    const float *bias;  // per row of C, or NULL
};

template <int BM, bool TRANS_A, bool TRANS_B>
__global__ void __launch_bounds__(BM * 2, BM == 128 ? 2 : 192 / BM)
sgemm_wide(int m, int n, int k, int k_slice, float alpha, const float *__restrict__ a, int lda,
           const float *__restrict__ b, int ldb, float beta, float *__restrict__ c, int ldc,
           float *__restrict__ partial, WideExtra x)
{
    constexpr int T = BM * 2, WBK = wide_bk(BM);
    constexpr int EA = BM * WBK / T;  // 8 or 4
    constexpr int EB = WBN * WBK / T; // 8 or 16
    __shared__ __align__(16) float as[2][WBK][BM + 4];  // as[kk][i] = op(A)(row0 + i, k0 + kk)
    __shared__ __align__(16) float bs[2][WBK][WBN + 4]; // bs[kk][j] = op(B)(k0 + kk, col0 + j)
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * WBN;
    const int k_begin = blockIdx.z * k_slice;
    const int k_end = min(k, k_begin + k_slice);
    float ra[EA], rb[EB];

    // global -> registers, in the stored layout's order (a warp reads
    // consecutive addresses); zeros past the matrix and past the slice
    auto load = [&](int k0) {
#pragma unroll
        for (int q = 0; q < EA; ++q) {
            const int l = tid + q * T;
            int i, kk;
            if (TRANS_A) { i = l % BM; kk = l / BM; } // A (k, m): contiguous in i
            else { kk = l % WBK; i = l / WBK; }       // A (m, k): contiguous in kk
            const int gi = row0 + i, gk = k0 + kk;
            float v = 0.0f;
            if (gi < m && gk < k_end)
                v = TRANS_A ? a[(size_t)gk * lda + gi] : a[wide_offset(gi, gk, m, lda, x.ap)];
            ra[q] = v;
        }
#pragma unroll
        for (int q = 0; q < EB; ++q) {
            const int l = tid + q * T;
            int j, kk;
            if (TRANS_B) { kk = l % WBK; j = l / WBK; } // B (n, k): contiguous in kk
            else { j = l % WBN; kk = l / WBN; }         // B (k, n): contiguous in j
            const int gj = col0 + j, gk = k0 + kk;
            float v = 0.0f;
            if (gj < n && gk < k_end)
                v = TRANS_B ? b[(size_t)gj * ldb + gk] : b[wide_offset(gk, gj, k, ldb, x.bp)];
            rb[q] = v;
        }
    };
    auto store = [&](int buf) {
#pragma unroll
        for (int q = 0; q < EA; ++q) {
            const int l = tid + q * T;
            const int i = TRANS_A ? l % BM : l / WBK, kk = TRANS_A ? l / BM : l % WBK;
            as[buf][kk][i] = ra[q];
        }
#pragma unroll
        for (int q = 0; q < EB; ++q) {
            const int l = tid + q * T;
            const int j = TRANS_B ? l / WBK : l % WBN, kk = TRANS_B ? l % WBK : l / WBN;
            bs[buf][kk][j] = rb[q];
        }
    };

    float acc[8][8];
#pragma unroll
    for (int r = 0; r < 8; ++r)
#pragma unroll
        for (int s = 0; s < 8; ++s) acc[r][s] = 0.0f;

    int buf = 0;
    if (k_begin < k_end) {
        load(k_begin);
        store(0);
    }
    __syncthreads();
    for (int k0 = k_begin; k0 < k_end; k0 += WBK) {
        const bool more = k0 + WBK < k_end;
        if (more) load(k0 + WBK);
#pragma unroll
        for (int kk = 0; kk < WBK; ++kk) {
            const float4 a0 = *reinterpret_cast<const float4 *>(&as[buf][kk][ty * 4]);
            const float4 a1 = *reinterpret_cast<const float4 *>(&as[buf][kk][BM / 2 + ty * 4]);
            const float4 b0 = *reinterpret_cast<const float4 *>(&bs[buf][kk][tx * 4]);
            const float4 b1 = *reinterpret_cast<const float4 *>(&bs[buf][kk][WBN / 2 + tx * 4]);
            const float ar[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float br[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int r = 0; r < 8; ++r)
#pragma unroll
                for (int s = 0; s < 8; ++s) acc[r][s] = fmaf(ar[r], br[s], acc[r][s]);
        }
        if (more) store(buf ^ 1);
        __syncthreads();
        buf ^= 1;
    }

#pragma unroll
    for (int r = 0; r < 8; ++r) {
        const int gi = row0 + (r < 4 ? ty * 4 + r : BM / 2 + ty * 4 + r - 4);
        if (gi >= m) continue;
        const float bv = x.bias ? x.bias[gi] : 0.0f;
#pragma unroll
        for (int s = 0; s < 8; ++s) {
            const int gj = col0 + (s < 4 ? tx * 4 + s : WBN / 2 + tx * 4 + s - 4);
            if (gj >= n) continue;
            float v = alpha * acc[r][s];
            if (partial) {
                partial[((size_t)blockIdx.z * m + gi) * n + gj] = v;
                continue;
            }
            if (x.bias) v += bv;
            float *out = c + wide_offset(gi, gj, m, ldc, x.cp);
            *out = beta == 0.0f ? v : v + beta * *out;
        }
    }
}

// C (m, n) = sum over the slices of partial (slices, m, n) (+ bias[row])
// + beta C, C plain or batched (cp > 0), the slices added in order.
__global__ void sum_slices_wide(int m, int n, int slices, const float *__restrict__ partial,
                                float beta, float *__restrict__ c, int ldc, int cp,
                                const float *__restrict__ bias)
{
    CNN_GRID_LOOP(t, (size_t)m * n) {
        float sum = 0.0f;
        for (int z = 0; z < slices; ++z) sum += partial[(size_t)z * m * n + t];
        const int gi = (int)(t / n), gj = (int)(t % n);
        if (bias) sum += bias[gi];
        float *out = c + wide_offset(gi, gj, m, ldc, cp);
        *out = beta == 0.0f ? sum : sum + beta * *out;
    }
}

} // namespace
} // namespace cnn_gemm

#endif
