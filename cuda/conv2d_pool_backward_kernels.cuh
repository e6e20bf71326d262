// conv2d_pool_backward_kernels.cuh: the kernels of a convolution's data
// gradient carried through the pooling (and ReLU) before it
// (conv2d_pool_backward.cu, which says what they compute and when the
// engine takes them), in a header so that dev/cuda/conv2d_backward_data_pool.cu
// and the host emulation (dev/emu) launch the very kernels the engine runs.
// Both give the bits of col2im (conv2d_kernels.cuh's col2im_sum32: the same
// terms in the same order) followed by the pool's backward (pool.cu).
#ifndef CNN_CONV2D_POOL_BACKWARD_KERNELS_CUH
#define CNN_CONV2D_POOL_BACKWARD_KERNELS_CUH

#include "async_copy.cuh"
#include "conv2d_kernels.cuh"
#include "pool_geom.cuh"

namespace cnn_pool_col {
namespace { // internal linkage: every .cu that includes this has its own copy

// What the pool output (r, s) passes back, v being the gradient of that
// output (the col2im sum): every element of the pool's input that it owns
// is written to dx (its plane at plane0): the rows from its window's first
// (r sh - pad_top, at least 0; 0 for r = 0) up to the next window's first
// (h for the last r), the same for the columns, so that the owners
// partition the input (rows in the padding, in gaps between windows or
// past the last window are written 0 by the nearest owner before them).
// An owned element in the window gets the pool's backward of v: 0 + v where
// it is the argmax (max), 0 + v / count (average), in both cases 0 where the
// ReLU's output there is not > 0; 0 outside the window. at: the output's
// index in argmax and pool_y (the block's copies in shared memory in the
// plane kernel). relu_at: the ReLU's output tested per element
// (NULL: not tested); pool_y (max only; else NULL): the pool's output,
// tested > 0 in place of relu_y at the argmax, where it holds the same
// value (max_window: the window's maximum is the element at its argmax):
// the same bits, with a quarter of relu_y's reads (each of its 32-byte
// sectors holds an argmax of some window).
template <bool MAX>
__device__ __forceinline__ void pass_back(const pool_geom &g, int r, int s, float v, unsigned at,
                                          const int32_t *__restrict__ argmax,
                                          const float *__restrict__ relu_at,
                                          const float *__restrict__ pool_y, unsigned plane0,
                                          float *__restrict__ dx)
{
    const int top = r * g.sh - g.pad_top, left = s * g.sw - g.pad_left; // the window
    int win_r0, win_r1, win_c0, win_c1; // it clipped to the image
    window(r, g.sh, g.pad_top, g.ph, g.h, &win_r0, &win_r1);
    window(s, g.sw, g.pad_left, g.pw, g.w, &win_c0, &win_c1);
    const int rows0 = r == 0 ? 0 : min(max(top, 0), g.h);
    const int rows1 = r == g.oh - 1 ? g.h : min(max(top + g.sh, 0), g.h);
    const int cols0 = s == 0 ? 0 : min(max(left, 0), g.w);
    const int cols1 = s == g.ow - 1 ? g.w : min(max(left + g.sw, 0), g.w);
    float grad; // what an element of the window that passes gradient gets
    int mark = -1; // max: the argmax's index in the plane
    if (MAX) {
        grad = pool_y && !(pool_y[at] > 0.0f) ? 0.0f : 0.0f + v;
        mark = argmax[at];
    } else { // as pool.cu's avg_pool_backward_kernel: over the clipped window's count
        grad = 0.0f + v / (float)((win_r1 - win_r0) * (win_c1 - win_c0));
    }
    if (rows1 - rows0 == 2 && cols1 - cols0 == 2 && rows1 == win_r1 && cols1 == win_c1) {
        // The owned block is the window, 2 x 2 (owned rows start where the
        // window's do, rows0 == win_r0, wherever the block is not empty; a
        // 2x2 pool with strides 2 but at a plane's last row or column of odd
        // size): its four elements as the loop below gives them, without
        // the loop (whose bounds and tests were most of the plane kernel's
        // instructions for these pools), a row an 8-byte store where dx
        // allows (H200, batch 512: conv2's plane kernel 80.5 -> 70.6 us).
        const int me = rows0 * g.w + cols0;
        float out[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const int m = me + (u >> 1) * g.w + (u & 1);
            const bool passes = (!MAX || mark == m) && (!relu_at || relu_at[plane0 + m] > 0.0f);
            out[u] = passes ? grad : 0.0f;
        }
        float *at_dx = dx + plane0 + me;
        if (g.w % 2 == 0 && ((uintptr_t)at_dx & 7) == 0) {
            *reinterpret_cast<float2 *>(at_dx) = make_float2(out[0], out[1]);
            *reinterpret_cast<float2 *>(at_dx + g.w) = make_float2(out[2], out[3]);
        } else {
            at_dx[0] = out[0], at_dx[1] = out[1], at_dx[g.w] = out[2], at_dx[g.w + 1] = out[3];
        }
        return;
    }
    for (int i = rows0; i < rows1; ++i) {
        for (int j = cols0; j < cols1; ++j) {
            const int me = i * g.w + j;
            const unsigned e = plane0 + (unsigned)me;
            const bool in_window = i >= win_r0 && i < win_r1 && j >= win_c0 && j < win_c1;
            const bool passes = in_window && (!MAX || mark == me) &&
                                (!relu_at || relu_at[e] > 0.0f);
            dx[e] = passes ? grad : 0.0f;
        }
    }
}

// One thread per element o of the pool's output (n, c, g.oh, g.ow), which is
// the convolution's input: it forms that element's col2im sum once (as
// col2im32_kernel does, the lanes of a warp on neighbouring elements), then
// writes what it passes back (pass_back). Grid-stride, total <= INT32_MAX.
// d: the convolution, whose input (n, c, d.h = g.oh, d.w = g.ow) is the
// pool's output. MAX: max pooling (argmax), else average. UNIT: the
// convolution's strides are 1 (col2im32_kernel's UNIT). relu_y: the ReLU's
// output (the pool's input) or NULL (no ReLU). pool_y (max only, with
// relu_y; else NULL): the pool's output, tested in place of relu_y
// (pass_back).
template <bool MAX, bool UNIT>
__global__ void col2im_pool_backward_kernel(unsigned total, cnn_conv_desc d, pool_geom g,
                                            const float *__restrict__ col,
                                            const int32_t *__restrict__ argmax,
                                            const float *__restrict__ relu_y,
                                            const float *__restrict__ pool_y,
                                            float *__restrict__ dx)
{
    cnn_kernel_begin();
    const unsigned in_plane = (unsigned)g.h * g.w, out_plane = (unsigned)g.oh * g.ow;
    const int p = d.oh * d.ow, np = d.n * p;
    const float *relu_at = MAX && pool_y ? nullptr : relu_y; // the ReLU tested per element
    for (unsigned o = blockIdx.x * blockDim.x + threadIdx.x; o < total;
         o += blockDim.x * gridDim.x) {
        const unsigned q = o / out_plane; // the plane: image q / c, channel q % c
        const int mo = (int)(o - q * out_plane);
        const int r = mo / g.ow, s = mo - r * g.ow;
        const int image = (int)(q / (unsigned)d.c), ch = (int)(q - (unsigned)image * d.c);
        const float v = cnn_conv2d::col2im_sum32<UNIT>(d, col + (size_t)image * p, np, ch, r, s);
        pass_back<MAX>(g, r, s, v, o, argmax, relu_at, pool_y, q * in_plane, dx);
    }
}

// Shared memory a block of col2im_pool_backward_planes takes where it can
// (4096 floats: eight blocks of 256 threads an SM), and at most (the 48 KB
// a launch takes without asking).
constexpr size_t PLANES_SMEM_FLOATS = 4096, PLANES_SMEM_MAX_FLOATS = 12288;

// A row of dcol in col2im_pool_backward_planes's shared memory: the image's
// P floats, and room for the 16-byte copies' start before them (up to 3
// floats) where P is not a multiple of 4.
__host__ __device__ inline int plane_row_floats(int p) { return p % 4 ? (p + 6) / 4 * 4 : p; }

// Shared memory (floats) of col2im_pool_backward_planes for pb planes a
// block: their rows of dcol, and their pool outputs' argmax and pool_y.
static inline size_t plane_group_floats(const cnn_conv_desc &d, const pool_geom &g, int pb)
{
    return (size_t)pb * (d.kh * d.kw * plane_row_floats(d.oh * d.ow) + 2 * g.oh * g.ow);
}

// Whether col2im_pool_backward_planes may copy dcol 16 bytes at a time: its
// rows (n P floats) and its start 16-byte aligned.
static inline bool plane_copies_aligned(const cnn_conv_desc &d, const float *col)
{
    return (long long)d.n * d.oh * d.ow % 4 == 0 && ((uintptr_t)col & 15) == 0;
}

// Planes a block for col2im_pool_backward_planes on a GPU of sm_count SMs:
// the largest divisor of c whose shared memory fits PLANES_SMEM_FLOATS and
// that leaves the grid two blocks an SM where it can; 1 where only one plane
// fits PLANES_SMEM_MAX_FLOATS; 0 where none does (then the kernel above).
static inline int plane_group_of(const cnn_conv_desc &d, const pool_geom &g, int sm_count)
{
    if (plane_group_floats(d, g, 1) > PLANES_SMEM_MAX_FLOATS) return 0;
    const long long planes = (long long)d.n * d.c;
    const long long most = planes / (2LL * sm_count) > 1 ? planes / (2LL * sm_count) : 1;
    int best = 1;
    for (int pb = 2; pb <= d.c && pb <= most; ++pb)
        if (d.c % pb == 0 && plane_group_floats(d, g, pb) <= PLANES_SMEM_FLOATS) best = pb;
    return best;
}

// An index e = (pl rows + i) cols + j walked on by a fixed step (the block's
// threads) without dividing: the divisions once (unsigned: e, step, rows,
// cols >= 0), then carries.
struct plane_walk {
    int pl, i, j, rows, cols, step_pl, step_i, step_j;
    __device__ plane_walk(int e, int step, int rows_, int cols_) : rows(rows_), cols(cols_)
    {
        const int row = (int)((unsigned)e / cols), step_row = (int)((unsigned)step / cols);
        j = e - row * cols, pl = (int)((unsigned)row / rows), i = row - pl * rows;
        step_j = step - step_row * cols, step_pl = (int)((unsigned)step_row / rows);
        step_i = step_row - step_pl * rows;
    }
    __device__ void next()
    {
        j += step_j;
        const int carry = j >= cols;
        if (carry) j -= cols;
        i += step_i + carry; // < 2 rows
        pl += step_pl;
        if (i >= rows) {
            i -= rows;
            ++pl;
        }
    }
};

// Whole planes a block: the kernel the engine runs where a plane's share of
// dcol fits shared memory (conv2d_pool_backward.cu: plane_group). Block b
// owns the planes (image, ch0 + [0, pb)) with pb dividing c: ch0 = pb (b %
// (c / pb)), image b / (c / pb). In two phases, a barrier between them:
//  1. the block's rows of dcol (for each of its channels, the kh*kw rows of
//     that channel, the image's P columns: pb*kh*kw runs of P floats) copied
//     to shared memory, each run to a row of plane_row_floats(P): with
//     `aligned` (plane_copies_aligned) 16 bytes a copy, the run's first
//     float at offset (image P) % 4 of its row (the same in every run), a
//     quarter of the copies; else a float a copy, at offset 0; and (max)
//     the argmax and pool_y of its pool outputs; every copy issued before
//     any is waited for (async_copy);
//  2. a thread a pool output of its planes (the convolution's input): the
//     col2im sum from shared memory (col2im_sum32, the same terms in the
//     same order), then what it passes back (pass_back, as the kernel
//     above), a warp on neighbouring outputs, so on neighbouring elements of
//     dx.
// So dcol is read once, coalesced, where the kernel above reads it a few
// floats apart across a warp (ncu, H100, batch 512: a third of each sector
// used). An earlier version wrote dx in a third phase, a thread an element
// with the sums and argmaxes in shared memory: each element took about 25
// instructions to find its window, and the kernel was issue-bound (ncu,
// H200, conv2's: 89.7 M warp instructions, 0.85 issued a cycle of 1).
// KH, KW > 0: the convolution's kernel size at compile time (3 x 3). Shared
// memory (dynamic, plane_group_floats; plane_group_of picks pb): the block's
// pb*kh*kw rows of dcol, then pb*oh*ow of pool_y and as many argmaxes.
// No launch bounds: 40 registers, 6 blocks an SM. (Before pass_back's 2x2
// case, bounds of 8 blocks an SM, 32 registers, measured even with 40: H200,
// batch 512, conv2's 80.3 us both ways, conv3's 33.4 against 32.3; with that
// case they would spill.) The same bits as the kernel above.
template <bool MAX, bool UNIT, int KH = 0, int KW = 0>
__global__ void __launch_bounds__(CNN_THREADS)
col2im_pool_backward_planes(cnn_conv_desc d, pool_geom g, int pb, bool aligned,
                            const float *__restrict__ col,
                            const int32_t *__restrict__ argmax,
                            const float *__restrict__ relu_y, const float *__restrict__ pool_y,
                            float *__restrict__ dx)
{
    cnn_kernel_begin();
    extern __shared__ __align__(16) float plane_smem[];
    const int kk = (KH > 0 ? KH : d.kh) * (KW > 0 ? KW : d.kw), p = d.oh * d.ow, np = d.n * p;
    const int op = g.oh * g.ow, in_plane = g.h * g.w; // a plane's pool outputs, inputs
    const unsigned groups = (unsigned)(d.c / pb), image = blockIdx.x / groups; // no signs:
    const int ch0 = (int)(blockIdx.x - image * groups) * pb; // unsigned divisions are shorter
    const unsigned q0 = image * d.c + ch0; // the block's first plane
    const int T = blockDim.x, tid = threadIdx.x;
    const float *relu_at = MAX && pool_y ? nullptr : relu_y; // the ReLU tested per element
    const int row = plane_row_floats(p); // a run's row in shared memory
    float *cols = plane_smem;            // [pb * kk][row]
    float *pool_ys = cols + pb * kk * row; // [pb * op]: pool_y's, max only
    int *marks = reinterpret_cast<int *>(pool_ys + pb * op); // [pb * op]: argmax's, max only
    const float *src = col + (size_t)ch0 * kk * np + (size_t)image * p; // the first run

    // 1. dcol's rows ch0 kk + [0, pb kk), columns image P + [0, P)
    int first = 0; // where a run starts in its row
    if (aligned) { // chunk c: run c / (row / 4), floats 4 (c % (row / 4)) - first on
        first = (int)(image * p % 4);
        const int chunks = row / 4;
        for (int c = tid; c < pb * kk * chunks; c += T) {
            const int run = (int)((unsigned)c / chunks), at = 4 * (c - run * chunks) - first;
            const int count = min(max(p - at, 0), 4); // floats of the run from `at` on
            async_copy16(&cols[run * row + at + first],
                        count > 0 ? src + (size_t)run * np + at : col, count);
        }
    } else { // element e: run e / P, float e % P, walked on without dividing again
        const int step_run = T / p, step_at = T - step_run * p;
        int at = (int)((unsigned)tid % p), to = tid / p * row + at;
        const float *from = src + (size_t)(tid / p) * np + at;
        const size_t step = (size_t)step_run * np + step_at;
        for (int e = tid; e < pb * kk * p; e += T) {
            async_copy(&cols[to], from, true);
            from += step;
            to += step_run * row + step_at;
            at += step_at;
            if (at >= p) {
                at -= p;
                from += np - p;
                to += row - p;
            }
        }
    }
    if (MAX) {
        for (int o = tid; o < pb * op; o += T) {
            async_copy(&marks[o], argmax + q0 * op + o, true);
            if (pool_y) async_copy(&pool_ys[o], pool_y + q0 * op + o, true);
        }
    }
    async_commit();
    async_wait<0>();
    __syncthreads();

    // 2. a thread a pool output: its col2im sum and what it passes back
    plane_walk at(tid, T, g.oh, g.ow);
    for (int o = tid; o < pb * op; o += T, at.next()) {
        const float v = cnn_conv2d::col2im_sum32<UNIT, KH, KW>(
            d, cols + at.pl * kk * row + first, row, 0, at.i, at.j);
        pass_back<MAX>(g, at.i, at.j, v, o, marks, relu_at, MAX && pool_y ? pool_ys : nullptr,
                       (q0 + at.pl) * in_plane, dx);
    }
}

} // namespace
} // namespace cnn_pool_col

#endif
