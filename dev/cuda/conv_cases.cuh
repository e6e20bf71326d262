// conv_cases.cuh: the convolutions the conv programs check and time: the
// seed CIFAR-10 CNN's three layers at batch 32, and odd shapes (strides,
// padding on either side, clipped windows, 1x1 and non-square kernels, no
// bias).
#ifndef DEV_CUDA_CONV_CASES_CUH
#define DEV_CUDA_CONV_CASES_CUH

#include <string>
#include <vector>

#include "cnn.h"

namespace dev {

struct ConvCase {
    std::string label;
    cnn_conv_desc d; // n c h w, f kh kw, sh sw, pad_top pad_left, oh ow
    bool bias;
};

inline std::vector<ConvCase> seed_convs()
{
    return {
        {"conv1", {32, 3, 32, 32, 32, 3, 3, 1, 1, 0, 0, 30, 30}, true},
        {"conv2", {32, 32, 15, 15, 64, 3, 3, 1, 1, 0, 0, 13, 13}, true},
        {"conv3", {32, 64, 6, 6, 64, 3, 3, 1, 1, 0, 0, 4, 4}, true},
    };
}

// The seed's convolutions at batch 512 (conv2d_winograd's large shapes).
inline std::vector<ConvCase> large_convs()
{
    std::vector<ConvCase> v = seed_convs();
    for (ConvCase &cc : v) {
        cc.label += " batch 512";
        cc.d.n = 512;
    }
    return v;
}

inline std::vector<ConvCase> odd_convs()
{
    return {
        {"stride 2x1, pad top 1 (and bottom 1), 3x2 kernel", {3, 5, 11, 7, 7, 3, 2, 2, 1, 1, 0, 6, 6}, true},
        {"one 5x5 window", {1, 1, 5, 5, 1, 5, 5, 1, 1, 0, 0, 1, 1}, true},
        {"same padding, 33 filters", {5, 17, 9, 13, 33, 3, 3, 1, 1, 1, 1, 9, 13}, true},
        {"Keras same, stride 2 (pad bottom and right only)", {2, 3, 8, 8, 4, 3, 3, 2, 2, 0, 0, 4, 4}, true},
        {"1x1 kernel, no bias", {2, 6, 7, 7, 5, 1, 1, 1, 1, 0, 0, 7, 7}, false},
    };
}

inline std::string describe(const ConvCase &cc)
{
    const cnn_conv_desc &d = cc.d;
    char buf[200];
    snprintf(buf, sizeof buf, "%s x(%d,%d,%d,%d) W(%d,%d,%d,%d)%s -> (%d,%d,%d,%d)", cc.label.c_str(),
             d.n, d.c, d.h, d.w, d.f, d.c, d.kh, d.kw, d.sh > 1 || d.sw > 1 ? " strided" : "", d.n,
             d.f, d.oh, d.ow);
    return buf;
}

inline size_t x_count(const cnn_conv_desc &d) { return (size_t)d.n * d.c * d.h * d.w; }
inline size_t w_count(const cnn_conv_desc &d) { return (size_t)d.f * d.c * d.kh * d.kw; }
inline size_t y_count(const cnn_conv_desc &d) { return (size_t)d.n * d.f * d.oh * d.ow; }
inline int k_of(const cnn_conv_desc &d) { return d.c * d.kh * d.kw; }
inline int np_of(const cnn_conv_desc &d) { return d.n * d.oh * d.ow; }
// The column matrix's size: K = c*kh*kw rows, NP = n*oh*ow columns.
inline size_t col_rows(const cnn_conv_desc &d) { return (size_t)d.c * d.kh * d.kw; }
inline size_t col_columns(const cnn_conv_desc &d) { return (size_t)d.n * d.oh * d.ow; }
inline size_t col_count(const cnn_conv_desc &d) { return col_rows(d) * col_columns(d); }

// The input element read at output (r, s) by kernel position (ki, kj), or
// -1 where that position lies in the padding.
inline long x_index(const cnn_conv_desc &d, int i, int ch, int r, int s, int ki, int kj)
{
    const int row = r * d.sh - d.pad_top + ki, column = s * d.sw - d.pad_left + kj;
    if (row < 0 || row >= d.h || column < 0 || column >= d.w) return -1;
    return (((long)i * d.c + ch) * d.h + row) * d.w + column;
}

} // namespace dev

#endif
