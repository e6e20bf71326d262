// sgemm_stages.cuh: the earlier stages of the SGEMM, written for dev/cuda
// (versions 1-3 of sgemm.cu, and the GEMM inside the conv programs' im2col
// versions). Version 4 is the engine's tile kernel as it was before its
// register prefetch, without split-K, version 5 the engine's tile kernel
// with scalar shared loads on every product (cnn_cuda_sgemm_tile,
// cuda/gemm_kernels.cuh, with split-K), version 6 its wide kernel on every
// product (cnn_cuda_sgemm_wide), version 7 the engine's choice by size with
// the scalar tile, version 8 the engine; versions 9 and 10 are 6 and 8 with the Net's
// precision "tf32" (the wide kernel on TF32 tensor cores).
//
// Every stage computes, like the engine, C (m, n) = alpha op(A) op(B) + beta C,
// row-major; op(A) is (m, k), op(B) is (k, n); ta means A is stored (k, m), tb
// that B is stored (n, k); beta == 0 never reads C. Any m, n, k >= 1 and any
// leading dimensions.
#ifndef DEV_CUDA_SGEMM_STAGES_CUH
#define DEV_CUDA_SGEMM_STAGES_CUH

#include <cuda_runtime.h>

#include "common.cuh"

namespace stages {

struct Gemm {
    bool ta, tb;
    int m, n, k;
    float alpha;
    const float *a;
    int lda;
    const float *b;
    int ldb;
    float beta;
    float *c;
    int ldc;
};

__device__ __forceinline__ void store(float *c, float alpha, float acc, float beta)
{
    *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
}

// grid.y is limited to 65535 blocks (the rows of C)
inline bool grid_fits(const dim3 &grid, const char *what)
{
    if (grid.y <= 65535) return true;
    fprintf(stderr, "%s: m too large for one grid\n", what);
    return false;
}

// ---- version 1: naive. One thread per output of C, operands read from global
// memory for every multiply-add (each A and B element is read n and m times).
// threadIdx.x runs along a row of C, so the reads of B (not transposed) and
// the writes of C are coalesced; A's element is the same for the whole warp.
__global__ void sgemm_naive(bool ta, bool tb, int m, int n, int k, float alpha,
                            const float *__restrict__ a, int lda, const float *__restrict__ b,
                            int ldb, float beta, float *__restrict__ c, int ldc)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= m || j >= n) return;
    float acc = 0.0f;
    for (int kk = 0; kk < k; ++kk) {
        const float av = ta ? a[(size_t)kk * lda + i] : a[(size_t)i * lda + kk];
        const float bv = tb ? b[(size_t)j * ldb + kk] : b[(size_t)kk * ldb + j];
        acc = fmaf(av, bv, acc);
    }
    store(c + (size_t)i * ldc + j, alpha, acc, beta);
}

inline bool sgemm_v1(const Gemm &g, cudaStream_t st)
{
    const dim3 block(32, 8), grid((g.n + 31) / 32, (g.m + 7) / 8);
    if (!grid_fits(grid, "sgemm v1")) return false;
    sgemm_naive<<<grid, block, 0, st>>>(g.ta, g.tb, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb,
                                        g.beta, g.c, g.ldc);
    return dev::launched("sgemm v1");
}

// ---- version 2: shared-memory tiles. A 32x32 block of threads computes a
// 32x32 tile of C, one output per thread; the K dimension goes through
// shared memory 32 at a time, so each element of A and B is read from
// global memory once per tile instead of once per output (32x fewer reads).
// Loads follow the stored layout (a warp reads 32 consecutive floats); the
// tile is stored transposed when the operand is, with one float of padding
// per row so that the transposed stores hit 32 different banks.
constexpr int T2 = 32;

template <bool TA, bool TB>
__global__ void __launch_bounds__(T2 *T2)
sgemm_smem(int m, int n, int k, float alpha, const float *__restrict__ a, int lda,
           const float *__restrict__ b, int ldb, float beta, float *__restrict__ c, int ldc)
{
    __shared__ float as[T2][T2 + 1]; // as[i][kk] = op(A)(row0 + i, k0 + kk)
    __shared__ float bs[T2][T2 + 1]; // bs[kk][j] = op(B)(k0 + kk, col0 + j)
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * T2, col0 = blockIdx.x * T2;
    float acc = 0.0f;
    for (int k0 = 0; k0 < k; k0 += T2) {
        {
            const int i = TA ? tx : ty, kk = TA ? ty : tx; // consecutive tx: consecutive addresses
            const int gi = row0 + i, gk = k0 + kk;
            float v = 0.0f;
            if (gi < m && gk < k) v = TA ? a[(size_t)gk * lda + gi] : a[(size_t)gi * lda + gk];
            as[i][kk] = v;
        }
        {
            const int j = TB ? ty : tx, kk = TB ? tx : ty;
            const int gj = col0 + j, gk = k0 + kk;
            float v = 0.0f;
            if (gj < n && gk < k) v = TB ? b[(size_t)gj * ldb + gk] : b[(size_t)gk * ldb + gj];
            bs[kk][j] = v;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < T2; ++kk) acc = fmaf(as[ty][kk], bs[kk][tx], acc);
        __syncthreads();
    }
    const int i = row0 + ty, j = col0 + tx;
    if (i < m && j < n) store(c + (size_t)i * ldc + j, alpha, acc, beta);
}

// ---- version 3: 1-D register blocking. A block of 512 threads computes a
// 64x64 tile of C; each thread keeps a column of 8 outputs in registers, so
// one value of B read from shared memory feeds 8 multiply-adds (version 2:
// two shared-memory reads per multiply-add; here 9 per 8). K goes through
// shared memory 8 at a time.
constexpr int BM3 = 64, BN3 = 64, BK3 = 8, TM3 = 8, TPB3 = BM3 * BN3 / TM3;

template <bool TA, bool TB>
__global__ void __launch_bounds__(TPB3)
sgemm_reg1d(int m, int n, int k, float alpha, const float *__restrict__ a, int lda,
            const float *__restrict__ b, int ldb, float beta, float *__restrict__ c, int ldc)
{
    // padded by 4 so that the stores of a tile read across K (8 rows of
    // shared memory at once) fall in different banks
    __shared__ float as[BK3][BM3 + 4]; // as[kk][i] = op(A)(row0 + i, k0 + kk)
    __shared__ float bs[BK3][BN3 + 4]; // bs[kk][j] = op(B)(k0 + kk, col0 + j)
    const int tid = threadIdx.x;
    const int tx = tid % BN3, ty = tid / BN3; // column tx, rows ty * TM3 + [0, TM3)
    const int row0 = blockIdx.y * BM3, col0 = blockIdx.x * BN3;
    float acc[TM3] = {};
    for (int k0 = 0; k0 < k; k0 += BK3) {
        { // one element of each tile per thread, in the stored layout's order
            const int i = TA ? tid % BM3 : tid / BK3, kk = TA ? tid / BM3 : tid % BK3;
            const int gi = row0 + i, gk = k0 + kk;
            float v = 0.0f;
            if (gi < m && gk < k) v = TA ? a[(size_t)gk * lda + gi] : a[(size_t)gi * lda + gk];
            as[kk][i] = v;
        }
        {
            const int j = TB ? tid / BK3 : tid % BN3, kk = TB ? tid % BK3 : tid / BN3;
            const int gj = col0 + j, gk = k0 + kk;
            float v = 0.0f;
            if (gj < n && gk < k) v = TB ? b[(size_t)gj * ldb + gk] : b[(size_t)gk * ldb + gj];
            bs[kk][j] = v;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK3; ++kk) {
            const float bv = bs[kk][tx];
#pragma unroll
            for (int r = 0; r < TM3; ++r) acc[r] = fmaf(as[kk][ty * TM3 + r], bv, acc[r]);
        }
        __syncthreads();
    }
    const int j = col0 + tx;
    if (j >= n) return;
#pragma unroll
    for (int r = 0; r < TM3; ++r) {
        const int i = row0 + ty * TM3 + r;
        if (i < m) store(c + (size_t)i * ldc + j, alpha, acc[r], beta);
    }
}

// Launches KERNEL<ta, tb>(...) for the Gemm's transposes.
#define STAGES_DISPATCH(KERNEL, grid, block, st, g, ...)                                       \
    do {                                                                                      \
        if (!(g).ta && !(g).tb)                                                               \
            KERNEL<false, false><<<grid, block, 0, st>>>(__VA_ARGS__);                        \
        else if ((g).ta && !(g).tb)                                                           \
            KERNEL<true, false><<<grid, block, 0, st>>>(__VA_ARGS__);                         \
        else if (!(g).ta && (g).tb)                                                           \
            KERNEL<false, true><<<grid, block, 0, st>>>(__VA_ARGS__);                         \
        else                                                                                  \
            KERNEL<true, true><<<grid, block, 0, st>>>(__VA_ARGS__);                          \
    } while (0)
#define STAGES_GEMM_ARGS(g) (g).m, (g).n, (g).k, (g).alpha, (g).a, (g).lda, (g).b, (g).ldb, (g).beta, (g).c, (g).ldc

inline bool sgemm_v2(const Gemm &g, cudaStream_t st)
{
    const dim3 grid((g.n + T2 - 1) / T2, (g.m + T2 - 1) / T2), block(T2, T2);
    if (!grid_fits(grid, "sgemm v2")) return false;
    STAGES_DISPATCH(sgemm_smem, grid, block, st, g, STAGES_GEMM_ARGS(g));
    return dev::launched("sgemm v2");
}

inline bool sgemm_v3(const Gemm &g, cudaStream_t st)
{
    const dim3 grid((g.n + BN3 - 1) / BN3, (g.m + BM3 - 1) / BM3);
    if (!grid_fits(grid, "sgemm v3")) return false;
    STAGES_DISPATCH(sgemm_reg1d, grid, TPB3, st, g, STAGES_GEMM_ARGS(g));
    return dev::launched("sgemm v3");
}

// ---- version 4: the engine's 64x64-tile kernel as it was until
// 2026-11-25 (before its register prefetch and the fused layouts; kept
// here as a stage, cuda/gemm_kernels.cuh has the engine's): 256 threads, 4x4
// outputs per thread (rows ty + 16 r, columns tx + 16 s), K through shared
// memory 16 at a time, each step loaded, then multiplied; launched over the
// whole of K in one slice: the engine before split-K.
constexpr int BM4 = 64, BN4 = 64, BK4 = 16, TPB4 = 256;

template <bool TRANS_A, bool TRANS_B>
__global__ void __launch_bounds__(TPB4)
sgemm_tile_v4(int m, int n, int k, float alpha, const float *__restrict__ a, int lda,
              const float *__restrict__ b, int ldb, float beta, float *__restrict__ c, int ldc)
{
    __shared__ float as[BK4][BM4 + 4]; // as[kk][i] = op(A)(row0 + i, k0 + kk)
    __shared__ float bs[BK4][BN4 + 4]; // bs[kk][j] = op(B)(k0 + kk, col0 + j)
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * BM4, col0 = blockIdx.x * BN4;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < k; k0 += BK4) {
#pragma unroll
        for (int q = 0; q < (BM4 * BK4) / TPB4; ++q) {
            const int l = tid + q * TPB4;
            int i, kk;
            if (TRANS_A) { i = l % BM4; kk = l / BM4; } // A (k, m): contiguous in i
            else { kk = l % BK4; i = l / BK4; }         // A (m, k): contiguous in kk
            const int gi = row0 + i, gk = k0 + kk;
            float v = 0.0f;
            if (gi < m && gk < k) v = TRANS_A ? a[(size_t)gk * lda + gi] : a[(size_t)gi * lda + gk];
            as[kk][i] = v;
        }
#pragma unroll
        for (int q = 0; q < (BN4 * BK4) / TPB4; ++q) {
            const int l = tid + q * TPB4;
            int j, kk;
            if (TRANS_B) { kk = l % BK4; j = l / BK4; } // B (n, k): contiguous in kk
            else { j = l % BN4; kk = l / BN4; }         // B (k, n): contiguous in j
            const int gj = col0 + j, gk = k0 + kk;
            float v = 0.0f;
            if (gj < n && gk < k) v = TRANS_B ? b[(size_t)gj * ldb + gk] : b[(size_t)gk * ldb + gj];
            bs[kk][j] = v;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK4; ++kk) {
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

inline bool sgemm_v4(const Gemm &g, cudaStream_t st)
{
    const dim3 grid((g.n + BN4 - 1) / BN4, (g.m + BM4 - 1) / BM4, 1);
    if (!grid_fits(grid, "sgemm v4")) return false;
    STAGES_DISPATCH(sgemm_tile_v4, grid, TPB4, st, g, STAGES_GEMM_ARGS(g));
    return dev::launched("sgemm v4");
}

// Which of the engine's SGEMM kernels a stage runs (cuda/gemm.cu): the
// wide kernel on every product, the tile kernel (with the given tiles) on
// every product, or, as cnn_cuda_sgemm does, the wide kernel for products
// of at least 2^27 multiply-adds and the tile kernel below.
enum class Kernel { Wide, Tile, ByShape };

// The engine's SGEMM through the kernel `kernel` (tiles `tile`), with the
// context's precision as a Net of precision "tf32" (true) or "float32"
// sets it.
inline cnn_status engine_sgemm(const Gemm &g, cnn_ctx *ctx, Kernel kernel, int tile,
                               bool tf32 = false)
{
    const int saved_precision = ctx->precision;
    ctx->precision = tf32 ? CNN_PRECISION_TF32 : CNN_PRECISION_FLOAT32;
    const bool wide = kernel == Kernel::Wide ||
                      (kernel == Kernel::ByShape && cnn_cuda_sgemm_wide_fits(g.m, g.n, g.k));
    const cnn_status s =
        wide ? cnn_cuda_sgemm_wide(ctx, g.ta, g.tb, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb,
                                   g.beta, g.c, g.ldc, nullptr)
             : cnn_cuda_sgemm_tile(ctx, tile, g.ta, g.tb, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b,
                                   g.ldb, g.beta, g.c, g.ldc, nullptr);
    ctx->precision = saved_precision;
    return s;
}

// Whether the engine, as a Net of precision "tf32" runs it, multiplies an
// m x n x k product on TF32 tensor cores (its own rule: the wide kernel, on
// a GPU of compute capability 8.0 or later).
inline bool engine_sgemm_on_tf32(cnn_ctx *ctx, int m, int n, int k)
{
    const int saved_precision = ctx->precision;
    ctx->precision = CNN_PRECISION_TF32;
    const bool on = cnn_cuda_sgemm_tf32(ctx) && cnn_cuda_sgemm_wide_fits(m, n, k);
    ctx->precision = saved_precision;
    return on;
}

// ---- version 5: the engine's tile kernel on every product with scalar
// shared loads (cnn_cuda_sgemm_tile, CNN_TILE_SCALAR; cuda/gemm.cu): version 4's kernel with the next
// k step loaded into registers while the current one is multiplied, and K
// cut into slices when C has too few tiles to fill the GPU and K is long;
// the slices' partial tiles are summed in a fixed order. The engine's only
// SGEMM until the wide kernel.
inline bool sgemm_v5(const Gemm &g, cnn_ctx *ctx)
{
    return dev::engine_ok(engine_sgemm(g, ctx, Kernel::Tile, CNN_TILE_SCALAR),
                          "sgemm v5 (cnn_cuda_sgemm, tile64, scalar tile)");
}

// ---- version 6: the wide kernel on every product (cnn_cuda_sgemm under
// cnn_cuda_sgemm_wide; cuda/gemm_wide_kernels.cuh): BM x 128 tiles, BM = 32,
// 64 or 128 by the rows, 8x8 outputs per thread read as float4 from shared
// memory, K through a 3-stage cp.async pipeline (2 for BM = 128); split-K
// as in version 5.
inline bool sgemm_v6(const Gemm &g, cnn_ctx *ctx)
{
    return dev::engine_ok(engine_sgemm(g, ctx, Kernel::Wide, CNN_TILE_SHAPED),
                          "sgemm v6 (cnn_cuda_sgemm, wide)");
}

// ---- version 7: the engine's choice by size with the scalar tile (the
// engine until the shaped tiles): products
// of at least 2^27 multiply-adds on version 6's kernel, the others on
// version 5's. At these batch-32 shapes every product is below it, so
// version 7 times like version 5 here; at batch 512 the convolutions' are
// above it (BENCHMARKS.md).
inline bool sgemm_v7(const Gemm &g, cnn_ctx *ctx)
{
    return dev::engine_ok(engine_sgemm(g, ctx, Kernel::ByShape, CNN_TILE_SCALAR),
                          "sgemm v7 (cnn_cuda_sgemm, auto, scalar tile)");
}

// ---- version 8: the engine, cnn_cuda_sgemm: below 2^27 multiply-adds, tiles of 16,
// 32 or 64 rows by 32 or 64 columns fitted to m and n (a 32x27 filter
// gradient on a 32x32 tile, not a quarter of a 64x64 one), each thread's
// 4x4 outputs read from shared memory as float4 (2 loads per 16
// multiply-adds instead of 8) and stored as float4 where aligned; split-K
// aims at two waves of 256 threads' worth of blocks, and the slices are
// summed with up to 32 groups per output so that no thread adds more than 8.
inline bool sgemm_v8(const Gemm &g, cnn_ctx *ctx)
{
    return dev::engine_ok(engine_sgemm(g, ctx, Kernel::ByShape, CNN_TILE_SHAPED),
                          "sgemm v8 (cnn_cuda_sgemm, auto, shaped tiles)");
}

// ---- version 9: version 6 on TF32 tensor cores: the wide kernel on every
// product (cnn_cuda_sgemm_wide) of a Net with precision "tf32"
// (ctx->precision), sgemm_wide<BM, TA, TB, true> of
// cuda/gemm_wide_kernels.cuh: the same BM x 128 tiles, cp.async pipeline,
// split-K and epilogue, the multiply as mma.sync.m16n8k8 tf32 (the warps'
// layout is the header's: at this writing BM / 32 x 4 warps of 32 x 32
// outputs, each a 2 x 4 grid of 16 x 8 mma tiles), every operand rounded to
// TF32 (cvt.rna: 10 bits of mantissa) as it leaves shared memory, sums in
// fp32. Compute capability 8.0 or later only (sgemm.cu skips
// it on older GPUs, where the engine would multiply in fp32).
inline bool sgemm_v9(const Gemm &g, cnn_ctx *ctx)
{
    return dev::engine_ok(engine_sgemm(g, ctx, Kernel::Wide, CNN_TILE_SHAPED, true),
                          "sgemm v9 (cnn_cuda_sgemm, wide, tf32)");
}

// ---- version 10: the engine as a Net with precision "tf32" runs it
// (cnn_cuda_sgemm, ctx->precision): products
// of at least 2^27 multiply-adds on version 9's kernel, the others on version
// 8's fp32 tiles. At the batch-32 shapes every product is below (version 8's
// kernels and bits); the batch-512 products are above (version 9's).
inline bool sgemm_v10(const Gemm &g, cnn_ctx *ctx)
{
    return dev::engine_ok(engine_sgemm(g, ctx, Kernel::ByShape, CNN_TILE_SHAPED, true),
                          "sgemm v10 (cnn_cuda_sgemm, auto, shaped tiles, tf32)");
}

// ---- version 11: the engine's own entry, cnn_cuda_sgemm (cuda/gemm.cu):
// version 8, and a K of at most 32 above 2^27 multiply-adds (the first
// convolution's forward at batch 512: 27) on the short kernel (cuda/gemm_short_kernels.cuh: one thread a column,
// op(A) in shared memory, no tiles of K), and a product of at most 32
// columns above 2^27 multiply-adds (the first convolution's filter
// gradient at batch 512: 32 x 27) on the tile kernel's 32 columns with the
// wide kernel's slices of K instead of a quarter of its 128; since
// 2026-11-27 (eighth session) the partial sums of a split-K product of at
// most 32 x 32 outputs with B transposed (those filter gradients, and conv1's
// at batch 32 on the shaped tile) on the narrow kernel
// (cuda/gemm_narrow_kernels.cuh). The same bits as version 8 on every
// product (sgemm.cu checks it).
inline bool sgemm_v11(const Gemm &g, cnn_ctx *ctx)
{
    const int saved_precision = ctx->precision;
    ctx->precision = CNN_PRECISION_FLOAT32;
    const cnn_status s = cnn_cuda_sgemm(ctx, g.ta, g.tb, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b,
                                        g.ldb, g.beta, g.c, g.ldc);
    ctx->precision = saved_precision;
    return dev::engine_ok(s, "sgemm v11 (cnn_cuda_sgemm)");
}

} // namespace stages

#endif
