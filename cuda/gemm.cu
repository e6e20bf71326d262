// gemm.cu: the cuda engine's own SGEMM (no cuBLAS in this engine).
//
// C (m, n) = alpha op(A) op(B) + beta C, all row-major. Three kernels:
// gemm_wide_kernels.cuh, BM x 128 tiles with 8x8 outputs per thread (BM =
// 32 for at most 32 rows, else 64 or 128, whichever pads m least:
// wide_rows), for large products (at least
// WIDE_MIN_FMAS multiply-adds: the convolutions of the seed CNN at batch
// 512); gemm_kernels.cuh, tiles of 16, 32 or 64 rows by 32 or 64 columns
// with 4x4 outputs per thread, fitted to the product's m and n, for the
// rest. Below the threshold the small tiles' many blocks fill the GPU
// better: on an H100 (2026-11-25) the wide kernel was 10-40% slower on the
// seed CNN's products at batch 32 (dev/cuda/sgemm v5 against v6). And
// gemm_short_kernels.cuh for a K of at most 32 (a first convolution's
// forward) above the threshold: one thread a column, no tiles of K. A
// product of at most 32 columns above the threshold (a first
// convolution's filter gradient) runs on the tile kernel with the wide
// plan's slices (narrow_on_tile), with the column of ones of the row sums
// where asked (a convolution's bias gradient). The partial sums of a
// split-K product of at most 32 x 32 outputs with B transposed (that one,
// and the same at small batches on the shaped tiles) go to
// gemm_narrow_kernels.cuh instead where its rows are aligned
// (narrow_slices_fit). The short and narrow paths give the bits of the
// kernels they replace (the row sums are the tile kernel's). Outside TF32
// the wide kernel takes the row sums too, where the column of ones falls in
// its last tile's padding (wide_row_sums_fit). All take the
// convolution's fused layouts, bias and ReLU (cnn_sgemm_extra). This file
// plans and launches them; cnn_cuda_sgemm_wide and _tile reach the wide and
// the tile kernels on any product (dev/cuda's stages).
//
// Precisions "tf32", "bf16", "fp16" (ctx->precision, on a GPU of compute
// capability 8.0 or later): the wide kernel's tensor-core instances, which
// multiply on tensor cores (mma.sync m16n8k8 with operands rounded to TF32;
// m16n8k16 with operands rounded to bfloat16 or float16; sums in fp32). The
// tile kernel's small products stay fp32, and so do the short-K and narrow
// products (a first convolution's forward and filter gradient), whose fp32
// kernels beat the tensor-core tiles: those pad K = 27 to 32 and 28 columns
// to 128 (H100, batch 512, bf16, ncu: conv1's forward 91.5 -> 58.6 us, its
// filter and bias gradients 132.3 -> 68.5; BENCHMARKS.md). In bf16 and
// fp16, cnn_cuda_sgemm_b16 takes a B stored in those 16 bits (a
// convolution's column matrix: conv2d.cu) on the wide kernel's B16
// instances, where cnn_cuda_sgemm_ex would run the product on the wide
// kernel (cnn_cuda_sgemm_b16_fits): the same sums as from B in float32.
//
// Split-K: when C has too few tiles to fill the GPU and K is long (the
// convolution's filter gradient: a 32x27 result summed over 28,800 columns;
// a dense layer of batch 32: a 32x64 result summed over 1,024 inputs),
// blockIdx.z takes one slice of K and writes its partial tile to scratch;
// a second kernel adds the slices in a fixed order (deterministic) into C.
#include "gemm_kernels.cuh"
#include "gemm_narrow_kernels.cuh"
#include "gemm_short_kernels.cuh"
#include "gemm_wide_kernels.cuh"

using namespace cnn_gemm;

namespace {

// Slices of K for a product of `tiles` output tiles: enough blocks for two
// waves of `per_block` blocks an SM (the tile kernel: 256 threads' worth,
// so that blocks of a smaller tile count as one; the wide kernel: the
// blocks of its launch bounds), at least 64 columns of K per slice, and
// partial sums that fit the scratch. Sets *k_slice (a multiple of 16) and
// returns the number of slices.
int plan_slices(const cnn_cuda_impl *impl, int m, int n, int k, int tiles, int per_block,
                int *k_slice)
{
    int slices = 1;
    const int target = 2 * impl->sm_count * per_block;
    if (tiles < target && k >= 256) {
        slices = (target + tiles - 1) / tiles;
        slices = min(slices, k / 64);
        slices = (int)min((size_t)slices, impl->scratch_floats / ((size_t)m * n));
        if (slices < 1) slices = 1;
    }
    int ks = (k + slices - 1) / slices;
    ks = (ks + BK - 1) / BK * BK; // BK == WBK == 16
    *k_slice = ks;
    return k > 0 ? (k + ks - 1) / ks : 1;
}

// The wide kernel's row tile for m rows: 32 for at most 32 rows; else 64
// or 128, the one that pads m least, the larger on a near tie (larger tiles
// read B fewer times). The 32-row tile (64 threads, 166 registers) lost
// where it padded least: conv2's data gradient at batch 512 (288 rows) took
// 204.8 us on it, 179.4 on the 64-row tile and 200.7 on the 128-row one
// (H100, ncu, 2026-11-28; the epoch 0.117 -> 0.114 s).
int wide_rows(int m)
{
    if (m <= 32) return 32;
    const double cost64 = (double)((m + 63) / 64 * 64) * 1.03;
    const double cost128 = (double)((m + 127) / 128 * 128);
    return cost128 <= cost64 ? 128 : 64;
}

// The shaped tile for an (m, n) product: 16, 32 or 64 rows and 32 or 64
// columns, the smallest that covers m (n), else 64, so that a 32x28 filter
// gradient does not leave 3/4 of a 64x64 tile idle. 16x32 is the smallest:
// one warp.
int shaped_rows(int m) { return m <= 16 ? 16 : m <= 32 ? 32 : 64; }
int shaped_cols(int n) { return n <= 32 ? 32 : 64; }

// The 64x64 tile with A transposed (a convolution's data gradient) runs
// under launch bounds of four blocks an SM: 64 registers, no spills (69 and
// three blocks an SM unbound; the same bits either way, H100 2026-11-26).
template <int TBM, int TBN>
void launch_tile(cudaStream_t st, dim3 grid, int trans_a, int trans_b, int m, int n, int k,
                 int k_slice, float alpha, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc, float *partial, const cnn_sgemm_extra &x)
{
#define CNN_SGEMM_ARGS m, n, k, k_slice, alpha, a, lda, b, ldb, beta, c, ldc, partial, x
    constexpr int threads = (TBM / 4) * (TBN / 4);
    if (!trans_a && !trans_b)
        sgemm_tile<false, false, TBM, TBN><<<grid, threads, 0, st>>>(CNN_SGEMM_ARGS);
    else if (trans_a && !trans_b) {
        if constexpr (TBM == 64 && TBN == 64)
            sgemm_tile<true, false, 64, 64, true, 4><<<grid, threads, 0, st>>>(CNN_SGEMM_ARGS);
        else
            sgemm_tile<true, false, TBM, TBN><<<grid, threads, 0, st>>>(CNN_SGEMM_ARGS);
    }
    else if (!trans_a && trans_b)
        sgemm_tile<false, true, TBM, TBN><<<grid, threads, 0, st>>>(CNN_SGEMM_ARGS);
    else if constexpr (TBM == BM && TBN == BN) // both transposed: 64x64 only (unused by the layers)
        sgemm_tile<true, true, BM, BN><<<grid, threads, 0, st>>>(CNN_SGEMM_ARGS);
}

// A product of at most 32 columns would leave 3/4 of the wide kernel's
// 128-column tile idle (a first convolution's filter gradient: 32 x 27 over
// 460,800 pixels at batch 512). It runs on the tile kernel's 32 columns with
// the wide plan's slices of K: the same partial sums in the same order as
// the float32 wide kernel's, so the same bits, a quarter of the
// multiply-adds. In every precision: the tensor-core tiles would pad 28
// columns to 128 too.
bool narrow_on_tile(int trans_a, int trans_b, int n)
{
    return n <= 32 && !(trans_a && trans_b);
}

// Row sums (a convolution's bias gradient as the product's column of ones)
// on the wide kernel: B transposed, and only where the column of ones falls
// in the last tile's padding (n not a multiple of its 128 columns: no tile
// more). In float32; and in bf16 and fp16, whose tensor cores then sum op(A)
// rounded to 16 bits, as Keras's mixed policies sum the 16-bit upstream
// gradient for a bias gradient; not in TF32, which rounds the products'
// operands only. The kernel reads the ones from B's row n, which the caller
// fills (CNN_ROW_SUMS_READ_B). H100, batch 512: the channel sums' passes
// that they replace took 22.8 and 13.7 us a step for conv2 and conv3, the
// float32 epoch 0.097 -> 0.095 s (BENCHMARKS.md).
bool wide_row_sums_fit(int prec, int n)
{
    return prec != CNN_PRECISION_TF32 && n % WBN != 0;
}

// The partial sums of a split-K product of at most 32 x 32 outputs with B
// transposed (a first convolution's filter gradient, its bias gradient as
// the column of ones included) on the narrow kernel (gemm_narrow_kernels.cuh)
// instead of the tile kernel's 32-column tiles: the same slices, so the
// same bits. nc: the columns with the column of ones.
bool narrow_slices_fit(int trans_a, int trans_b, int m, int nc, int slices, const float *a,
                       int lda, const float *b, int ldb, const WideExtra &x)
{
    return !trans_a && trans_b && m <= NARROW_M && nc <= NARROW_N && slices > 1 &&
           narrow_slices_aligned(a, lda, b, ldb, x);
}

void launch_narrow_slices(cudaStream_t st, int slices, int m, int n, int k, int k_slice,
                          float alpha, const float *a, int lda, const float *b, int ldb,
                          float *partial, const WideExtra &x)
{
    sgemm_narrow_slices<<<slices, NARROW_THREADS, 0, st>>>(m, n, k, k_slice, alpha, a, lda, b,
                                                           ldb, partial, x);
}

template <int BM, int PREC>
void launch_wide(cudaStream_t st, dim3 grid, int trans_a, int trans_b, int m, int n, int k,
                 int k_slice, float alpha, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc, float *partial, WideExtra x)
{
#define CNN_WIDE_ARGS m, n, k, k_slice, alpha, a, lda, b, ldb, beta, c, ldc, partial, x
    if (!trans_a && !trans_b)
        sgemm_wide<BM, false, false, PREC><<<grid, wide_threads(BM, PREC), 0, st>>>(CNN_WIDE_ARGS);
    else if (trans_a && !trans_b)
        sgemm_wide<BM, true, false, PREC><<<grid, wide_threads(BM, PREC), 0, st>>>(CNN_WIDE_ARGS);
    else if (!trans_a && trans_b)
        sgemm_wide<BM, false, true, PREC><<<grid, wide_threads(BM, PREC), 0, st>>>(CNN_WIDE_ARGS);
    else
        sgemm_wide<BM, true, true, PREC><<<grid, wide_threads(BM, PREC), 0, st>>>(CNN_WIDE_ARGS);
#undef CNN_WIDE_ARGS
}

template <int PREC>
void launch_wide_rows(cudaStream_t st, int bm, dim3 grid, int trans_a, int trans_b, int m, int n,
                      int k, int k_slice, float alpha, const float *a, int lda, const float *b,
                      int ldb, float beta, float *c, int ldc, float *partial, WideExtra x)
{
#define CNN_WIDE_ARGS st, grid, trans_a, trans_b, m, n, k, k_slice, alpha, a, lda, b, ldb, beta, c, ldc, partial, x
    if (bm == 128) launch_wide<128, PREC>(CNN_WIDE_ARGS);
    else if (bm == 64) launch_wide<64, PREC>(CNN_WIDE_ARGS);
    else launch_wide<32, PREC>(CNN_WIDE_ARGS);
#undef CNN_WIDE_ARGS
}

// B in 16 bits (sgemm_wide's B16: A plain; bf16 or fp16)
template <int BM, int PREC>
void launch_wide16(cudaStream_t st, dim3 grid, int trans_b, int m, int n, int k, int k_slice,
                   float alpha, const float *a, int lda, const unsigned short *b, int ldb,
                   float beta, float *c, int ldc, float *partial, WideExtra x)
{
#define CNN_WIDE_ARGS m, n, k, k_slice, alpha, a, lda, b, ldb, beta, c, ldc, partial, x
    if (!trans_b)
        sgemm_wide<BM, false, false, PREC, true><<<grid, wide_threads(BM, PREC), 0, st>>>(CNN_WIDE_ARGS);
    else
        sgemm_wide<BM, false, true, PREC, true><<<grid, wide_threads(BM, PREC), 0, st>>>(CNN_WIDE_ARGS);
#undef CNN_WIDE_ARGS
}

template <int PREC>
void launch_wide16_rows(cudaStream_t st, int bm, dim3 grid, int trans_b, int m, int n, int k,
                        int k_slice, float alpha, const float *a, int lda,
                        const unsigned short *b, int ldb, float beta, float *c, int ldc,
                        float *partial, WideExtra x)
{
#define CNN_WIDE_ARGS st, grid, trans_b, m, n, k, k_slice, alpha, a, lda, b, ldb, beta, c, ldc, partial, x
    if (bm == 128) launch_wide16<128, PREC>(CNN_WIDE_ARGS);
    else if (bm == 64) launch_wide16<64, PREC>(CNN_WIDE_ARGS);
    else launch_wide16<32, PREC>(CNN_WIDE_ARGS);
#undef CNN_WIDE_ARGS
}

// The wide kernel's grid for a product: its row tile, the columns with the
// column of ones (row sums: the narrow path, or the wide kernel with a
// column to spare; the callers check), the slices of K and their scratch.
struct wide_grid {
    int bm, nc, slices, k_slice;
    float *partial;
};

cnn_status plan_wide(cnn_ctx *ctx, int m, int n, int k, const WideExtra &x, wide_grid *g)
{
    const cnn_cuda_impl *impl = (const cnn_cuda_impl *)ctx->impl;
    g->bm = wide_rows(m);
    if ((m + g->bm - 1) / g->bm > 65535)
        return cnn_set_error(CNN_ERR_VALUE, "sgemm: m = %d rows is too many for one grid", m);
    g->nc = x.row_sums ? n + 1 : n;
    const int tiles = ((g->nc + WBN - 1) / WBN) * ((m + g->bm - 1) / g->bm);
    // split-K aims at two waves of one block an SM; for the 32-row tile
    // (64 or 128 threads) of the blocks an SM holds (its launch bounds' 5).
    // H100, b512 (ncu, call 19): conv1's
    // filter gradient (32 x 27 over 460,800) ran as 262 blocks of 64
    // threads, 4 warps an SM, 195 us; as 1,310 blocks 160 us (+3 us of
    // sums). The 64-row products got slower with more slices (conv2's
    // filter gradient 147 -> 157 us, conv3's 32 -> 45 us, its forward 27
    // -> 44 us: more partial sums to write and add), so they keep one.
    const int per_sm = g->bm > 32 ? 1 : wide_min_blocks(g->bm, cnn_cuda_sgemm_precision(ctx));
    g->slices = plan_slices(impl, m, g->nc, k, tiles, per_sm, &g->k_slice);
    g->partial = g->slices > 1 ? impl->scratch : nullptr;
    return CNN_OK;
}

// narrow: a narrow product (narrow_on_tile) may go to the tile kernel (the
// engine's choice; false for the wide kernel by name)
cnn_status sgemm_wide_path(cnn_ctx *ctx, int trans_a, int trans_b, int m, int n, int k,
                           float alpha, const float *a, int lda, const float *b, int ldb,
                           float beta, float *c, int ldc, WideExtra x, bool narrow)
{
    wide_grid wg;
    CNN_TRY(plan_wide(ctx, m, n, k, x, &wg));
    const int bm = wg.bm, nc = wg.nc, slices = wg.slices, k_slice = wg.k_slice;
    float *partial = wg.partial;
    const int prec = cnn_cuda_sgemm_precision(ctx);
    cudaStream_t st = cnn_stream(ctx);
    if (narrow && narrow_on_tile(trans_a, trans_b, nc)) {
        // the same slices of K, so the same partial sums and bits, on the
        // narrow kernel where it takes them (batch 512, conv1's filter
        // gradient, ncu: H100 81.4 -> 64.3 us in its first version, H200
        // 65.5 -> 48.8 with its copies' pointers moved on per step;
        // BENCHMARKS.md), else on the tile kernel's 32 columns instead of
        // the wide kernel's 128 (narrow_on_tile)
        const int tbm = shaped_rows(m);
        const dim3 tgrid(1, (m + tbm - 1) / tbm, slices);
#define CNN_TILE_ARGS st, tgrid, trans_a, trans_b, m, n, k, k_slice, alpha, a, lda, b, ldb, beta, c, ldc, partial, x
        if (narrow_slices_fit(trans_a, trans_b, m, nc, slices, a, lda, b, ldb, x))
            launch_narrow_slices(st, slices, m, n, k, k_slice, alpha, a, lda, b, ldb, partial, x);
        else if (tbm == 64) launch_tile<64, 32>(CNN_TILE_ARGS);
        else if (tbm == 32) launch_tile<32, 32>(CNN_TILE_ARGS);
        else launch_tile<16, 32>(CNN_TILE_ARGS);
#undef CNN_TILE_ARGS
        CNN_CUDA_LAUNCHED("sgemm narrow");
    } else {
        dim3 grid((nc + WBN - 1) / WBN, (m + bm - 1) / bm, slices);
#define CNN_ROWS_ARGS st, bm, grid, trans_a, trans_b, m, n, k, k_slice, alpha, a, lda, b, ldb, beta, c, ldc, partial, x
        if (prec == CNN_PRECISION_TF32) launch_wide_rows<CNN_PRECISION_TF32>(CNN_ROWS_ARGS);
        else if (prec == CNN_PRECISION_BF16) launch_wide_rows<CNN_PRECISION_BF16>(CNN_ROWS_ARGS);
        else if (prec == CNN_PRECISION_FP16) launch_wide_rows<CNN_PRECISION_FP16>(CNN_ROWS_ARGS);
        else launch_wide_rows<CNN_PRECISION_FLOAT32>(CNN_ROWS_ARGS);
#undef CNN_ROWS_ARGS
        CNN_CUDA_LAUNCHED("sgemm wide");
    }
    if (slices > 1) {
        launch_sum_slices_wide(st, m, nc, slices, partial, beta, c, ldc, x);
        CNN_CUDA_LAUNCHED("sgemm wide split-k sum");
    }
    return CNN_OK;
}

// The engine's 64x64 tile before the shaped tiles (scalar shared loads and
// stores; CNN_TILE_SCALAR, dev/cuda's stages only).
void launch_scalar_tile(cudaStream_t st, dim3 grid, int trans_a, int trans_b, int m, int n,
                        int k, int k_slice, float alpha, const float *a, int lda, const float *b,
                        int ldb, float beta, float *c, int ldc, float *partial,
                        const cnn_sgemm_extra &x)
{
    if (!trans_a && !trans_b)
        sgemm_tile<false, false, BM, BN, false><<<grid, TPB, 0, st>>>(CNN_SGEMM_ARGS);
    else if (trans_a && !trans_b)
        sgemm_tile<true, false, BM, BN, false><<<grid, TPB, 0, st>>>(CNN_SGEMM_ARGS);
    else if (!trans_a && trans_b)
        sgemm_tile<false, true, BM, BN, false><<<grid, TPB, 0, st>>>(CNN_SGEMM_ARGS);
    else
        sgemm_tile<true, true, BM, BN, false><<<grid, TPB, 0, st>>>(CNN_SGEMM_ARGS);
#undef CNN_SGEMM_ARGS
}

// narrow: the shaped tiles' split-K products that the narrow kernel takes
// go to it (narrow_slices_fit: the engine's choice; false for the tile
// kernel by name)
cnn_status sgemm_tile_path(cnn_ctx *ctx, int tile, int trans_a, int trans_b, int m, int n,
                           int k, float alpha, const float *a, int lda, const float *b, int ldb,
                           float beta, float *c, int ldc, const cnn_sgemm_extra &x, bool extras,
                           bool narrow)
{
    const cnn_cuda_impl *impl = (const cnn_cuda_impl *)ctx->impl;
    const int nc = x.row_sums ? n + 1 : n; // with the column of ones
    int tbm = BM, tbn = BN;
    if (tile == CNN_TILE_SHAPED && !(trans_a && trans_b)) {
        tbm = shaped_rows(m);
        tbn = shaped_cols(nc);
    }
    if (m > 65535 * tbm)
        return cnn_set_error(CNN_ERR_VALUE, "sgemm: m = %d rows is too many for one grid", m);
    const int tiles = ((nc + tbn - 1) / tbn) * ((m + tbm - 1) / tbm);
    int k_slice;
    const int slices = plan_slices(impl, m, nc, k, tiles, TPB / ((tbm / 4) * (tbn / 4)), &k_slice);
    float *partial = slices > 1 ? impl->scratch : nullptr;
    dim3 grid((nc + tbn - 1) / tbn, (m + tbm - 1) / tbm, slices);
    cudaStream_t st = cnn_stream(ctx);
#define CNN_TILE_ARGS st, grid, trans_a, trans_b, m, n, k, k_slice, alpha, a, lda, b, ldb, beta, c, ldc, partial, x
    if (narrow && tile == CNN_TILE_SHAPED &&
        narrow_slices_fit(trans_a, trans_b, m, nc, slices, a, lda, b, ldb, x))
        launch_narrow_slices(st, slices, m, n, k, k_slice, alpha, a, lda, b, ldb, partial, x);
    else if (tile == CNN_TILE_SCALAR) launch_scalar_tile(CNN_TILE_ARGS);
    else if (tbm == 64 && tbn == 64) launch_tile<64, 64>(CNN_TILE_ARGS);
    else if (tbm == 64) launch_tile<64, 32>(CNN_TILE_ARGS);
    else if (tbm == 32 && tbn == 64) launch_tile<32, 64>(CNN_TILE_ARGS);
    else if (tbm == 32) launch_tile<32, 32>(CNN_TILE_ARGS);
    else if (tbn == 64) launch_tile<16, 64>(CNN_TILE_ARGS);
    else launch_tile<16, 32>(CNN_TILE_ARGS);
#undef CNN_TILE_ARGS
    CNN_CUDA_LAUNCHED("sgemm");
    if (slices > 1 && extras) {
        launch_sum_slices_wide(st, m, nc, slices, partial, beta, c, ldc, x);
        CNN_CUDA_LAUNCHED("sgemm split-k sum");
    } else if (slices > 1) {
        sum_slices<<<cnn_blocks((size_t)m * n, CNN_THREADS), CNN_THREADS, 0, st>>>(
            m, n, slices, partial, beta, c, ldc);
        CNN_CUDA_LAUNCHED("sgemm split-k sum");
    }
    return CNN_OK;
}

// A short K (gemm_short_kernels.cuh): one thread a column of C, and where
// the columns give fewer than two blocks an SM, the rows cut into groups (of
// at least 8) to make up the difference.
cnn_status sgemm_short_path(cnn_ctx *ctx, int trans_a, int m, int n, int k, float alpha,
                            const float *a, int lda, const float *b, int ldb, float beta,
                            float *c, int ldc, const WideExtra &x)
{
    const cnn_cuda_impl *impl = (const cnn_cuda_impl *)ctx->impl;
    const int col_blocks = (n + SHORT_THREADS - 1) / SHORT_THREADS;
    const int wanted = (2 * impl->sm_count + col_blocks - 1) / col_blocks;
    const int groups = max(1, min(wanted, (m + 7) / 8));
    const int rows = (m + groups - 1) / groups;
    const dim3 grid((unsigned)col_blocks, (unsigned)((m + rows - 1) / rows));
    cudaStream_t st = cnn_stream(ctx);
    if (trans_a)
        sgemm_short_k<true><<<grid, SHORT_THREADS, 0, st>>>(m, n, k, rows, alpha, a, lda, b, ldb,
                                                            beta, c, ldc, x);
    else if (k == 27) // a 3x3 convolution over three channels: k at compile time
        sgemm_short_k<false, 27><<<grid, SHORT_THREADS, 0, st>>>(m, n, k, rows, alpha, a, lda, b,
                                                                 ldb, beta, c, ldc, x);
    else
        sgemm_short_k<false><<<grid, SHORT_THREADS, 0, st>>>(m, n, k, rows, alpha, a, lda, b,
                                                             ldb, beta, c, ldc, x);
    CNN_CUDA_LAUNCHED("sgemm short k");
    return CNN_OK;
}

constexpr double WIDE_MIN_FMAS = 134217728.0; // 2^27

} // namespace

int cnn_cuda_sgemm_precision(cnn_ctx *ctx)
{
    return ((const cnn_cuda_impl *)ctx->impl)->tensor_cores ? ctx->precision
                                                             : CNN_PRECISION_FLOAT32;
}

bool cnn_cuda_sgemm_tf32(cnn_ctx *ctx)
{
    return cnn_cuda_sgemm_precision(ctx) == CNN_PRECISION_TF32;
}

bool cnn_cuda_sgemm_wide_fits(int m, int n, int k)
{
    return (double)m * n * k >= WIDE_MIN_FMAS;
}

namespace {

// How cnn_cuda_sgemm_ex takes row sums (cnn_row_sums_plan): below the wide
// threshold on the tile kernel, which makes the column of ones; above it on
// the narrow path's kernels, which make it too, or on the wide kernel, which
// reads it from B's row n; B transposed only.
int row_sums_plan(int prec, int trans_a, int trans_b, int m, int n, int k)
{
    if (!trans_b) return CNN_ROW_SUMS_NONE;
    if (!cnn_cuda_sgemm_wide_fits(m, n, k) || narrow_on_tile(trans_a, trans_b, n + 1))
        return CNN_ROW_SUMS_MADE;
    return wide_row_sums_fit(prec, n) ? CNN_ROW_SUMS_READ_B : CNN_ROW_SUMS_NONE;
}

} // namespace

int cnn_cuda_sgemm_row_sums(cnn_ctx *ctx, int m, int n, int k)
{
    return row_sums_plan(cnn_cuda_sgemm_precision(ctx), 0, 1, m, n, k);
}

namespace {

const WideExtra NO_EXTRA = {0, 0, 0, nullptr, 0, 0, nullptr};

bool has_extras(const WideExtra &x)
{
    return x.ap > 0 || x.bp > 0 || x.cp > 0 || x.bias || x.relu || x.row_sums;
}

// sums_fit: whether the kernel to run takes row sums (with B transposed)
cnn_status check_extra(const WideExtra &x, bool sums_fit, int trans_a, int trans_b, float beta)
{
    if ((x.ap > 0 && trans_a) || (x.bp > 0 && trans_b))
        return cnn_set_error(CNN_ERR_INTERNAL, "sgemm: a batched operand cannot be transposed");
    if (x.row_sums && (!sums_fit || !trans_b || beta != 0.0f))
        return cnn_set_error(CNN_ERR_INTERNAL,
                             "sgemm: row sums need the tile kernel or the wide kernel (not TF32) "
                             "with a column to spare, a transposed B and beta = 0");
    return CNN_OK;
}

} // namespace

cnn_status cnn_cuda_sgemm_wide(cnn_ctx *ctx, int trans_a, int trans_b, int m, int n, int k,
                               float alpha, const float *a, int lda, const float *b, int ldb,
                               float beta, float *c, int ldc, const cnn_sgemm_extra *extra)
{
    if (m <= 0 || n <= 0) return CNN_OK;
    const WideExtra x = extra ? *extra : NO_EXTRA;
    CNN_TRY(check_extra(x, wide_row_sums_fit(cnn_cuda_sgemm_precision(ctx), n), trans_a, trans_b,
                        beta));
    return sgemm_wide_path(ctx, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, x,
                           false);
}

cnn_status cnn_cuda_sgemm_tile(cnn_ctx *ctx, int tile, int trans_a, int trans_b, int m, int n,
                               int k, float alpha, const float *a, int lda, const float *b,
                               int ldb, float beta, float *c, int ldc,
                               const cnn_sgemm_extra *extra)
{
    if (m <= 0 || n <= 0) return CNN_OK;
    if (tile != CNN_TILE_SHAPED && tile != CNN_TILE_SQUARE && tile != CNN_TILE_SCALAR)
        return cnn_set_error(CNN_ERR_INTERNAL, "sgemm: unknown tile %d", tile);
    const WideExtra x = extra ? *extra : NO_EXTRA;
    CNN_TRY(check_extra(x, true, trans_a, trans_b, beta));
    return sgemm_tile_path(ctx, tile, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                           ldc, x, has_extras(x), false);
}

cnn_status cnn_cuda_sgemm_ex(cnn_ctx *ctx, int trans_a, int trans_b, int m, int n, int k,
                             float alpha, const float *a, int lda, const float *b, int ldb,
                             float beta, float *c, int ldc, const cnn_sgemm_extra *extra)
{
    if (m <= 0 || n <= 0) return CNN_OK;
    const WideExtra x = extra ? *extra : NO_EXTRA;
    const int sums = row_sums_plan(cnn_cuda_sgemm_precision(ctx), trans_a, trans_b, m, n, k);
    CNN_TRY(check_extra(x, sums != CNN_ROW_SUMS_NONE, trans_a, trans_b, beta));
    const bool wide = cnn_cuda_sgemm_wide_fits(m, n, k);
    // a short K above the wide threshold, in every precision (below it the
    // tile kernel was as fast or faster: 7.3 against 8.6 us for the seed
    // CNN's conv1 forward at batch 32, H100, 2026-11-28; BENCHMARKS.md); no
    // row sums there (short_k_fits)
    if (wide && short_k_fits(m, k, trans_b, x.ap, x.row_sums))
        return sgemm_short_path(ctx, trans_a, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, x);
    if (wide)
        return sgemm_wide_path(ctx, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                               ldc, x, true);
    return sgemm_tile_path(ctx, CNN_TILE_SHAPED, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                           beta, c, ldc, x, has_extras(x), true);
}

cnn_status cnn_cuda_sgemm(cnn_ctx *ctx, int trans_a, int trans_b, int m, int n, int k,
                          float alpha, const float *a, int lda, const float *b, int ldb,
                          float beta, float *c, int ldc)
{
    return cnn_cuda_sgemm_ex(ctx, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                             nullptr);
}

bool cnn_cuda_sgemm_b16_fits(cnn_ctx *ctx, int trans_b, int m, int n, int k, int row_sums)
{
    const int prec = cnn_cuda_sgemm_precision(ctx);
    const float one = 1.0f; // short_k_fits asks only whether there are row sums
    return (prec == CNN_PRECISION_BF16 || prec == CNN_PRECISION_FP16) &&
           cnn_cuda_sgemm_wide_fits(m, n, k) &&
           !short_k_fits(m, k, trans_b, 0, row_sums ? &one : nullptr) &&
           !narrow_on_tile(0, trans_b, row_sums ? n + 1 : n);
}

cnn_status cnn_cuda_sgemm_b16(cnn_ctx *ctx, int trans_b, int m, int n, int k, float alpha,
                              const float *a, int lda, const uint16_t *b, int ldb, float beta,
                              float *c, int ldc, const cnn_sgemm_extra *extra)
{
    if (m <= 0 || n <= 0) return CNN_OK;
    const WideExtra x = extra ? *extra : NO_EXTRA;
    const int prec = cnn_cuda_sgemm_precision(ctx);
    if (!cnn_cuda_sgemm_b16_fits(ctx, trans_b, m, n, k, x.row_sums != nullptr))
        return cnn_set_error(CNN_ERR_INTERNAL,
                             "sgemm_b16: a %d x %d x %d product (trans_b %d, precision %d) does "
                             "not go to the wide kernel's 16-bit instances",
                             m, n, k, trans_b, prec);
    if (x.bp > 0 || ldb % 8 != 0 || ((uintptr_t)b & 15) != 0)
        return cnn_set_error(CNN_ERR_INTERNAL,
                             "sgemm_b16: B must be plain with 16-byte aligned rows (ldb %d)", ldb);
    CNN_TRY(check_extra(x, wide_row_sums_fit(prec, n), 0, trans_b, beta));
    wide_grid wg;
    CNN_TRY(plan_wide(ctx, m, n, k, x, &wg));
    const dim3 grid((wg.nc + WBN - 1) / WBN, (m + wg.bm - 1) / wg.bm, wg.slices);
    cudaStream_t st = cnn_stream(ctx);
    const unsigned short *b16 = (const unsigned short *)b;
#define CNN_ROWS_ARGS st, wg.bm, grid, trans_b, m, n, k, wg.k_slice, alpha, a, lda, b16, ldb, beta, c, ldc, wg.partial, x
    if (prec == CNN_PRECISION_BF16) launch_wide16_rows<CNN_PRECISION_BF16>(CNN_ROWS_ARGS);
    else launch_wide16_rows<CNN_PRECISION_FP16>(CNN_ROWS_ARGS);
#undef CNN_ROWS_ARGS
    CNN_CUDA_LAUNCHED("sgemm wide, B in 16 bits");
    if (wg.slices > 1) {
        launch_sum_slices_wide(st, m, wg.nc, wg.slices, wg.partial, beta, c, ldc, x);
        CNN_CUDA_LAUNCHED("sgemm wide split-k sum");
    }
    return CNN_OK;
}
