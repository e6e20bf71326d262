// conv2d_winograd.cuh: a 3x3, stride-1 convolution forward by Winograd's
// F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2015), for conv2d_winograd.cu (issue #29: a float32
// step cannot reach 0.05 s/epoch on the multiplies of the column matrices;
// this one needs 16 instead of 36 for each 2x2 block of outputs).
//
// Each 2x2 block of outputs ("tile", (oh + 1) / 2 by (ow + 1) / 2 a plane,
// n times that in all) reads a 4x4 patch d of each input channel:
//   y_tile = A^T [ sum_c (G g_c G^T) .* (B^T d_c B) ] A,
// with U = G g G^T (16 numbers per filter and channel), V = B^T d B (16 per
// tile and channel), and for each of the 16 positions xi of the 4x4 a product
// M_xi (tiles x filters) = V_xi (tiles x c) U_xi (c x filters).
//
// The kernels:
//   winograd_filters: U (16, c, f) from W (f, c, 3, 3), one thread a
//     (filter, channel) (once a step in an engine: the weights change once).
//   winograd_forward: one block of WG_THREADS for WG_TILES tiles by WG_FILTERS
//     filters, over the channels CC at a time: it forms the chunk's V (from x)
//     and copies its U into shared memory, then for each xi a 4 x 4 product a
//     thread (4 tiles by 4 filters, over the chunk's channels) and adds it,
//     times A's signs, into the thread's 2x2 outputs of its 16 (tile, filter)
//     pairs (A^T M A is linear in M: each chunk's share is added as it
//     comes, so no thread holds the 16 M's). Then the bias, and the stores.
//   winograd_forward_piped: the same, the next chunk's patches and U copied
//     by cp.async while this one is multiplied.
//   winograd_forward_rows: the same, the chunk's input rows staged in shared
//     memory by coalesced cp.async copies, the patches read from there.
// What they measured (one H200, BENCHMARKS.md): at conv2, batch 512, the
// best is 1.1x the engine's im2col + SGEMM; each chunk's A^T M A adds 28%
// to the multiply-adds (8 channels a chunk), and the 64 accumulators a
// thread leave two blocks an SM only at 128 registers (spilling).
// Order of the additions: not the column matrices' (a float32 result within
// the program's stated tolerance, not the engine's bits); integer inputs
// give exact integers (U's quarters and V's integers are exact in float32).
#ifndef DEV_CUDA_CONV2D_WINOGRAD_CUH
#define DEV_CUDA_CONV2D_WINOGRAD_CUH

#include <cstdio>

#include "async_copy.cuh"
#include "cnn.h"

namespace dev {
namespace winograd {

constexpr int WG_TILES = 64, WG_FILTERS = 64, WG_THREADS = 256;
static_assert(WG_THREADS == (WG_TILES / 4) * (WG_FILTERS / 4), "a thread: 4 tiles by 4 filters");

inline bool applies(const cnn_conv_desc &d)
{
    return d.kh == 3 && d.kw == 3 && d.sh == 1 && d.sw == 1;
}
__host__ __device__ inline int tiles_down(const cnn_conv_desc &d) { return (d.oh + 1) / 2; }
__host__ __device__ inline int tiles_across(const cnn_conv_desc &d) { return (d.ow + 1) / 2; }
inline size_t u_floats(const cnn_conv_desc &d) { return (size_t)16 * d.c * d.f; }
template <int CC>
constexpr size_t shared_bytes()
{
    return (size_t)16 * CC * (WG_TILES + WG_FILTERS) * sizeof(float);
}

// U (16, c, f): u[(xi c + ch) f + k] = (G g G^T)[xi / 4][xi % 4], g the 3x3
// of filter k, channel ch; G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1].
__global__ void winograd_filters(int f, int c, const float *__restrict__ w, float *__restrict__ u)
{
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= f * c) return;
    const int k = e % f, ch = e / f; // consecutive threads: consecutive filters (u's stores)
    const float *g = w + ((size_t)k * c + ch) * 9;
    float t[4][3]; // G g
    for (int j = 0; j < 3; ++j) {
        const float g0 = g[j], g1 = g[3 + j], g2 = g[6 + j];
        t[0][j] = g0;
        t[1][j] = 0.5f * (g0 + g1 + g2);
        t[2][j] = 0.5f * (g0 - g1 + g2);
        t[3][j] = g2;
    }
    for (int i = 0; i < 4; ++i) { // (G g) G^T
        const float r[4] = {t[i][0], 0.5f * (t[i][0] + t[i][1] + t[i][2]),
                            0.5f * (t[i][0] - t[i][1] + t[i][2]), t[i][2]};
        for (int j = 0; j < 4; ++j) u[((size_t)(i * 4 + j) * c + ch) * f + k] = r[j];
    }
}

// A^T's entries (2 x 4): the sign with which M_xi's row p adds to output row
// a (and its column q to output column b).
__device__ constexpr int at_sign(int a, int p)
{
    return a == 0 ? (p < 3 ? 1 : 0) : (p == 0 ? 0 : p == 1 ? 1 : -1);
}

// V = B^T p B, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]: v[a * 4 + q].
__device__ __forceinline__ void input_transform(const float p[4][4], float v[16])
{
    float s[4][4]; // B^T p
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        s[0][q] = p[0][q] - p[2][q];
        s[1][q] = p[1][q] + p[2][q];
        s[2][q] = p[2][q] - p[1][q];
        s[3][q] = p[1][q] - p[3][q];
    }
#pragma unroll
    for (int a = 0; a < 4; ++a) { // (B^T p) B
        v[a * 4 + 0] = s[a][0] - s[a][2];
        v[a * 4 + 1] = s[a][1] + s[a][2];
        v[a * 4 + 2] = s[a][2] - s[a][1];
        v[a * 4 + 3] = s[a][1] - s[a][3];
    }
}

// Tile t's image and its first output row and column (2 ty, 2 tx); its 4x4
// patch of the input starts pad_top rows and pad_left columns before them.
struct tile_at {
    int img, row0, col0;
};
__device__ __forceinline__ tile_at tile_origin(const cnn_conv_desc &d, int t, int tw, int plane_tiles)
{
    const int img = t / plane_tiles, r = t - img * plane_tiles;
    return {img, 2 * (r / tw), 2 * (r % tw)};
}

// A chunk's share of the thread's outputs: for each xi the 4 x 4 product of
// the chunk's CC channels (tiles tt * 4 + i, filters tk * 4 + j), added to
// acc times A's signs (A^T M A, one xi at a time).
template <int CC>
__device__ __forceinline__ void chunk_products(const float *vs, const float *us, int tt, int tk,
                                               float (&acc)[4][4][4])
{
#pragma unroll
    for (int xi = 0; xi < 16; ++xi) {
        float m[4][4] = {};
#pragma unroll
        for (int cc = 0; cc < CC; ++cc) {
            const float4 va = *reinterpret_cast<const float4 *>(&vs[(xi * CC + cc) * WG_TILES + tt * 4]);
            const float4 ua = *reinterpret_cast<const float4 *>(&us[(xi * CC + cc) * WG_FILTERS + tk * 4]);
            const float av[4] = {va.x, va.y, va.z, va.w}, uv[4] = {ua.x, ua.y, ua.z, ua.w};
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) m[i][j] = fmaf(av[i], uv[j], m[i][j]);
        }
        const int p = xi / 4, q = xi % 4;
#pragma unroll
        for (int a = 0; a < 2; ++a)
#pragma unroll
            for (int bb = 0; bb < 2; ++bb) {
                const int sign = at_sign(a, p) * at_sign(bb, q);
                if (sign == 0) continue;
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j)
                        acc[i][j][a * 2 + bb] += sign > 0 ? m[i][j] : -m[i][j];
            }
    }
}

// The bias, and each of the thread's tiles' 2x2 outputs inside the plane
// (the block's tiles: t0 + 0, 1, ... below t_end).
__device__ __forceinline__ void store_outputs(const cnn_conv_desc &d, int t0, int t_end, int k0, int tt,
                                              int tk, const float (&acc)[4][4][4],
                                              const float *__restrict__ b, float *__restrict__ y)
{
    const int tw = tiles_across(d), plane_tiles = tiles_down(d) * tw;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int t = t0 + tt * 4 + i;
        if (t >= t_end) continue;
        const tile_at o = tile_origin(d, t, tw, plane_tiles);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int k = k0 + tk * 4 + j;
            if (k >= d.f) continue;
            const float bias = b ? b[k] : 0.0f;
            float *yp = y + ((size_t)o.img * d.f + k) * d.oh * d.ow;
#pragma unroll
            for (int a = 0; a < 2; ++a)
#pragma unroll
                for (int bb = 0; bb < 2; ++bb)
                    if (o.row0 + a < d.oh && o.col0 + bb < d.ow)
                        yp[(size_t)(o.row0 + a) * d.ow + o.col0 + bb] = acc[i][j][a * 2 + bb] + bias;
        }
    }
}

// U's chunk (channels c0.., filters k0..) copied into ub[(xi CC + cc)
// WG_FILTERS + filter] by cp.async (zeros past the channels and filters), 16
// bytes a copy with U16 (f a multiple of 4: u's rows 16-byte aligned), else
// 4; not committed.
template <int CC, bool U16>
__device__ __forceinline__ void copy_u_chunk(float *ub, const float *u, const cnn_conv_desc &d, int c0,
                                             int k0, int tid)
{
    if constexpr (U16) {
        for (int e = tid; e < 4 * CC * WG_FILTERS; e += WG_THREADS) {
            const int kl = e % (WG_FILTERS / 4) * 4, cc = e / (WG_FILTERS / 4) % CC;
            const int xi = e / (WG_FILTERS / 4 * CC), k = k0 + kl, ch = c0 + cc;
            const int count = ch < d.c ? max(0, min(4, d.f - k)) : 0;
            async_copy16(&ub[e * 4], count > 0 ? u + ((size_t)xi * d.c + ch) * d.f + k : u, count);
        }
    } else {
        for (int e = tid; e < 16 * CC * WG_FILTERS; e += WG_THREADS) {
            const int kl = e % WG_FILTERS, cc = e / WG_FILTERS % CC, xi = e / (WG_FILTERS * CC);
            const int k = k0 + kl, ch = c0 + cc;
            const bool ok = k < d.f && ch < d.c;
            async_copy(&ub[e], ok ? u + ((size_t)xi * d.c + ch) * d.f + k : u, ok);
        }
    }
}

// x (n, c, h, w), u (16, c, f), b (f) or NULL -> y (n, f, oh, ow).
// Grid: (ceil(P / WG_TILES), ceil(f / WG_FILTERS)); shared_bytes<CC>() of
// dynamic shared memory. Each chunk: loads (global -> registers -> V and U
// in shared memory), a barrier, the products, a barrier.
template <int CC, int MIN_BLOCKS>
__global__ void __launch_bounds__(WG_THREADS, MIN_BLOCKS)
winograd_forward(cnn_conv_desc d, const float *__restrict__ x, const float *__restrict__ u,
                 const float *__restrict__ b, float *__restrict__ y)
{
    extern __shared__ __align__(16) float smem[];
    float *vs = smem;                        // vs[(xi CC + cc) WG_TILES + tile]
    float *us = smem + 16 * CC * WG_TILES;   // us[(xi CC + cc) WG_FILTERS + filter]
    const int tid = threadIdx.x, tt = tid % (WG_TILES / 4), tk = tid / (WG_TILES / 4);
    const int tw = tiles_across(d), plane_tiles = tiles_down(d) * tw, n_tiles = d.n * plane_tiles;
    const int t0 = blockIdx.x * WG_TILES, k0 = blockIdx.y * WG_FILTERS;
    float acc[4][4][4] = {}; // [tile i][filter j][output a * 2 + b]

    for (int c0 = 0; c0 < d.c; c0 += CC) {
        __syncthreads(); // the chunk before is read
        for (int e = tid; e < CC * WG_TILES; e += WG_THREADS) {
            const int tl = e % WG_TILES, cc = e / WG_TILES;
            const int t = t0 + tl, ch = c0 + cc;
            float v[16] = {};
            if (t < n_tiles && ch < d.c) {
                tile_at o = tile_origin(d, t, tw, plane_tiles);
                o.row0 -= d.pad_top;
                o.col0 -= d.pad_left;
                const float *xp = x + ((size_t)o.img * d.c + ch) * d.h * d.w;
                float p[4][4];
#pragma unroll
                for (int a = 0; a < 4; ++a)
#pragma unroll
                    for (int q = 0; q < 4; ++q) {
                        const int row = o.row0 + a, col = o.col0 + q;
                        p[a][q] = row >= 0 && row < d.h && col >= 0 && col < d.w
                                      ? xp[(size_t)row * d.w + col] : 0.0f;
                    }
                input_transform(p, v);
            }
#pragma unroll
            for (int xi = 0; xi < 16; ++xi) vs[(xi * CC + cc) * WG_TILES + tl] = v[xi];
        }
        // U's chunk: 0 past the filters and the channels
        for (int e = tid; e < 16 * CC * WG_FILTERS; e += WG_THREADS) {
            const int kl = e % WG_FILTERS, cc = e / WG_FILTERS % CC, xi = e / (WG_FILTERS * CC);
            const int k = k0 + kl, ch = c0 + cc;
            us[e] = k < d.f && ch < d.c ? u[((size_t)xi * d.c + ch) * d.f + k] : 0.0f;
        }
        __syncthreads();
        chunk_products<CC>(vs, us, tt, tk, acc);
    }
    store_outputs(d, t0, min(t0 + WG_TILES, n_tiles), k0, tt, tk, acc, b, y);
}

// The same with the loads of chunk i + 1 in flight while chunk i is
// transformed and multiplied: each chunk's 4x4 patches and its U copied by
// cp.async (zeros in the padding and past the channels and filters) into
// one of two buffers, raw[2][CC][WG_TILES][16] and us[2][16 CC WG_FILTERS];
// V formed from the raw patches into vs[16 CC WG_TILES].
template <int CC>
constexpr size_t piped_shared_bytes()
{
    return (size_t)(2 * CC * WG_TILES * 16 + 2 * 16 * CC * WG_FILTERS + 16 * CC * WG_TILES) * sizeof(float);
}

template <int CC, int MIN_BLOCKS>
__global__ void __launch_bounds__(WG_THREADS, MIN_BLOCKS)
winograd_forward_piped(cnn_conv_desc d, const float *__restrict__ x, const float *__restrict__ u,
                       const float *__restrict__ b, float *__restrict__ y)
{
    extern __shared__ __align__(16) float smem[];
    float *raw = smem;                              // raw[buf][cc][tile][16]
    float *us = raw + 2 * CC * WG_TILES * 16;       // us[buf][(xi CC + cc) WG_FILTERS + filter]
    float *vs = us + 2 * 16 * CC * WG_FILTERS;      // vs[(xi CC + cc) WG_TILES + tile]
    const int tid = threadIdx.x, tt = tid % (WG_TILES / 4), tk = tid / (WG_TILES / 4);
    const int tw = tiles_across(d), plane_tiles = tiles_down(d) * tw, n_tiles = d.n * plane_tiles;
    const int t0 = blockIdx.x * WG_TILES, k0 = blockIdx.y * WG_FILTERS;
    float acc[4][4][4] = {};

    // chunk c0's copies into buffer buf, as one group
    auto issue = [&](int c0, int buf) {
        float *r = raw + buf * CC * WG_TILES * 16;
        for (int e = tid; e < CC * WG_TILES * 16; e += WG_THREADS) {
            const int q = e % 4, a = e / 4 % 4, tl = e / 16 % WG_TILES, cc = e / (16 * WG_TILES);
            const int t = t0 + tl, ch = c0 + cc;
            bool ok = t < n_tiles && ch < d.c;
            const float *src = x;
            if (ok) {
                const tile_at o = tile_origin(d, t, tw, plane_tiles);
                const int row = o.row0 - d.pad_top + a, col = o.col0 - d.pad_left + q;
                ok = row >= 0 && row < d.h && col >= 0 && col < d.w;
                if (ok) src = x + (((size_t)o.img * d.c + ch) * d.h + row) * d.w + col;
            }
            async_copy(&r[e], src, ok);
        }
        copy_u_chunk<CC, false>(us + buf * 16 * CC * WG_FILTERS, u, d, c0, k0, tid);
        async_commit();
    };

    issue(0, 0);
    for (int c0 = 0, i = 0; c0 < d.c; c0 += CC, ++i) {
        const int buf = i & 1;
        if (c0 + CC < d.c) {
            issue(c0 + CC, buf ^ 1);
            async_wait<1>(); // chunk i's group is in
        } else {
            async_wait<0>();
        }
        __syncthreads();
        const float *r = raw + buf * CC * WG_TILES * 16;
        for (int e = tid; e < CC * WG_TILES; e += WG_THREADS) {
            const int tl = e % WG_TILES, cc = e / WG_TILES;
            float p[4][4], v[16];
            const float4 *rp = reinterpret_cast<const float4 *>(&r[e * 16]);
#pragma unroll
            for (int a = 0; a < 4; ++a) {
                const float4 row = rp[a];
                p[a][0] = row.x, p[a][1] = row.y, p[a][2] = row.z, p[a][3] = row.w;
            }
            input_transform(p, v);
#pragma unroll
            for (int xi = 0; xi < 16; ++xi) vs[(xi * CC + cc) * WG_TILES + tl] = v[xi];
        }
        __syncthreads();
        chunk_products<CC>(vs, us + buf * 16 * CC * WG_FILTERS, tt, tk, acc);
        __syncthreads(); // vs and this buffer are read before they are written again
    }
    store_outputs(d, t0, min(t0 + WG_TILES, n_tiles), k0, tt, tk, acc, b, y);
}

// The chunk's input rows staged in shared memory first, copied coalesced
// (consecutive threads, consecutive columns) by cp.async, as U's chunk (16
// bytes a copy where f is a multiple of 4): the block takes rb = WG_TILES / tw whole rows of tiles (the tiles
// t0 = blockIdx.x rb tw, ... below t0 + rb tw; tw <= WG_TILES), and for each
// of them (tile row rl) and each channel cc of the chunk stages the 4 input
// rows a (line (rl 4 + a) CC + cc) its patches read, from column -pad_left
// on, 2 tw + 2 columns padded to a power of two, wpp (zeros in the padding):
// rows[line wpp + column]. Each (rl, a)'s offset in x (channel 0; -1 where
// the row is padding or past the batch) is worked out once, in lines0.
// The patches are then read from rows.
constexpr int ROWS_PER_CHANNEL = 1024; // floats of rows a channel, at most
__host__ __device__ inline int rows_padded_width(int tw)
{
    int w = 1;
    while (w < 2 * tw + 2) w *= 2;
    return w;
}
template <int CC>
constexpr size_t rows_shared_bytes()
{
    return shared_bytes<CC>() + (size_t)CC * ROWS_PER_CHANNEL * sizeof(float) + 4 * WG_TILES * sizeof(long long);
}

template <int CC, int MIN_BLOCKS>
__global__ void __launch_bounds__(WG_THREADS, MIN_BLOCKS)
winograd_forward_rows(cnn_conv_desc d, int rb, const float *__restrict__ x, const float *__restrict__ u,
                      const float *__restrict__ b, float *__restrict__ y)
{
    static_assert((CC & (CC - 1)) == 0, "CC a power of two");
    extern __shared__ __align__(16) float smem[];
    float *vs = smem;                            // vs[(xi CC + cc) WG_TILES + tile]
    float *us = vs + 16 * CC * WG_TILES;         // us[(xi CC + cc) WG_FILTERS + filter]
    float *rows = us + 16 * CC * WG_FILTERS;     // rows[((rl 4 + a) CC + cc) wpp + column]
    long long *lines0 = reinterpret_cast<long long *>(rows + CC * ROWS_PER_CHANNEL); // [rl 4 + a]
    const int tid = threadIdx.x, tt = tid % (WG_TILES / 4), tk = tid / (WG_TILES / 4);
    const int th = tiles_down(d), tw = tiles_across(d), wpp = rows_padded_width(tw);
    const int wshift = __ffs(wpp) - 1, cshift = __ffs(CC) - 1;
    const int tile_rows = d.n * th, r0 = blockIdx.x * rb, block_tiles = rb * tw;
    const int t0 = r0 * tw, k0 = blockIdx.y * WG_FILTERS;
    const int t_end = min(t0 + block_tiles, tile_rows * tw);
    const long long plane = (long long)d.h * d.w;
    const bool u16 = d.f % 4 == 0; // u's rows 16-byte aligned (u is)
    float acc[4][4][4] = {};

    for (int e = tid; e < 4 * rb; e += WG_THREADS) {
        const int a = e % 4, gr = r0 + e / 4;
        const int img = gr / th, row = 2 * (gr - img * th) - d.pad_top + a;
        lines0[e] = gr < tile_rows && row >= 0 && row < d.h
                        ? (long long)img * d.c * plane + (long long)row * d.w : -1;
    }
    const int staged = 4 * rb * CC * wpp;
    for (int c0 = 0; c0 < d.c; c0 += CC) {
        __syncthreads(); // the chunk before is read (and, the first time, lines0 written)
        for (int e = tid; e < staged; e += WG_THREADS) {
            const int line = e >> wshift, col = (e & (wpp - 1)) - d.pad_left;
            const int ch = c0 + (line & (CC - 1));
            const long long off = lines0[line >> cshift];
            const bool ok = off >= 0 && ch < d.c && col >= 0 && col < d.w;
            async_copy(&rows[e], ok ? x + off + ch * plane + col : x, ok);
        }
        if (u16)
            copy_u_chunk<CC, true>(us, u, d, c0, k0, tid);
        else
            copy_u_chunk<CC, false>(us, u, d, c0, k0, tid);
        async_commit();
        async_wait<0>();
        __syncthreads();
        for (int e = tid; e < CC * WG_TILES; e += WG_THREADS) {
            const int tl = e % WG_TILES, cc = e / WG_TILES;
            float v[16] = {};
            if (tl < block_tiles) {
                const int rl = tl / tw, tx = tl - rl * tw;
                const float *p0 = rows + ((rl * 4) * CC + cc) * wpp + 2 * tx;
                float p[4][4];
#pragma unroll
                for (int a = 0; a < 4; ++a)
#pragma unroll
                    for (int q = 0; q < 4; ++q) p[a][q] = p0[a * CC * wpp + q];
                input_transform(p, v);
            }
#pragma unroll
            for (int xi = 0; xi < 16; ++xi) vs[(xi * CC + cc) * WG_TILES + tl] = v[xi];
        }
        __syncthreads();
        chunk_products<CC>(vs, us, tt, tk, acc);
    }
    store_outputs(d, t0, t_end, k0, tt, tk, acc, b, y);
}

// Whether a launch went (else says why on stderr).
inline bool went(const char *what, cudaError_t e)
{
    if (e == cudaSuccess) return true;
    fprintf(stderr, "winograd %s: %s\n", what, cudaGetErrorString(e));
    return false;
}

// How the kernel reads a chunk's patches (forward's KIND).
enum class Loads { PATCHES, PIPED, ROWS };

// Whether winograd_forward_rows takes the shape: a row of tiles fits a
// block, and the block's staged rows fit ROWS_PER_CHANNEL a channel.
inline bool rows_fit(const cnn_conv_desc &d)
{
    const int tw = tiles_across(d);
    return tw <= WG_TILES && 4 * (WG_TILES / tw) * rows_padded_width(tw) <= ROWS_PER_CHANNEL;
}

// kernel on st with smem bytes of dynamic shared memory (false, said on
// stderr, where it did not launch).
template <typename Kernel, typename... Args>
bool launch(Kernel kernel, size_t smem, dim3 grid, cudaStream_t st, Args... args)
{
    if (!went("shared memory",
              cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)))
        return false;
    kernel<<<grid, WG_THREADS, smem, st>>>(args...);
    return went("forward", cudaGetLastError());
}

// The two launches on st (false, said on stderr, where one failed); the
// shape must apply (applies(d), and rows_fit(d) for ROWS); u: u_floats(d)
// floats of workspace. MIN_BLOCKS: the blocks an SM the registers must
// allow (2: at most 128). KIND: winograd_forward (PATCHES),
// winograd_forward_piped (PIPED) or winograd_forward_rows (ROWS).
template <int CC, int MIN_BLOCKS, Loads KIND>
bool forward(const cnn_conv_desc &d, const float *x, const float *w, const float *b, float *y,
             float *u, cudaStream_t st)
{
    const int fc = d.f * d.c;
    winograd_filters<<<(fc + 255) / 256, 256, 0, st>>>(d.f, d.c, w, u);
    if (!went("filters", cudaGetLastError())) return false;
    const int k_blocks = (d.f + WG_FILTERS - 1) / WG_FILTERS;
    if constexpr (KIND == Loads::ROWS) {
        const int rb = WG_TILES / tiles_across(d), tile_rows = d.n * tiles_down(d);
        const dim3 grid((unsigned)((tile_rows + rb - 1) / rb), k_blocks);
        return launch(winograd_forward_rows<CC, MIN_BLOCKS>, rows_shared_bytes<CC>(), grid, st, d, rb, x,
                      u, b, y);
    } else {
        const size_t n_tiles = (size_t)d.n * tiles_down(d) * tiles_across(d);
        const dim3 grid((unsigned)((n_tiles + WG_TILES - 1) / WG_TILES), k_blocks);
        if constexpr (KIND == Loads::PIPED)
            return launch(winograd_forward_piped<CC, MIN_BLOCKS>, piped_shared_bytes<CC>(), grid, st, d, x,
                          u, b, y);
        else
            return launch(winograd_forward<CC, MIN_BLOCKS>, shared_bytes<CC>(), grid, st, d, x, u, b, y);
    }
}

} // namespace winograd
} // namespace dev

#endif
