// pool_im2col_cases.cuh: the pairs (pooling, the convolution after it) that
// pool_forward_im2col.cu checks and times, their reference (float64, or
// exact: the op is a max or a mean, then data movement) and the comparison
// of a run's outputs with it: the seed networks' pairs at batch 32 and odd
// ones. Host code only (no CUDA), so that a host program can put emulated
// kernels through the same checks.
#ifndef DEV_CUDA_POOL_IM2COL_CASES_CUH
#define DEV_CUDA_POOL_IM2COL_CASES_CUH

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "checks.cuh"         // Fill, Errors, compare
#include "cnn.h"              // the descriptors, cnn_conv_reads_inside
#include "conv_cases.cuh"     // col_rows, col_columns, col_count
#include "pool_col_cases.cuh" // pool_window, pool_in_count, pool_out_count

namespace dev {

// A pooling whose output (n, c, p.oh, p.ow) is the input (n, c, d.h, d.w)
// of the convolution d, which reads inside it (pads 0, the last window
// inside: what the engine's fused entry takes). Unlike PoolColCase's, the
// pool's windows may overlap: the forward has no such limit.
struct PairCase {
    std::string label;
    cnn_pool_desc p; // mode, n c h w, ph pw, sh sw, pad_top pad_left, oh ow
    cnn_conv_desc d; // n c h w, f kh kw, sh sw, pad_top pad_left, oh ow
};

inline std::vector<PairCase> seed_pairs()
{
    return {
        {"CIFAR-10 conv2 after pool1", {CNN_POOL_MAX, 32, 32, 30, 30, 2, 2, 2, 2, 0, 0, 15, 15},
         {32, 32, 15, 15, 64, 3, 3, 1, 1, 0, 0, 13, 13}},
        {"CIFAR-10 conv3 after pool2 (last row and column dropped)",
         {CNN_POOL_MAX, 32, 64, 13, 13, 2, 2, 2, 2, 0, 0, 6, 6},
         {32, 64, 6, 6, 64, 3, 3, 1, 1, 0, 0, 4, 4}},
        {"LeNet-5 conv2 after avgpool1", {CNN_POOL_AVG, 32, 6, 28, 28, 2, 2, 2, 2, 0, 0, 14, 14},
         {32, 6, 14, 14, 16, 5, 5, 1, 1, 0, 0, 10, 10}},
    };
}

inline std::vector<PairCase> odd_pairs()
{
    return {
        {"odd planes 9x7 (the pool drops a row and a column), 3x2 kernel, batch 3",
         {CNN_POOL_MAX, 3, 5, 9, 7, 2, 2, 2, 2, 0, 0, 4, 3}, {3, 5, 4, 3, 7, 3, 2, 1, 1, 0, 0, 2, 2}},
        {"batch 1, 33 channels, conv stride 2 (its last row and column read by no window)",
         {CNN_POOL_MAX, 1, 33, 16, 16, 2, 2, 2, 2, 0, 0, 8, 8}, {1, 33, 8, 8, 6, 3, 3, 2, 2, 0, 0, 3, 3}},
        {"overlapping 3x3 pool stride 2, conv 2x3 kernel stride 2x1",
         {CNN_POOL_MAX, 2, 4, 11, 9, 3, 3, 2, 2, 0, 0, 5, 4}, {2, 4, 5, 4, 5, 2, 3, 2, 1, 0, 0, 2, 2}},
        {"conv 2x2 stride 3: pool outputs between the windows read by none",
         {CNN_POOL_MAX, 2, 3, 10, 10, 2, 2, 2, 2, 0, 0, 5, 5}, {2, 3, 5, 5, 4, 2, 2, 3, 3, 0, 0, 2, 2}},
        {"max pool padded 2: empty windows (0, argmax -1) in col",
         {CNN_POOL_MAX, 1, 2, 4, 4, 2, 2, 2, 2, 2, 2, 3, 3}, {1, 2, 3, 3, 3, 2, 2, 1, 1, 0, 0, 2, 2}},
        {"1x1 max pool (a copy), one 5x5 conv window, batch 1",
         {CNN_POOL_MAX, 1, 1, 5, 5, 1, 1, 1, 1, 0, 0, 5, 5}, {1, 1, 5, 5, 1, 5, 5, 1, 1, 0, 0, 1, 1}},
        {"avg pool padded 1 (windows of 1, 2, 4 elements), 3x3 conv",
         {CNN_POOL_AVG, 2, 3, 7, 7, 2, 2, 2, 2, 1, 1, 4, 4}, {2, 3, 4, 4, 4, 3, 3, 1, 1, 0, 0, 2, 2}},
        {"avg pool 3x3 stride 1 padded 1 (windows of 4, 6, 9 elements), 1x1 conv",
         {CNN_POOL_AVG, 2, 3, 6, 5, 3, 3, 1, 1, 1, 1, 6, 5}, {2, 3, 6, 5, 4, 1, 1, 1, 1, 0, 0, 6, 5}},
        {"avg pool, batch 1, 33 channels, odd planes 11x11, conv 4x2 stride 2x3",
         {CNN_POOL_AVG, 1, 33, 11, 11, 2, 2, 2, 2, 0, 0, 5, 5}, {1, 33, 5, 5, 3, 4, 2, 2, 3, 0, 0, 1, 2}},
    };
}

inline std::string describe(const PairCase &c)
{
    const cnn_pool_desc &p = c.p;
    const cnn_conv_desc &d = c.d;
    char buf[400];
    snprintf(buf, sizeof buf,
             "%s: %s pool x(%d,%d,%d,%d) %dx%d/%dx%d pad %d,%d -> (%d,%d,%d,%d), conv %dx%d/%dx%d "
             "-> col (%d, %d)",
             c.label.c_str(), p.mode == CNN_POOL_MAX ? "max" : "avg", p.n, p.c, p.h, p.w, p.ph,
             p.pw, p.sh, p.sw, p.pad_top, p.pad_left, p.n, p.c, p.oh, p.ow, d.kh, d.kw, d.sh, d.sw,
             d.c * d.kh * d.kw, d.n * d.oh * d.ow);
    return buf;
}


// Whether the pool's output is the convolution's input, the convolution is
// 'valid' (its output size the number of windows that fit) and reads inside
// it, and no pool window starts past the image (the cases are written by
// hand: a typo would test something else).
inline bool consistent(const PairCase &c)
{
    const cnn_pool_desc &p = c.p;
    const cnn_conv_desc &d = c.d;
    return p.n == d.n && p.c == d.c && p.oh == d.h && p.ow == d.w && p.oh >= 1 && p.ow >= 1 &&
           (p.oh - 1) * p.sh - p.pad_top < p.h && (p.ow - 1) * p.sw - p.pad_left < p.w &&
           d.oh == (d.h - d.kh) / d.sh + 1 && d.ow == (d.w - d.kw) / d.sw + 1 &&
           cnn_conv_reads_inside(&d);
}

// The reference of one pair on one input x:
// - ref, scale (n, c, oh, ow): y and the scale of its error. Max: the
//   first maximum of the clipped window in row-major order (an empty window
//   0), scale 0: any difference fails. Average: the float64 mean of the
//   clipped window's in-image elements (empty: 0), scale the mean of their
//   |x|; with integer inputs the mean rounded to float32, which the kernels
//   must give exactly (the float32 sum of small integers is exact and a
//   float division is correctly rounded; the mean is either exact or has a
//   denominator with an odd factor, so it is no float32 tie and rounding it
//   through float64 rounds it once);
// - argmax (max; -1 elsewhere): the first maximum's index in the h*w plane,
//   -1 for an empty window;
// - col_src (K, NP): the element of y that each element of col holds, from
//   the column matrix's definition (conv2d.cu): row (ch*kh + ki)*kw + kj,
//   column i*P + r*ow + s holds y[i, ch, r*sh + ki, s*sw + kj] (no padding).
struct PairReference {
    std::vector<double> ref, scale;
    std::vector<int32_t> argmax;
    std::vector<uint32_t> col_src;
};

inline PairReference pair_reference(const PairCase &c, Fill fill, const std::vector<float> &x)
{
    PairReference R;
    const cnn_pool_desc &p = c.p;
    const size_t in_plane = (size_t)p.h * p.w;
    for (size_t q = 0; q < (size_t)p.n * p.c; ++q)
        for (int r = 0; r < p.oh; ++r)
            for (int s = 0; s < p.ow; ++s) {
                int r0, r1, c0, c1;
                pool_window(p, r, s, &r0, &r1, &c0, &c1);
                const bool empty = r0 >= r1 || c0 >= c1;
                if (p.mode == CNN_POOL_MAX) {
                    double best = 0.0;
                    int at = -1;
                    for (int i = r0; i < r1; ++i)
                        for (int j = c0; j < c1; ++j) {
                            const double v = x[q * in_plane + (size_t)i * p.w + j];
                            if (at < 0 || v > best) { // strict: the first maximum wins
                                best = v;
                                at = i * p.w + j;
                            }
                        }
                    R.ref.push_back(best);
                    R.scale.push_back(0.0);
                    R.argmax.push_back(at);
                } else {
                    double sum = 0.0, abs_sum = 0.0;
                    for (int i = r0; i < r1; ++i)
                        for (int j = c0; j < c1; ++j) {
                            const double v = x[q * in_plane + (size_t)i * p.w + j];
                            sum += v;
                            abs_sum += std::fabs(v);
                        }
                    const double count = empty ? 0.0 : (double)(r1 - r0) * (c1 - c0);
                    double mean = empty ? 0.0 : sum / count;
                    if (fill == Fill::INTEGER) mean = (double)(float)mean;
                    R.ref.push_back(mean);
                    R.scale.push_back(empty ? 0.0 : abs_sum / count);
                    R.argmax.push_back(-1);
                }
            }
    const cnn_conv_desc &d = c.d;
    const size_t np = col_columns(d), P = (size_t)d.oh * d.ow;
    R.col_src.resize(col_count(d));
    for (int ch = 0; ch < d.c; ++ch)
        for (int ki = 0; ki < d.kh; ++ki)
            for (int kj = 0; kj < d.kw; ++kj) {
                const size_t k = ((size_t)ch * d.kh + ki) * d.kw + kj;
                for (int i = 0; i < d.n; ++i)
                    for (int r = 0; r < d.oh; ++r)
                        for (int s = 0; s < d.ow; ++s)
                            R.col_src[k * np + i * P + (size_t)r * d.ow + s] =
                                (uint32_t)((((size_t)i * d.c + ch) * d.h + (size_t)r * d.sh + ki) * d.w +
                                           (size_t)s * d.sw + kj);
            }
    return R;
}

// What one run left: y, argmax (all of the buffer; max only is checked) and
// col (the start of the convolution's workspace, K*NP floats).
struct PairOutputs {
    std::vector<float> y, col;
    std::vector<int32_t> argmax;
};

inline bool same_bits(const std::vector<float> &a, const std::vector<float> &b)
{
    return a.size() == b.size() && (a.empty() || !memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

// A run's outputs against the reference: y (compare: a non-finite element
// is bad_at), argmax (max: mismatches), col against the reference of the y
// element it holds (the same errors; a non-finite element: bad_at past y's,
// y.size() + its index, and a failure naming it) and bit for bit the run's
// own y there (a failure), and, with first (version 1's outputs on the same
// case; NULL: none), y, argmax and col bit for bit first's (a failure).
inline Errors check_pair(const PairCase &c, const PairReference &R, const PairOutputs &out,
                         const PairOutputs *first)
{
    Errors e = compare(out.y, R.ref, R.scale);
    const bool max = c.p.mode == CNN_POOL_MAX;
    if (max)
        for (size_t i = 0; i < R.argmax.size(); ++i) e.mismatches += out.argmax[i] != R.argmax[i];
    size_t col_bad = SIZE_MAX, not_own = 0;
    for (size_t i = 0; i < R.col_src.size(); ++i) {
        const uint32_t src = R.col_src[i];
        const double o = out.col[i];
        if (!std::isfinite(o)) {
            if (col_bad == SIZE_MAX) col_bad = i;
            continue;
        }
        const double d = std::fabs(o - R.ref[src]);
        e.abs = std::max(e.abs, d);
        e.rel = std::max(e.rel, d / std::max(R.scale[src], 1e-30));
        not_own += memcmp(&out.col[i], &out.y[src], sizeof(float)) != 0;
    }
    std::string failure;
    auto add = [&failure](const std::string &s) { failure += (failure.empty() ? "" : "; ") + s; };
    char buf[200];
    if (col_bad != SIZE_MAX) {
        if (e.bad_at == SIZE_MAX) e.bad_at = out.y.size() + col_bad;
        const size_t np = col_columns(c.d);
        snprintf(buf, sizeof buf, "col (row %zu, column %zu) not finite (left unwritten: NaN)",
                 col_bad / np, col_bad % np);
        add(buf);
    }
    if (not_own) {
        snprintf(buf, sizeof buf, "%zu elements of col are not the bits of the run's y there", not_own);
        add(buf);
    }
    if (first) {
        std::string diff;
        if (!same_bits(out.y, first->y)) diff += " y";
        if (max && out.argmax != first->argmax) diff += " argmax";
        if (!same_bits(out.col, first->col)) diff += " col";
        if (!diff.empty()) add("not the bits of version 1:" + diff);
    }
    e.failure = failure;
    return e;
}

} // namespace dev

#endif
