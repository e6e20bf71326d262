// conv2d_pool_backward_kernels.cuh: the kernels of a convolution's data
// gradient carried through the pooling (and ReLU) before it
// (conv2d_pool_backward.cu, which says what they compute and when the
// engine takes them), in a header so that dev/cuda/conv2d_backward_data_pool.cu
// and the host emulation (dev/emu) launch the very kernels the engine runs.
// Both give the bits of col2im (conv2d_kernels.cuh's col2im_sum32: the same
// terms in the same order) followed by the pool's backward (pool.cu).
#ifndef CNN_CONV2D_POOL_BACKWARD_KERNELS_CUH
#define CNN_CONV2D_POOL_BACKWARD_KERNELS_CUH

#include "conv2d_kernels.cuh"
#include "pool_geom.cuh"

namespace cnn_pool_col {
namespace { // internal linkage: every .cu that includes this has its own copy

// One thread per element o of the pool's output (n, c, g.oh, g.ow), which is
// the convolution's input: it forms that element's col2im sum once (as
// col2im32_kernel does, the lanes of a warp on neighbouring elements), then
// writes every element of the pool's input that it owns: the rows from its
// window's first (r sh - pad_top, at least 0; 0 for r = 0) up to the next
// window's first (h for the last r), the same for the columns, so that the
// owners partition the input (rows in the padding, in gaps between windows
// or past the last window are written 0 by the nearest owner before them).
// An owned element in the window gets the pool's backward of v: 0 + v where
// it is the argmax (max), 0 + v / count (average), in both cases 0 where the
// ReLU's output there is not > 0; 0 outside the window. Grid-stride, total
// <= INT32_MAX. d: the convolution, whose input (n, c, d.h = g.oh, d.w =
// g.ow) is the pool's output. MAX: max pooling (argmax), else average. UNIT:
// the convolution's strides are 1 (col2im32_kernel's UNIT). relu_y: the
// ReLU's output (the pool's input) or NULL (no ReLU). pool_y (max only, with
// relu_y; else NULL): the pool's output, tested > 0 in place of relu_y at
// the argmax, where it holds the same value (max_window: the window's
// maximum is the element at its argmax): the same bits, with a quarter of
// relu_y's reads (each of its 32-byte sectors holds an argmax of some
// window).
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
            grad = pool_y && !(pool_y[o] > 0.0f) ? 0.0f : 0.0f + v;
            mark = argmax[o];
        } else { // as pool.cu's avg_pool_backward_kernel: over the clipped window's count
            grad = 0.0f + v / (float)((win_r1 - win_r0) * (win_c1 - win_c0));
        }
        const unsigned plane0 = q * in_plane;
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
}

// Shared memory a block of col2im_pool_backward_planes takes where it can
// (4096 floats: eight blocks of 256 threads an SM), and at most (the 48 KB
// a launch takes without asking).
constexpr size_t PLANES_SMEM_FLOATS = 4096, PLANES_SMEM_MAX_FLOATS = 12288;

// Shared memory (floats) of col2im_pool_backward_planes for pb planes a block.
static inline size_t plane_group_floats(const cnn_conv_desc &d, const pool_geom &g, int pb)
{
    const size_t per_plane = (size_t)d.kh * d.kw * d.oh * d.ow + 2 * (size_t)g.oh * g.ow;
    return (size_t)pb * per_plane + (size_t)g.h + g.w;
}

// Planes a block for col2im_pool_backward_planes on a GPU of sm_count SMs:
// the largest divisor of c whose shared memory fits PLANES_SMEM_FLOATS and
// that leaves the grid two blocks an SM where it can; 1 where only one plane
// fits PLANES_SMEM_MAX_FLOATS; 0 where none does. (Whether the kernel pays
// at all is the engine's call: conv2d_pool_backward.cu.)
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
// threads) without dividing: the divisions once, then carries.
struct plane_walk {
    int pl, i, j, rows, cols, step_pl, step_i, step_j;
    __device__ plane_walk(int e, int step, int rows_, int cols_) : rows(rows_), cols(cols_)
    {
        const int row = e / cols, step_row = step / cols;
        j = e - row * cols, pl = row / rows, i = row - pl * rows;
        step_j = step - step_row * cols, step_pl = step_row / rows;
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
// (c / pb)), image b / (c / pb). In three phases, a barrier between them:
//  1. the block's rows of dcol (for each of its channels, the kh*kw rows of
//     that channel, the image's P columns: pb*kh*kw runs of P floats) copied
//     to shared memory, consecutive threads on consecutive floats;
//  2. for each pool output of its planes (the convolution's input), the
//     col2im sum from shared memory (col2im_sum32, the same terms in the
//     same order) and what its window passes on: 0 + v (max; with the
//     argmax), 0 + v / count (average);
//  3. the block's planes of the pool's input (contiguous in dx), consecutive
//     threads on consecutive elements, each element given what its owner
//     window passes on (the owners as in col2im_pool_backward_kernel: row i
//     belongs to the window min((i + pad_top) / sh, oh - 1), and likewise
//     the column), 0 outside the window, where it is not the argmax (max),
//     or where the ReLU's output is not > 0 (max with pool_y: tested in
//     phase 2 on the pool's output, as the kernel above).
// So dcol is read once, coalesced, and dx written once, coalesced, where
// the kernel above reads dcol and writes dx a few floats apart across a
// warp (ncu, H100, batch 512: a third of each sector used). KH, KW > 0: the
// convolution's kernel size at compile time (3 x 3). Shared memory
// (dynamic, plane_group_floats; plane_group_of picks pb): pb*kh*kw*P floats of dcol, pb*oh*ow values
// and as many argmax indices, and the owner of each row and column. The
// same bits as the kernel above.
template <bool MAX, bool UNIT, int KH = 0, int KW = 0>
__global__ void __launch_bounds__(CNN_THREADS)
col2im_pool_backward_planes(cnn_conv_desc d, pool_geom g, int pb, const float *__restrict__ col,
                            const int32_t *__restrict__ argmax,
                            const float *__restrict__ relu_y, const float *__restrict__ pool_y,
                            float *__restrict__ dx)
{
    cnn_kernel_begin();
    extern __shared__ __align__(16) float plane_smem[];
    const int kk = (KH > 0 ? KH : d.kh) * (KW > 0 ? KW : d.kw), p = d.oh * d.ow, np = d.n * p;
    const int op = g.oh * g.ow, in_plane = g.h * g.w; // a plane's pool outputs, inputs
    const int groups = d.c / pb, image = blockIdx.x / groups;
    const int ch0 = (blockIdx.x - image * groups) * pb;
    const unsigned q0 = (unsigned)image * d.c + ch0; // the block's first plane
    const int T = blockDim.x, tid = threadIdx.x;
    const float *relu_at = MAX && pool_y ? nullptr : relu_y; // the ReLU tested per element
    float *cols = plane_smem;                          // [pb * kk][p]
    float *vals = cols + pb * kk * p;                  // [pb][op]
    int *marks = reinterpret_cast<int *>(vals + pb * op); // [pb][op], max only
    int *own_r = marks + pb * op;                      // [g.h]: owner row * 2 + in window
    int *own_s = own_r + g.h;                          // [g.w]: likewise the columns

    // 1. dcol's rows ch0 kk + [0, pb kk), columns image P + [0, P): run
    // `run` (= pl kk + k) at offset `at`, walked on by T without dividing
    {
        const float *src = col + (size_t)ch0 * kk * np + (size_t)image * p;
        const int step_run = T / p, step_at = T - step_run * p;
        int run = tid / p, at = tid - run * p;
        for (int e = tid; e < pb * kk * p; e += T) {
            cols[e] = src[(size_t)run * np + at];
            at += step_at;
            run += step_run;
            if (at >= p) {
                at -= p;
                ++run;
            }
        }
    }
    for (int i = tid; i < g.h; i += T) {
        const int r = min((i + g.pad_top) / g.sh, g.oh - 1);
        int lo, hi;
        window(r, g.sh, g.pad_top, g.ph, g.h, &lo, &hi);
        own_r[i] = r * 2 + (i >= lo && i < hi);
    }
    for (int j = tid; j < g.w; j += T) {
        const int s = min((j + g.pad_left) / g.sw, g.ow - 1);
        int lo, hi;
        window(s, g.sw, g.pad_left, g.pw, g.w, &lo, &hi);
        own_s[j] = s * 2 + (j >= lo && j < hi);
    }
    __syncthreads();

    // 2. each pool output's col2im sum and what its window passes on
    {
        plane_walk at(tid, T, g.oh, g.ow);
        for (int o = tid; o < pb * op; o += T, at.next()) {
            const float v = cnn_conv2d::col2im_sum32<UNIT, KH, KW>(d, cols + at.pl * kk * p, p, 0,
                                                                   at.i, at.j);
            if (MAX) {
                vals[o] = pool_y && !(pool_y[(size_t)q0 * op + o] > 0.0f) ? 0.0f : 0.0f + v;
                marks[o] = argmax[(size_t)q0 * op + o];
            } else {
                int r0, r1, c0, c1;
                window(at.i, g.sh, g.pad_top, g.ph, g.h, &r0, &r1);
                window(at.j, g.sw, g.pad_left, g.pw, g.w, &c0, &c1);
                vals[o] = 0.0f + v / (float)((r1 - r0) * (c1 - c0));
            }
        }
    }
    __syncthreads();

    // 3. the block's planes of dx
    {
        const size_t e0 = (size_t)q0 * in_plane;
        plane_walk at(tid, T, g.h, g.w);
        for (int e = tid; e < pb * in_plane; e += T, at.next()) {
            const int a = own_r[at.i], b = own_s[at.j];
            const int o = at.pl * op + (a >> 1) * g.ow + (b >> 1);
            const bool passes = (a & b & 1) && (!MAX || marks[o] == at.i * g.w + at.j) &&
                                (!relu_at || relu_at[e0 + e] > 0.0f);
            dx[e0 + e] = passes ? vals[o] : 0.0f;
        }
    }
}

} // namespace
} // namespace cnn_pool_col

#endif
