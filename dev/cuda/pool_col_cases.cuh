// pool_col_cases.cuh: the pairs (pooling, the convolution after it) that
// conv2d_backward_data_pool.cu checks and times, and its float64 reference:
// the seed CIFAR-10 CNN's two pairs at batch 32 and odd ones. Host code only
// (no CUDA), so that a host emulation of the kernels can use it too.
#ifndef DEV_CUDA_POOL_COL_CASES_CUH
#define DEV_CUDA_POOL_COL_CASES_CUH

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cnn.h"

namespace dev {

// A pooling whose output (n, c, p.oh, p.ow) is the input (n, c, d.h, d.w)
// of the convolution d; relu: the pool's input is a ReLU's output (its mask
// is part of the backward). The pools' windows are disjoint (pool no larger
// than the stride, pads >= 0: what the engine's fused entry takes), and an
// average pool's windows hold 1, 2 or 4 in-image elements, so that v / count
// is exact on integer inputs.
struct PoolColCase {
    std::string label;
    cnn_pool_desc p; // mode, n c h w, ph pw, sh sw, pad_top pad_left, oh ow
    cnn_conv_desc d; // n c h w, f kh kw, sh sw, pad_top pad_left, oh ow
    bool relu;
};

inline std::vector<PoolColCase> seed_pool_cols()
{
    return {
        {"conv2 after pool1", {CNN_POOL_MAX, 32, 32, 30, 30, 2, 2, 2, 2, 0, 0, 15, 15},
         {32, 32, 15, 15, 64, 3, 3, 1, 1, 0, 0, 13, 13}, true},
        {"conv3 after pool2 (last row and column dropped)",
         {CNN_POOL_MAX, 32, 64, 13, 13, 2, 2, 2, 2, 0, 0, 6, 6},
         {32, 64, 6, 6, 64, 3, 3, 1, 1, 0, 0, 4, 4}, true},
    };
}

inline std::vector<PoolColCase> odd_pool_cols()
{
    return {
        {"odd planes 9x7 (the pool drops a row and a column), 3x2 kernel, batch 3",
         {CNN_POOL_MAX, 3, 5, 9, 7, 2, 2, 2, 2, 0, 0, 4, 3}, {3, 5, 4, 3, 7, 3, 2, 1, 1, 0, 0, 2, 2}, true},
        {"batch 1, 33 channels, conv stride 2 padded 1 ('same')",
         {CNN_POOL_MAX, 1, 33, 10, 10, 2, 2, 2, 2, 0, 0, 5, 5}, {1, 33, 5, 5, 6, 3, 3, 2, 2, 1, 1, 3, 3}, true},
        {"conv 'same' padding, 40 channels, odd planes 11x11",
         {CNN_POOL_MAX, 3, 40, 11, 11, 2, 2, 2, 2, 0, 0, 5, 5}, {3, 40, 5, 5, 9, 3, 3, 1, 1, 1, 1, 5, 5}, true},
        {"Keras 'same' pool (last windows clipped), Keras 'same' conv stride 2 (pad bottom and right)",
         {CNN_POOL_MAX, 2, 3, 7, 7, 2, 2, 2, 2, 0, 0, 4, 4}, {2, 3, 4, 4, 4, 3, 3, 2, 2, 0, 0, 2, 2}, true},
        {"pool 3x3 stride 3 padded top and left, 1x1 conv",
         {CNN_POOL_MAX, 2, 4, 8, 8, 3, 3, 3, 3, 1, 1, 3, 3}, {2, 4, 3, 3, 5, 1, 1, 1, 1, 0, 0, 3, 3}, true},
        {"pool 2x2 stride 3: rows and columns in no window",
         {CNN_POOL_MAX, 2, 3, 8, 8, 2, 2, 3, 3, 0, 0, 3, 3}, {2, 3, 3, 3, 4, 2, 2, 1, 1, 0, 0, 2, 2}, true},
        {"pool 1x2 stride 1x2, 2x3 kernel",
         {CNN_POOL_MAX, 3, 6, 5, 8, 1, 2, 1, 2, 0, 0, 5, 4}, {3, 6, 5, 4, 3, 2, 3, 1, 1, 0, 0, 4, 2}, true},
        {"empty windows in the pool's padding (pad 2)",
         {CNN_POOL_MAX, 1, 2, 4, 4, 2, 2, 2, 2, 2, 2, 3, 3}, {1, 2, 3, 3, 3, 2, 2, 1, 1, 0, 0, 2, 2}, true},
        {"no ReLU before the pool",
         {CNN_POOL_MAX, 2, 7, 6, 6, 2, 2, 2, 2, 0, 0, 3, 3}, {2, 7, 3, 3, 5, 2, 2, 1, 1, 0, 0, 2, 2}, false},
        {"average pool, odd planes 9x7 (a row and a column dropped), batch 3",
         {CNN_POOL_AVG, 3, 5, 9, 7, 2, 2, 2, 2, 0, 0, 4, 3}, {3, 5, 4, 3, 7, 3, 2, 1, 1, 0, 0, 2, 2}, true},
        {"average pool, clipped windows (2 and 1 elements), conv stride 2 padded 1",
         {CNN_POOL_AVG, 2, 3, 7, 7, 2, 2, 2, 2, 0, 0, 4, 4}, {2, 3, 4, 4, 4, 3, 3, 2, 2, 1, 1, 2, 2}, true},
        {"average pool, no ReLU, batch 1, 33 channels, conv 'same'",
         {CNN_POOL_AVG, 1, 33, 6, 6, 2, 2, 2, 2, 0, 0, 3, 3}, {1, 33, 3, 3, 2, 3, 3, 1, 1, 1, 1, 3, 3}, false},
    };
}

inline std::string describe(const PoolColCase &c)
{
    const cnn_pool_desc &p = c.p;
    const cnn_conv_desc &d = c.d;
    char buf[400];
    snprintf(buf, sizeof buf, "%s: %s%s pool x(%d,%d,%d,%d) %dx%d/%dx%d -> (%d,%d,%d,%d), conv W(%d,%d,%d,%d)%s -> (%d,%d,%d,%d)",
             c.label.c_str(), c.relu ? "ReLU + " : "", p.mode == CNN_POOL_MAX ? "max" : "avg", p.n,
             p.c, p.h, p.w, p.ph, p.pw, p.sh, p.sw, p.n, p.c, p.oh, p.ow, d.f, d.c, d.kh, d.kw,
             d.sh > 1 || d.sw > 1 ? " strided" : "", d.n, d.f, d.oh, d.ow);
    return buf;
}

inline size_t pool_in_count(const cnn_pool_desc &p) { return (size_t)p.n * p.c * p.h * p.w; }
inline size_t pool_out_count(const cnn_pool_desc &p) { return (size_t)p.n * p.c * p.oh * p.ow; }

// Whether the pool's output is the convolution's input (the cases are
// written by hand: a typo would test something else).
inline bool consistent(const PoolColCase &c)
{
    const cnn_pool_desc &p = c.p;
    const cnn_conv_desc &d = c.d;
    return p.n == d.n && p.c == d.c && p.oh == d.h && p.ow == d.w && // the pool feeds the conv
           p.ph <= p.sh && p.pw <= p.sw && p.pad_top >= 0 && p.pad_left >= 0 && // disjoint windows
           p.oh >= 1 && p.ow >= 1 && (p.oh - 1) * p.sh - p.pad_top < p.h &&
           (p.ow - 1) * p.sw - p.pad_left < p.w && // no window starts past the image
           d.oh >= 1 && d.ow >= 1 && d.pad_top < d.kh && d.pad_left < d.kw &&
           (d.oh - 1) * d.sh - d.pad_top < d.h && (d.ow - 1) * d.sw - d.pad_left < d.w;
}

// The window of pool output (r, s), clipped to the image: rows [r0, r1),
// columns [c0, c1) (empty when r0 >= r1 or c0 >= c1).
inline void pool_window(const cnn_pool_desc &p, int r, int s, int *r0, int *r1, int *c0, int *c1)
{
    const int top = r * p.sh - p.pad_top, left = s * p.sw - p.pad_left;
    *r0 = top < 0 ? 0 : top;
    *r1 = top + p.ph > p.h ? p.h : top + p.ph;
    *c0 = left < 0 ? 0 : left;
    *c1 = left + p.pw > p.w ? p.w : left + p.pw;
}

// The max pool's argmax (n, c, oh, ow) of x: the index in the h*w plane of
// the first maximum in row-major window order; -1 for an empty window
// (docs/semantics.md; what cuda_pool_forward writes).
inline std::vector<int32_t> pool_argmax(const cnn_pool_desc &p, const std::vector<float> &x)
{
    std::vector<int32_t> am(pool_out_count(p));
    size_t o = 0;
    for (size_t q = 0; q < (size_t)p.n * p.c; ++q)
        for (int r = 0; r < p.oh; ++r)
            for (int s = 0; s < p.ow; ++s, ++o) {
                int r0, r1, c0, c1;
                pool_window(p, r, s, &r0, &r1, &c0, &c1);
                float best = 0.0f;
                int at = -1;
                for (int i = r0; i < r1; ++i)
                    for (int j = c0; j < c1; ++j) {
                        const float v = x[q * p.h * p.w + (size_t)i * p.w + j];
                        if (at < 0 || v > best) { // strict: the first maximum wins
                            best = v;
                            at = i * p.w + j;
                        }
                    }
                am[o] = at;
            }
    return am;
}

// The float64 gradient of the pool's input, ref (n, c, p.h, p.w), and the
// sum of the absolute values of its terms, scale: first the convolution's
// input gradient dpool (n, c, d.h, d.w) = the sum over filters and kernel
// positions of W[f, ch, ki, kj] dy[i, f, r, s] (the terms of W^T dy and of
// col2im), then the pool's backward (max: dpool to the window's argmax;
// average: dpool / count to each in-image element of the window), then the
// ReLU's mask: 0 where y (the pool's input) is not > 0. argmax: max only.
inline void pool_col_reference(const PoolColCase &c, const std::vector<float> &dy,
                               const std::vector<float> &w, const std::vector<float> &y,
                               const std::vector<int32_t> &argmax, std::vector<double> &ref,
                               std::vector<double> &scale)
{
    const cnn_conv_desc &d = c.d;
    const cnn_pool_desc &p = c.p;
    const size_t conv_in = (size_t)d.n * d.c * d.h * d.w;
    std::vector<double> dpool(conv_in, 0.0), dscale(conv_in, 0.0);
    for (int i = 0; i < d.n; ++i)
        for (int f = 0; f < d.f; ++f)
            for (int r = 0; r < d.oh; ++r)
                for (int s = 0; s < d.ow; ++s) {
                    const double g = dy[(((size_t)i * d.f + f) * d.oh + r) * d.ow + s];
                    for (int ch = 0; ch < d.c; ++ch)
                        for (int ki = 0; ki < d.kh; ++ki) {
                            const int row = r * d.sh - d.pad_top + ki;
                            if (row < 0 || row >= d.h) continue;
                            for (int kj = 0; kj < d.kw; ++kj) {
                                const int column = s * d.sw - d.pad_left + kj;
                                if (column < 0 || column >= d.w) continue;
                                const double t = (double)w[(((size_t)f * d.c + ch) * d.kh + ki) * d.kw + kj] * g;
                                const size_t at = (((size_t)i * d.c + ch) * d.h + row) * d.w + column;
                                dpool[at] += t;
                                dscale[at] += std::fabs(t);
                            }
                        }
                }
    ref.assign(pool_in_count(p), 0.0);
    scale.assign(ref.size(), 0.0);
    const size_t in_plane = (size_t)p.h * p.w;
    size_t o = 0; // the pool's output, the convolution's input
    for (size_t q = 0; q < (size_t)p.n * p.c; ++q)
        for (int r = 0; r < p.oh; ++r)
            for (int s = 0; s < p.ow; ++s, ++o) {
                int r0, r1, c0, c1;
                pool_window(p, r, s, &r0, &r1, &c0, &c1);
                if (r0 >= r1 || c0 >= c1) continue; // an empty window passes nothing
                if (p.mode == CNN_POOL_MAX) {
                    if (argmax[o] < 0) continue;
                    ref[q * in_plane + argmax[o]] += dpool[o];
                    scale[q * in_plane + argmax[o]] += dscale[o];
                } else {
                    const double count = (double)(r1 - r0) * (c1 - c0);
                    for (int i = r0; i < r1; ++i)
                        for (int j = c0; j < c1; ++j) {
                            ref[q * in_plane + (size_t)i * p.w + j] += dpool[o] / count;
                            scale[q * in_plane + (size_t)i * p.w + j] += dscale[o] / count;
                        }
                }
            }
    if (!c.relu) return;
    for (size_t e = 0; e < ref.size(); ++e)
        if (!(y[e] > 0.0f)) ref[e] = scale[e] = 0.0;
}

} // namespace dev

#endif
