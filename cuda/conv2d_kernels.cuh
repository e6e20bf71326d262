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

__global__ void im2col_kernel(cnn_conv_desc d, const float *__restrict__ x,
                              float *__restrict__ col)
{
    const size_t p = (size_t)d.oh * d.ow, np = (size_t)d.n * p;
    const size_t total = (size_t)d.c * d.kh * d.kw * np;
    CNN_GRID_LOOP(t, total) {
        const size_t k = t / np, q = t % np;
        const int i = (int)(q / p), rs = (int)(q % p);
        const int r = rs / d.ow, s = rs % d.ow;
        const int kj = (int)(k % d.kw), ki = (int)((k / d.kw) % d.kh), ch = (int)(k / ((size_t)d.kw * d.kh));
        const int row = r * d.sh - d.pad_top + ki, column = s * d.sw - d.pad_left + kj;
        float v = 0.0f;
        if (row >= 0 && row < d.h && column >= 0 && column < d.w)
            v = x[(((size_t)i * d.c + ch) * d.h + row) * d.w + column];
        col[t] = v;
    }
}

// dx[i, ch, row, column] = sum of dcol over the (ki, kj, r, s) that read it.
__global__ void col2im_kernel(cnn_conv_desc d, const float *__restrict__ col,
                              float *__restrict__ dx)
{
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

// y (n, f, P)[i, f, p] = t (f, n*P)[f, i*P + p] + b[f] (b may be NULL)
__global__ void scatter_bias_kernel(int n, int f, size_t p, const float *__restrict__ t,
                                    const float *__restrict__ b, float *__restrict__ y)
{
    const size_t total = (size_t)n * f * p;
    CNN_GRID_LOOP(o, total) {
        const size_t q = o % p, fi = (o / p) % f, i = o / (p * f);
        y[o] = t[fi * n * p + i * p + q] + (b ? b[fi] : 0.0f);
    }
}

// t (f, n*P)[f, i*P + p] = dy (n, f, P)[i, f, p]
__global__ void gather_dy_kernel(int n, int f, size_t p, const float *__restrict__ dy,
                                 float *__restrict__ t)
{
    const size_t total = (size_t)n * f * p;
    CNN_GRID_LOOP(o, total) {
        const size_t q = o % p, fi = (o / p) % f, i = o / (p * f);
        t[fi * n * p + i * p + q] = dy[o];
    }
}

} // namespace
} // namespace cnn_conv2d

#endif
