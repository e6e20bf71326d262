// conv2d_kernels.cuh: the kernels of the cuda engine's convolution
// (conv2d.cu), in a header so that the kernel-development programs
// (dev/cuda/conv2d_*.cu) launch the very kernels the engine runs. The host
// side stays in conv2d.cu, which describes the column matrix:
// col (K, NP) with K = c*kh*kw, P = oh*ow and NP = n*P holds at row
// (ch*kh + ki)*kw + kj, column i*P + r*ow + s the input
// x[i, ch, r*sh - pad_top + ki, s*sw - pad_left + kj] (zero outside the image).
#ifndef CNN_CONV2D_KERNELS_CUH
#define CNN_CONV2D_KERNELS_CUH

#include "cuda_common.cuh"

namespace cnn_conv2d {
namespace { // internal linkage: every .cu that includes this has its own copy

// A column matrix's element: float, or with OUT = CNN_PRECISION_BF16 or
// _FP16 the precision's 16 bits (conv2d.cu stores col so where the products
// that read it take B in 16 bits: cnn_cuda_conv2d_col16), rounded to
// nearest even as the SGEMM would round it.
template <int OUT> struct col_elem { typedef unsigned short type; };
template <> struct col_elem<CNN_PRECISION_FLOAT32> { typedef float type; };

template <int OUT>
__device__ __forceinline__ typename col_elem<OUT>::type col_value(float v)
{
    if constexpr (OUT == CNN_PRECISION_FLOAT32) return v;
    else return (unsigned short)(cnn_pack16<OUT>(v, 0.0f) & 0xffffu);
}

// row[q] = 1 for the np columns: the column matrix's row of ones after its
// K rows, which the filter gradient's wide SGEMM reads as op(B)'s column of
// ones (the bias gradient as its row sums; conv2d.cu).
template <int OUT = CNN_PRECISION_FLOAT32>
__global__ void ones_row_kernel(int np, typename col_elem<OUT>::type *__restrict__ row)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(q, np) row[q] = col_value<OUT>(1.0f);
}

// One thread per column q of col and input channel ch (grid-stride over q
// in x, over ch in y: any launch covers it), writing the kh*kw rows of ch:
// q's image and pixel are found once, in 32-bit arithmetic (np fits an int:
// conv2d.cu checks it), not per element in 64-bit as before (2026-11-25:
// the 64-bit divisions made im2col 4-5x slower than its memory traffic).
// Consecutive threads write consecutive columns.
// Column q of col for input channel ch: its kh*kw rows from the plane xc
// (h, w) of q's image, 0 outside the image (xc NULL: all 0), where q is
// image q / P, output pixel (r, s) = (q % P) / ow, (q % P) % ow.
// im2col_kernel's body, also gather_im2col.cu's (which reads the plane of
// a resident image).
// KS > 0: the kernel is KS x KS (d.kh, d.kw not read; im2col_size): every
// load is issued before the first store, each from an address clamped into
// the plane and its value replaced by 0 outside the image, so that a thread
// waits for its kh*kw loads once instead of once a row or element (the
// loop over a runtime kh*kw loads, then stores, an element or four at a
// time). The same values in the same places.
template <int OUT = CNN_PRECISION_FLOAT32, int KS = 0>
__device__ __forceinline__ void im2col_column(const cnn_conv_desc &d,
                                              const float *__restrict__ xc, int ch, int q,
                                              typename col_elem<OUT>::type *__restrict__ col)
{
    const int p = d.oh * d.ow, np = d.n * p;
    const int i = q / p, rs = q - i * p;
    const int r = rs / d.ow, s = rs - r * d.ow;
    const int row0 = r * d.sh - d.pad_top, column0 = s * d.sw - d.pad_left;
    const int kh = KS > 0 ? KS : d.kh, kw = KS > 0 ? KS : d.kw;
    typename col_elem<OUT>::type *out = col + (size_t)ch * kh * kw * np + q;
    if constexpr (KS > 0) {
        float v[KS * KS];
#pragma unroll
        for (int ki = 0; ki < KS; ++ki) {
            const int row = row0 + ki;
            const bool row_in = row >= 0 && row < d.h;
            const int at = min(max(row, 0), d.h - 1) * d.w;
#pragma unroll
            for (int kj = 0; kj < KS; ++kj) {
                const int column = column0 + kj;
                const bool in = row_in && column >= 0 && column < d.w;
                const float x = xc ? xc[at + min(max(column, 0), d.w - 1)] : 0.0f;
                v[ki * KS + kj] = in ? x : 0.0f;
            }
        }
#pragma unroll
        for (int k = 0; k < KS * KS; ++k) out[(size_t)k * np] = col_value<OUT>(v[k]);
    } else {
        for (int ki = 0; ki < kh; ++ki) {
            const int row = row0 + ki;
            const bool row_in = xc && row >= 0 && row < d.h;
            for (int kj = 0; kj < kw; ++kj) {
                const int column = column0 + kj;
                float v = 0.0f;
                if (row_in && column >= 0 && column < d.w) v = xc[(size_t)row * d.w + column];
                out[(size_t)(ki * kw + kj) * np] = col_value<OUT>(v);
            }
        }
    }
}

// The KS of im2col_column's compiled kernel sizes (3x3, 5x5) for d, or 0
// (any size, read from d).
static inline int im2col_size(const cnn_conv_desc &d)
{
    return d.kh == d.kw && (d.kh == 3 || d.kh == 5) ? d.kh : 0;
}

template <int OUT = CNN_PRECISION_FLOAT32, int KS = 0>
__global__ void im2col_kernel(cnn_conv_desc d, const float *__restrict__ x,
                              typename col_elem<OUT>::type *__restrict__ col)
{
    cnn_kernel_begin();
    const int p = d.oh * d.ow, np = d.n * p;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (int ch = blockIdx.y; ch < d.c; ch += gridDim.y) {
        for (long long qq = (long long)blockIdx.x * blockDim.x + threadIdx.x; qq < np; qq += stride) {
            const int q = (int)qq, i = q / p;
            im2col_column<OUT, KS>(d, x + ((size_t)i * d.c + ch) * d.h * d.w, ch, q, col);
        }
    }
}

// dx[i, ch, row, column] = sum of dcol over the (ki, kj, r, s) that read it.
// (A version with planes over the grid's y and 32-bit index arithmetic, as
// im2col_kernel, was measured 33% slower at batch 512 on an H100,
// 2026-11-25: 131 us against 98.5 us per call; this one stays.)
__global__ void col2im_kernel(cnn_conv_desc d, const float *__restrict__ col,
                              float *__restrict__ dx)
{
    cnn_kernel_begin();
    const size_t p = (size_t)d.oh * d.ow, np = (size_t)d.n * p;
    const size_t total = (size_t)d.n * d.c * d.h * d.w;
    CNN_GRID_LOOP(t, total) {
        const int column = (int)(t % d.w), row = (int)((t / d.w) % d.h);
        const int ch = (int)((t / ((size_t)d.w * d.h)) % d.c), i = (int)(t / ((size_t)d.w * d.h * d.c));
        float sum = 0.0f;
        for (int ki = 0; ki < d.kh; ++ki) {
            const int rr = row + d.pad_top - ki; // = r * sh
            if (rr < 0 || rr % d.sh) continue;
            const int r = rr / d.sh;
            if (r >= d.oh) continue;
            for (int kj = 0; kj < d.kw; ++kj) {
                const int cc = column + d.pad_left - kj; // = s * sw
                if (cc < 0 || cc % d.sw) continue;
                const int s = cc / d.sw;
                if (s >= d.ow) continue;
                const size_t k = ((size_t)ch * d.kh + ki) * d.kw + kj;
                sum += col[k * np + (size_t)i * p + (size_t)r * d.ow + s];
            }
        }
        dx[t] = sum;
    }
}

// The value col2im gives dx[i, ch, row, column]: the sum over the (ki, kj)
// that read it, in that order, of dcol's terms, with base = col + i*P and
// np = n*P (32-bit index arithmetic; UNIT: strides of 1, no remainders).
// col2im32_kernel writes it for every element of dx; conv2d_pool_backward.cu
// for the elements a pooling layer's backward reads.
// KH, KW > 0: the kernel's size known at compile time (d.kh, d.kw not
// read; the loops unrolled), the same terms in the same order.
template <bool UNIT, int KH = 0, int KW = 0>
__device__ __forceinline__ float col2im_sum32(const cnn_conv_desc &d,
                                              const float *__restrict__ base, int np, int ch,
                                              int row, int column)
{
    const int kh = KH > 0 ? KH : d.kh, kw = KW > 0 ? KW : d.kw;
    float sum = 0.0f;
#pragma unroll
    for (int ki = 0; ki < kh; ++ki) {
        const int rr = row + d.pad_top - ki; // = r * sh
        if (rr < 0 || (!UNIT && rr % d.sh)) continue;
        const int r = UNIT ? rr : rr / d.sh;
        if (r >= d.oh) continue;
#pragma unroll
        for (int kj = 0; kj < kw; ++kj) {
            const int cc = column + d.pad_left - kj; // = s * sw
            if (cc < 0 || (!UNIT && cc % d.sw)) continue;
            const int s = UNIT ? cc : cc / d.sw;
            if (s >= d.ow) continue;
            const int k = (ch * kh + ki) * kw + kj;
            sum += base[(size_t)k * np + r * d.ow + s];
        }
    }
    return sum;
}

// col2im_kernel in 32-bit index arithmetic (when the sizes allow it:
// conv2d.cu checks), the same grid-stride loop over dx and the same order
// of the additions (the same bits); UNIT: strides of 1, no remainders.
// The 64-bit divisions were a quarter of the old kernel's instructions.
template <bool UNIT>
__global__ void col2im32_kernel(cnn_conv_desc d, const float *__restrict__ col,
                                float *__restrict__ dx)
{
    cnn_kernel_begin();
    const int p = d.oh * d.ow, np = d.n * p;
    const int total = d.n * d.c * d.h * d.w;
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += blockDim.x * gridDim.x) {
        const int column = t % d.w, t1 = t / d.w;
        const int row = t1 % d.h, t2 = t1 / d.h;
        const int ch = t2 % d.c, i = t2 / d.c;
        dx[t] = col2im_sum32<UNIT>(d, col + (size_t)i * p, np, ch, row, column);
    }
}

} // namespace
} // namespace cnn_conv2d

#endif
