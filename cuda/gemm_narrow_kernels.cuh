// gemm_narrow_kernels.cuh: the cuda engine's kernel for the partial sums
// of a split-K product of at most 32 x 32 outputs over a long K with B
// transposed: a convolution's filter gradient where the filters and their
// weights are few (the seed CIFAR-10 CNN's conv1: dW (32 x 27) and db, the
// column of ones, summed over 460,800 pixels at batch 512 in 1,310 slices
// of 352). gemm.cu gives it the products it would give the tile kernel's
// 32-column tiles split over K (narrow_slices_fit), with the same slices;
// in a header so that the host emulation (dev/emu) runs the same kernel.
//
// partial[z] (m, nc) = alpha op(A) op(B) over slice z of K, [z k_slice,
// min(k, (z + 1) k_slice)), for z = blockIdx.x; op(A) = A (m, k) plain
// (lda) or batched (x.ap = P > 0: A[r, i P + p] at (i m + r) P + p); op(B)
// = B^T with B (n, k) row-major (ldb); nc = n, or n + 1 with x.row_sums,
// whose last column is op(A)'s row sums (op(B)'s column n all ones: a
// convolution's bias gradient). Each output is one chain of fmaf over k in
// order from 0, times alpha: the tile kernel's (gemm_kernels.cuh) sums, so
// for the same slices the same bits.
//
// Why not the tile kernel: one block a slice of 64 threads (each 4 x 4
// outputs, as on the tile kernel's 32 x 32 tile), but the slice's elements
// copied from global to shared memory 16 bytes at a time (cp.async, four
// consecutive k of a row) in a pipeline of NARROW_STAGES steps of 16, where
// the tile kernel held one step ahead in registers, a float at a time: its
// loads (the operands are read once, 109 MB for conv1 at batch 512) waited
// on the L2 (ncu, H100: 76-81 us, 1.4 TB/s).
//
// The 16-byte copies need each row's groups of four k aligned and inside
// one image: gemm.cu checks narrow_slices_aligned before it launches.
#ifndef CNN_GEMM_NARROW_KERNELS_CUH
#define CNN_GEMM_NARROW_KERNELS_CUH

#include "cuda_common.cuh"
#include "async_copy.cuh"

namespace cnn_gemm {
namespace { // internal linkage: every .cu that includes this has its own copy

// the outputs a block covers (rows, columns), its threads, the k of a step,
// the steps in the pipeline
constexpr int NARROW_M = 32, NARROW_N = 32, NARROW_THREADS = 64, NARROW_K = 16,
              NARROW_STAGES = 4;
// a row of a step's tile in shared memory: 16 floats and 4 of padding, so
// that the 16-byte reads of four consecutive rows (or eight) fall on
// different banks
constexpr int NARROW_ROW = NARROW_K + 4;

// Whether the 16-byte copies apply: A's and B's rows 16-byte aligned (and,
// with A batched, an image's plane a multiple of 4, so a group of four k is
// never split between images).
inline bool narrow_slices_aligned(const float *a, int lda, const float *b, int ldb,
                                  const cnn_sgemm_extra &x)
{
    const bool a_ok = x.ap > 0 ? x.ap % 4 == 0 : lda % 4 == 0;
    return a_ok && ldb % 4 == 0 && ((uintptr_t)a & 15) == 0 && ((uintptr_t)b & 15) == 0;
}

// Requires m <= 32, nc <= 32, k_slice a multiple of 4, narrow_slices_aligned.
__global__ void __launch_bounds__(NARROW_THREADS)
sgemm_narrow_slices(int m, int n, int k, int k_slice, float alpha, const float *__restrict__ a,
                    int lda, const float *__restrict__ b, int ldb, float *__restrict__ partial,
                    cnn_sgemm_extra x)
{
    cnn_kernel_begin();
    constexpr int S = NARROW_STAGES;
    // as[s][i][kk] = op(A)(i, k0 + kk), bs[s][j][kk] = op(B)(k0 + kk, j)
    __shared__ __align__(16) float as[S][NARROW_M][NARROW_ROW];
    __shared__ __align__(16) float bs[S][NARROW_N][NARROW_ROW];
    const int tid = threadIdx.x;
    const int nc = x.row_sums ? n + 1 : n;
    const int k_begin = blockIdx.x * k_slice;
    const int k_end = min(k, k_begin + k_slice);
    const int steps = k_begin < k_end ? (k_end - k_begin + NARROW_K - 1) / NARROW_K : 0;

    // The column of ones: op(B)'s column n, never copied (past k_end the
    // zeros of A's tile leave its sums alone).
    if (x.row_sums)
        for (int e = tid; e < S * NARROW_ROW; e += NARROW_THREADS)
            bs[e / NARROW_ROW][n][e % NARROW_ROW] = 1.0f;

    // The copies: a step's tile of A is 32 rows of 16 k, 128 groups of four
    // k; thread tid copies the groups tid and tid + 64 (rows tid / 4 and 16
    // + tid / 4, k 4 (tid % 4) in the step), and the same of B. Both of a
    // thread's groups have the same k, gk, so each operand's two sources
    // are one pointer a row apart, moved on by 16 a step: A batched, its
    // group at (i m + r) P + p for gk = i P + p is gk + r P + i (m - 1) P,
    // so each image passed adds (m - 1) P more (a pixel counter says when,
    // without a division). Rows past m (A) or n (B) read nothing: zeros.
    constexpr int Q = NARROW_M * NARROW_K / 4 / NARROW_THREADS; // 2 groups a thread
    constexpr int Q_ROWS = NARROW_THREADS / 4;                  // rows between them
    const int c_row = tid / 4, c_kk = 4 * (tid % 4);
    int gk = k_begin + c_kk;
    const bool batched = x.ap > 0;
    const size_t a_row = batched ? (size_t)x.ap : (size_t)lda;
    const size_t a_image = batched ? (size_t)(m - 1) * x.ap : 0;
    int a_pix = batched ? gk % x.ap : 0;
    const float *a_at = a + (size_t)c_row * a_row + gk + (batched ? (gk / x.ap) * a_image : 0);
    const float *b_at = b + (size_t)c_row * ldb + gk;
    bool a_in[Q], b_in[Q];
#pragma unroll
    for (int q = 0; q < Q; ++q) {
        a_in[q] = c_row + q * Q_ROWS < m;
        b_in[q] = c_row + q * Q_ROWS < n;
    }
    // the column of ones (row n of B's tile, with row sums): set above, never copied
    const bool b_ones = x.row_sums && (c_row == n || c_row + Q_ROWS == n);
    auto issue = [&](int stage) {
        const int count = max(0, min(4, k_end - gk));
#pragma unroll
        for (int q = 0; q < Q; ++q) {
            const int i = c_row + q * Q_ROWS;
            async_copy16(&as[stage][i][c_kk], a_in[q] && count ? a_at + q * Q_ROWS * a_row : a,
                         a_in[q] ? count : 0);
            if (!(b_ones && i == n))
                async_copy16(&bs[stage][i][c_kk],
                             b_in[q] && count ? b_at + (size_t)q * Q_ROWS * ldb : b,
                             b_in[q] ? count : 0);
        }
        gk += NARROW_K;
        a_at += NARROW_K;
        b_at += NARROW_K;
        if (batched) {
            a_pix += NARROW_K;
            while (a_pix >= x.ap) {
                a_pix -= x.ap;
                a_at += a_image;
            }
        }
    };

    // Thread (tx, ty) = (tid % 8, tid / 8) owns the outputs (ty + 8 r, tx +
    // 8 s), r, s < 4: a warp's reads of a row fall on 4 (A) or 8 (B)
    // different rows, whose 16-byte groups lie on different banks.
    const int tx = tid % 8, ty = tid / 8;
    float acc[4][4];
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int s = 0; s < 4; ++s) acc[r][s] = 0.0f;

    // as the wide kernel: S - 1 steps in flight; at each step wait for its
    // tile, a barrier (which also frees the stage read last), the copy of
    // the step S - 1 ahead, then the multiply-adds
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
        if (s < steps) issue(s);
        async_commit();
    }
    for (int st = 0; st < steps; ++st) {
        async_wait<S - 2>();
        __syncthreads();
        if (st + S - 1 < steps) issue((st + S - 1) % S);
        async_commit();
        const int cur = st % S;
#pragma unroll
        for (int k4 = 0; k4 < NARROW_K; k4 += 4) {
            float4 av[4], bv[4];
#pragma unroll
            for (int r = 0; r < 4; ++r)
                av[r] = *reinterpret_cast<const float4 *>(&as[cur][ty + 8 * r][k4]);
#pragma unroll
            for (int s = 0; s < 4; ++s)
                bv[s] = *reinterpret_cast<const float4 *>(&bs[cur][tx + 8 * s][k4]);
            // k4, k4 + 1, k4 + 2, k4 + 3 in turn: each chain in the order of k
#pragma unroll
            for (int e = 0; e < 4; ++e)
#pragma unroll
                for (int r = 0; r < 4; ++r)
#pragma unroll
                    for (int s = 0; s < 4; ++s)
                        acc[r][s] = fmaf(reinterpret_cast<const float *>(&av[r])[e],
                                         reinterpret_cast<const float *>(&bv[s])[e], acc[r][s]);
        }
    }

    float *out = partial + (size_t)blockIdx.x * m * nc;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const int i = ty + 8 * r;
        if (i >= m) continue;
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            const int j = tx + 8 * s;
            if (j < nc) out[(size_t)i * nc + j] = alpha * acc[r][s];
        }
    }
}

} // namespace
} // namespace cnn_gemm

#endif
