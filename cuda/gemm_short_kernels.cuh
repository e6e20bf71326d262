// gemm_short_kernels.cuh: the cuda engine's SGEMM kernel for products with a
// short K (at most SHORT_K = 32): a first convolution's forward (K = 27 for a
// 3x3 kernel over three channels: the seed CNN's conv1; 25 in LeNet-5, 9 in
// tiny MNIST) and the data gradient of a convolution of at most 32 filters
// (K = its filters). gemm.cu chooses it in strict float32 for products of at least
// 2^27 multiply-adds (below, the tile kernel was as fast); in a header so
// that the host emulation (dev/emu/gemm_shapes_check.cpp) runs the very
// kernel.
//
// C (m, n) = alpha op(A) op(B) + bias, ReLU, + beta C, as the wide and the tile
// kernels (gemm_wide_kernels.cuh, gemm_kernels.cuh); B not transposed, plain
// or batched (x.bp), C plain or batched (x.cp), A plain (either way round).
// The tiled kernels spend such a product on overhead: K = 27 is two steps of
// their 16, so each block fills its pipeline, multiplies twice and drains,
// and the wide one's 128-column tile stores C in 16-byte strides (H100,
// batch 512, conv1's forward: 0.4 G multiply-adds and 109 MB moved, 129.9 us
// on the wide kernel, 59.1 here; ncu 2026-11-28). Here op(A) (m x K, at most
// SHORT_A_FLOATS) sits in shared memory, each thread takes one column j of
// C: its K values of op(B) once
// into registers (a warp reads consecutive addresses), then the rows four at
// a time, op(A)'s rows read as 16-byte broadcasts, and C's column stored row
// by row (a warp writes consecutive addresses).
//
// The same bits as the tiled kernels: each output is one chain of fmaf over
// k in order from 0 and the same epilogue. Their chains run on to K rounded
// up to 16 with zeros on both sides (fmaf(0, 0, acc) = acc + 0, which only
// turns -0 into +0), so where K is not a multiple of 16 the chain here ends
// with acc + 0 (no split-K here: the tiled kernels split K only from 256).
#ifndef CNN_GEMM_SHORT_KERNELS_CUH
#define CNN_GEMM_SHORT_KERNELS_CUH

#include "gemm_wide_kernels.cuh"

namespace cnn_gemm {
namespace { // internal linkage: every .cu that includes this has its own copy

constexpr int SHORT_K = 32, SHORT_THREADS = 128, SHORT_A_FLOATS = 4096;
// blocks an SM the launch bounds ask for: 6 (24 warps; 80 registers a thread)
constexpr int SHORT_MIN_BLOCKS = 6;

// Whether the short kernel takes op(A) (m x k) and these layouts.
__host__ __device__ constexpr bool short_k_fits(int m, int k, int trans_b, int ap,
                                                const float *row_sums)
{
    return k >= 1 && k <= SHORT_K && !trans_b && ap == 0 && !row_sums &&
           (long long)m * ((k + 3) / 4 * 4) <= SHORT_A_FLOATS;
}

// R rows' sums at once (independent chains, so the multiply-adds of one
// wait on no other's): acc[r] = op(A)(row r of as) . bv, each a chain of fmaf
// in the order of k, then + 0 where the tiled kernels' chains run on past k.
template <int R>
__device__ __forceinline__ void short_sums(const float *as, int kp, const float (&bv)[SHORT_K],
                                           int k, float (&acc)[R])
{
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
#pragma unroll
    for (int k4 = 0; k4 < SHORT_K; k4 += 4) {
        if (k4 >= k) break;
        float4 av[R];
#pragma unroll
        for (int r = 0; r < R; ++r) av[r] = *reinterpret_cast<const float4 *>(as + r * kp + k4);
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = fmaf(av[r].x, bv[k4], acc[r]);
        if (k4 + 1 < k)
#pragma unroll
            for (int r = 0; r < R; ++r) acc[r] = fmaf(av[r].y, bv[k4 + 1], acc[r]);
        if (k4 + 2 < k)
#pragma unroll
            for (int r = 0; r < R; ++r) acc[r] = fmaf(av[r].z, bv[k4 + 2], acc[r]);
        if (k4 + 3 < k)
#pragma unroll
            for (int r = 0; r < R; ++r) acc[r] = fmaf(av[r].w, bv[k4 + 3], acc[r]);
    }
    if (k % 16 != 0)
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = __fadd_rn(acc[r], 0.0f);
}

// Block (x, y): columns x * SHORT_THREADS + [0, SHORT_THREADS) of C, rows
// y * rows + [0, rows) (gemm.cu cuts the rows where the columns alone give
// too few blocks: a data gradient of 150 rows over 3,200 columns). The
// column of op(B) is asked for first, so that its loads are in flight while
// op(A) is copied to shared memory (eight loads a thread at a time). KC > 0:
// k == KC known at compile time (the seed CNN's conv1, 27), so that the
// tests of k in the sums fold away: with k known only at run time they were
// most of the kernel's instructions (ncu, H200, batch 512: 43.7 M for the
// 12.4 M multiply-adds; the kernel issue-bound, 0.77 a cycle).
template <bool TRANS_A, int KC = 0>
__global__ void __launch_bounds__(SHORT_THREADS, SHORT_MIN_BLOCKS)
sgemm_short_k(int m, int n, int k_arg, int rows, float alpha, const float *__restrict__ a,
              int lda, const float *__restrict__ b, int ldb, float beta, float *__restrict__ c,
              int ldc, cnn_sgemm_extra x)
{
    cnn_kernel_begin();
    const int k = KC > 0 ? KC : k_arg;
    const int j = blockIdx.x * SHORT_THREADS + threadIdx.x;
    const bool in = j < n;
    // this column of op(B) (zeros past k: never multiplied but by a zero of A)
    const size_t b_col = in ? (x.bp > 0 ? wide_offset(0, j, k, 0, x.bp) : (size_t)j) : 0;
    const size_t b_step = x.bp > 0 ? (size_t)x.bp : (size_t)ldb;
    float bv[SHORT_K];
#pragma unroll
    for (int kk = 0; kk < SHORT_K; ++kk)
        bv[kk] = in && kk < k ? b[b_col + (size_t)kk * b_step] : 0.0f;
    // as[r * kp + kk] = op(A)(i0 + r, kk), rows padded with zeros to kp, a multiple of 4
    __shared__ __align__(16) float as[SHORT_A_FLOATS];
    const int kp = (k + 3) / 4 * 4;
    const int i0 = blockIdx.y * rows, i1 = min(m, i0 + rows), count = (i1 - i0) * kp;
    for (int e0 = threadIdx.x; e0 < count; e0 += 8 * SHORT_THREADS) {
        float v[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            const int e = e0 + u * SHORT_THREADS, r = e / kp, kk = e - r * kp, i = i0 + r;
            v[u] = 0.0f;
            if (e < count && kk < k)
                v[u] = TRANS_A ? a[(size_t)kk * lda + i] : a[(size_t)i * lda + kk];
        }
#pragma unroll
        for (int u = 0; u < 8; ++u)
            if (e0 + u * SHORT_THREADS < count) as[e0 + u * SHORT_THREADS] = v[u];
    }
    __syncthreads();
    if (!in) return;
    const size_t c_col = wide_offset(0, j, m, ldc, x.cp);
    const size_t c_step = x.cp > 0 ? (size_t)x.cp : (size_t)ldc;
    const float bias_col = x.bias && x.bias_columns ? x.bias[j] : 0.0f;
    auto store = [&](int i, float acc) {
        float *out = c + c_col + (size_t)i * c_step;
        float v = alpha * acc;
        if (x.bias) v += x.bias_columns ? bias_col : x.bias[i];
        if (x.relu) v = v < 0.0f ? 0.0f : v;
        *out = beta == 0.0f ? v : v + beta * *out;
    };
    int i = i0;
    for (; i + 4 <= i1; i += 4) {
        float acc[4];
        short_sums<4>(as + (i - i0) * kp, kp, bv, k, acc);
#pragma unroll
        for (int r = 0; r < 4; ++r) store(i + r, acc[r]);
    }
    for (; i < i1; ++i) {
        float acc[1];
        short_sums<1>(as + (i - i0) * kp, kp, bv, k, acc);
        store(i, acc[0]);
    }
}

} // namespace
} // namespace cnn_gemm

#endif
