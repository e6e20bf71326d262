// gather_im2col_cases.cuh: the steps (a batch gathered from resident data,
// the network's first convolution over it) that gather_im2col.cu checks and
// times, their inputs, their reference (exact: the op moves data) and the
// comparison of a run's outputs with it: the seed networks' first layers at
// batch 32 and odd ones. Host code only (no CUDA), so that a host program
// can put emulated kernels through the same checks.
#ifndef DEV_CUDA_GATHER_IM2COL_CASES_CUH
#define DEV_CUDA_GATHER_IM2COL_CASES_CUH

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "checks.cuh" // Fill, Rng, Errors, random_vector
#include "cnn.h"      // cnn_conv_desc, CNN_COUNT_*
#include "conv_cases.cuh" // col_count, x_index

namespace dev {

// What the targets' rows are: none (src_t NULL), sparse labels (one int32
// in [0, 10) a row), float rows (categorical targets, t_row_bytes / 4
// floats) or rows of raw bytes (t_row_bytes of them, any size).
enum class Targets { NONE, LABELS, FLOATS, BYTES };

// One step: the batch's d.n rows of `resident` resident images (d.c, d.h,
// d.w floats each) at order[start + i] (a shuffled order, the batch starting
// at a nonzero position), the counters' position moving on by `rows` (the
// step's rows: d.n, or more where d.n is one replica's share), targets of
// t_row_bytes a row (NONE: src_t NULL, t_row_bytes passed all the same, to be
// ignored), src_t and dst_t t_offset bytes past their buffers' (aligned)
// starts; `negative`: the batch's rows whose order entry is negative (a zero
// image, a zero target row).
struct GatherCase {
    std::string label;
    cnn_conv_desc d; // n c h w, f kh kw, sh sw, pad_top pad_left, oh ow
    long resident, start, rows;
    Targets targets;
    size_t t_row_bytes, t_offset;
    std::vector<int> negative;
};

inline std::vector<GatherCase> seed_steps()
{
    return {
        {"CIFAR-10 conv1 (32 3x3 valid), sparse labels",
         {32, 3, 32, 32, 32, 3, 3, 1, 1, 0, 0, 30, 30}, 1000, 416, 32, Targets::LABELS, 4, 0, {}},
        {"LeNet-5 conv1 (6 5x5 'same', pad 2), sparse labels",
         {32, 1, 28, 28, 6, 5, 5, 1, 1, 2, 2, 28, 28}, 1000, 96, 32, Targets::LABELS, 4, 0, {}},
        {"tiny MNIST conv1 (8 3x3 valid), categorical targets (10 floats)",
         {32, 1, 28, 28, 8, 3, 3, 1, 1, 0, 0, 26, 26}, 1000, 960, 32, Targets::FLOATS, 40, 0, {}},
    };
}

inline std::vector<GatherCase> odd_steps()
{
    return {
        {"odd planes 7x9, 5 channels, 3x2 kernel valid, batch 3, two negative indices",
         {3, 5, 7, 9, 4, 3, 2, 1, 1, 0, 0, 5, 8}, 50, 11, 3, Targets::LABELS, 4, 0, {0, 2}},
        {"3x3 stride 2 'same' on 16x16: pads 0 top and left, 1 bottom and right",
         {4, 2, 16, 16, 4, 3, 3, 2, 2, 0, 0, 8, 8}, 40, 5, 4, Targets::LABELS, 4, 0, {}},
        {"4x4 'same' on 10x10: pads 1 top and left, 2 bottom and right",
         {2, 1, 10, 10, 3, 4, 4, 1, 1, 1, 1, 10, 10}, 30, 7, 2, Targets::FLOATS, 12, 0, {1}},
        {"5x2 kernel, strides 2x1, pad top 2 (bottom 2), 3-byte target rows",
         {3, 2, 9, 6, 2, 5, 2, 2, 1, 2, 0, 5, 5}, 25, 3, 3, Targets::BYTES, 3, 0, {}},
        {"batch 1, 1-byte target rows, 'same' 3x3, the permutation's last entry",
         {1, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 8, 8}, 20, 19, 1, Targets::BYTES, 1, 0, {}},
        {"every index of the batch negative (zero images and targets), 10-float targets",
         {2, 1, 6, 6, 2, 3, 3, 1, 1, 0, 0, 4, 4}, 10, 4, 2, Targets::FLOATS, 40, 0, {0, 1}},
        {"33 channels, 4-byte target rows at odd addresses (the single-byte unit)",
         {2, 33, 5, 5, 4, 3, 3, 1, 1, 1, 1, 5, 5}, 12, 1, 2, Targets::FLOATS, 12, 1, {}},
        {"one replica's share: 3 of the step's 8 rows, no targets (t_row_bytes 4 ignored)",
         {3, 2, 6, 5, 2, 2, 2, 1, 1, 0, 0, 5, 4}, 30, 9, 8, Targets::NONE, 4, 0, {1}},
        {"1x1 kernel, stride 3 (rows and columns between the windows never read)",
         {2, 3, 10, 11, 4, 1, 1, 3, 3, 0, 0, 4, 4}, 16, 2, 2, Targets::LABELS, 4, 0, {}},
        {"2x3 image under a 5x5 kernel padded 2 (windows mostly padding), a negative index",
         {3, 1, 2, 3, 1, 5, 5, 1, 1, 2, 2, 2, 3}, 9, 6, 3, Targets::LABELS, 4, 0, {1}},
        {"one window the size of the image, batch 5",
         {5, 2, 6, 6, 3, 6, 6, 1, 1, 0, 0, 1, 1}, 17, 8, 5, Targets::BYTES, 2, 0, {}},
    };
}

inline const char *targets_name(Targets t)
{
    switch (t) {
    case Targets::NONE: return "none";
    case Targets::LABELS: return "labels";
    case Targets::FLOATS: return "floats";
    case Targets::BYTES: return "bytes";
    }
    return "?";
}

inline std::string describe(const GatherCase &c)
{
    const cnn_conv_desc &d = c.d;
    char buf[480];
    snprintf(buf, sizeof buf,
             "%s: %d of %ld rows at position %ld (step of %ld), x(%d,%d,%d,%d), conv %dx%d/%dx%d "
             "pad %d,%d -> col (%d, %d), targets %s %zu B",
             c.label.c_str(), d.n, c.resident, c.start, c.rows, d.n, d.c, d.h, d.w, d.kh, d.kw,
             d.sh, d.sw, d.pad_top, d.pad_left, d.c * d.kh * d.kw, d.n * d.oh * d.ow,
             targets_name(c.targets), c.t_row_bytes);
    return buf;
}

// Sizes: an image's floats; the targets actually moved (0 without targets).
// (The column matrix's: conv_cases.cuh.)
inline size_t image_floats(const cnn_conv_desc &d) { return (size_t)d.c * d.h * d.w; }
inline size_t t_bytes_moved(const GatherCase &c)
{
    return c.targets == Targets::NONE ? 0 : c.t_row_bytes;
}
// The device buffers of the targets: src_t (t_offset, then resident rows, then
// a guard) and dst_t (t_offset, then d.n rows, then a guard).
constexpr size_t T_GUARD = 16;
inline size_t src_t_bytes(const GatherCase &c) { return c.t_offset + c.resident * t_bytes_moved(c) + T_GUARD; }
inline size_t dst_t_bytes(const GatherCase &c) { return c.t_offset + c.d.n * t_bytes_moved(c) + T_GUARD; }

// Whether one dimension (input size, kernel, stride, pad before, output
// size) is a Keras convolution's: 'valid' (no padding, the windows that fit)
// or 'same' (ceil(size / stride) windows, the padding's total split with the
// smaller half before, as the Net lays it out).
inline bool keras_dimension(int size, int k, int stride, int pad, int out)
{
    if (size < k && pad == 0) return false;
    if (pad == 0 && out == (size - k) / stride + 1) return true; // 'valid'
    const int same = (size + stride - 1) / stride;
    const int total = std::max((same - 1) * stride + k - size, 0);
    return out == same && pad == total / 2;
}

// Whether a case written by hand is what it says: a Keras convolution in
// each dimension ('valid' or 'same'), the batch a slice of the order within
// the resident rows, the negative rows inside the batch, and tagged images
// (below) exact in float32.
inline bool consistent(const GatherCase &c)
{
    const cnn_conv_desc &d = c.d;
    if (d.n < 1 || d.c < 1 || d.h < 1 || d.w < 1 || d.kh < 1 || d.kw < 1 || d.sh < 1 || d.sw < 1 ||
        d.oh < 1 || d.ow < 1 || d.pad_top < 0 || d.pad_left < 0)
        return false;
    if (!keras_dimension(d.h, d.kh, d.sh, d.pad_top, d.oh) || !keras_dimension(d.w, d.kw, d.sw, d.pad_left, d.ow))
        return false;
    if (c.start < 1 || c.rows < d.n || c.start + c.rows > c.resident) return false;
    for (int i : c.negative)
        if (i < 0 || i >= d.n) return false;
    if ((double)c.resident * image_floats(d) + 1 >= 16777216.0) return false;
    return c.targets != Targets::LABELS || c.t_row_bytes == 4;
}

// One case's inputs. images (resident, c, h, w): INTEGER fill: tagged, image
// r's element j holds r*c*h*w + j + 1 (never 0, exact in float32: a wrong
// element names where it came from); UNIFORM: uniform in [-1, 1).
// targets (t_offset bytes of 0xa5, then resident rows, then T_GUARD bytes of
// 0xa5): labels in [0, 10), uniform floats, random bytes below 0xff (the
// poison of dst_t). order: a shuffled
// permutation of the resident rows whose slice at start is the batch (with
// the negative rows' entries -1 - i), then that window of `rows` entries
// repeated `windows` times in all, so that every run of a timing, moving
// the position on by rows, gathers the same batch.
struct GatherInputs {
    std::vector<float> images;
    std::vector<uint8_t> targets;
    std::vector<int32_t> order;
};

inline GatherInputs gather_inputs(const GatherCase &c, Fill fill, uint64_t seed, int windows)
{
    GatherInputs in;
    const size_t img = image_floats(c.d);
    if (fill == Fill::INTEGER) {
        in.images.resize(c.resident * img);
        for (size_t e = 0; e < in.images.size(); ++e) in.images[e] = (float)(e + 1);
    } else {
        in.images = random_vector(c.resident * img, fill, seed);
    }
    Rng rng(seed ^ 0x5eedull);
    const size_t tb = t_bytes_moved(c);
    in.targets.assign(src_t_bytes(c), 0xa5);
    for (long r = 0; r < c.resident; ++r) {
        uint8_t *row = in.targets.data() + c.t_offset + r * tb;
        if (c.targets == Targets::LABELS) {
            const int32_t label = rng.integer(0, 9);
            memcpy(row, &label, 4);
        } else if (c.targets == Targets::FLOATS) {
            for (size_t k = 0; k < tb / 4; ++k) {
                const float v = rng.uniform();
                memcpy(row + 4 * k, &v, 4);
            }
        } else {
            for (size_t k = 0; k < tb; ++k) row[k] = (uint8_t)(rng.next() % 255); // never the poison's 0xff
        }
    }
    std::vector<int32_t> perm((size_t)c.resident);
    for (long r = 0; r < c.resident; ++r) perm[r] = (int32_t)r;
    for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[rng.next() % i]);
    for (int i : c.negative) perm[c.start + i] = -1 - i;
    in.order.assign(perm.begin(), perm.begin() + c.start);
    for (int w = 0; w < windows; ++w)
        in.order.insert(in.order.end(), perm.begin() + c.start, perm.begin() + c.start + c.rows);
    return in;
}

// The reference: idx (the batch's order entries), x (n, c, h, w: the
// gathered images, zero for a negative index), col (K, NP) from the column
// matrix's definition (conv2d_kernels.cuh): row (ch*kh + ki)*kw + kj,
// column i*P + r*ow + s holds x[i, ch, r*sh - pad_top + ki, s*sw - pad_left
// + kj], +0.0 outside the image; t (dst_t's whole buffer: t_offset and the
// guard untouched at 0xff, the poison, row i = src row idx[i], zero for a
// negative index).
struct GatherReference {
    std::vector<int32_t> idx;
    std::vector<float> x, col;
    std::vector<uint8_t> t;
};

inline GatherReference gather_reference(const GatherCase &c, const GatherInputs &in)
{
    GatherReference R;
    const cnn_conv_desc &d = c.d;
    const size_t img = image_floats(d), tb = t_bytes_moved(c);
    R.idx.assign(in.order.begin() + c.start, in.order.begin() + c.start + d.n);
    R.x.assign((size_t)d.n * img, 0.0f);
    R.t.assign(dst_t_bytes(c), 0xff);
    for (int i = 0; i < d.n; ++i) {
        const int32_t r = R.idx[i];
        uint8_t *dst = R.t.data() + c.t_offset + i * tb;
        if (r < 0) {
            memset(dst, 0, tb);
            continue;
        }
        std::copy(in.images.begin() + r * img, in.images.begin() + (r + 1) * img, R.x.begin() + i * img);
        memcpy(dst, in.targets.data() + c.t_offset + r * tb, tb);
    }
    const size_t np = col_columns(d), P = (size_t)d.oh * d.ow;
    R.col.assign(col_count(d), 0.0f);
    for (int ch = 0; ch < d.c; ++ch)
        for (int ki = 0; ki < d.kh; ++ki)
            for (int kj = 0; kj < d.kw; ++kj) {
                const size_t k = ((size_t)ch * d.kh + ki) * d.kw + kj;
                for (int i = 0; i < d.n; ++i)
                    for (int r = 0; r < d.oh; ++r)
                        for (int s = 0; s < d.ow; ++s) {
                            const long xi = x_index(d, i, ch, r, s, ki, kj); // R.x is (n, c, h, w)
                            if (xi >= 0) R.col[k * np + i * P + (size_t)r * d.ow + s] = R.x[xi];
                        }
            }
    return R;
}

// The counters before a step (position at start; forwards, mask and steps
// arbitrary) and after `runs` steps from there: MASK = FORWARDS++, STEPS +=
// 1, POSITION += rows at each (cnn.h gather_batch).
using Counters = std::array<int64_t, CNN_COUNTERS>;

inline Counters counters_before(const GatherCase &c)
{
    Counters k{};
    k[CNN_COUNT_POSITION] = c.start;
    k[CNN_COUNT_FORWARDS] = 41;
    k[CNN_COUNT_MASK] = -7;
    k[CNN_COUNT_STEPS] = 1000003;
    return k;
}

inline Counters counters_after(const GatherCase &c, int runs)
{
    Counters k = counters_before(c);
    if (runs > 0) {
        k[CNN_COUNT_POSITION] += (int64_t)runs * c.rows;
        k[CNN_COUNT_MASK] = k[CNN_COUNT_FORWARDS] + runs - 1;
        k[CNN_COUNT_FORWARDS] += runs;
        k[CNN_COUNT_STEPS] += runs;
    }
    return k;
}

// What one run left: x (the Net's input buffer: version 1's gather writes
// it, version 2 must not), the whole convolution workspace (col at its
// start, the rest never written), dst_t's whole buffer, the counters and the
// context's tickets (every one back to 0).
struct GatherOutputs {
    std::vector<float> x, ws;
    std::vector<uint8_t> t;
    Counters counters{};
    std::vector<uint32_t> tickets;
};

inline bool same_bits(const void *a, const void *b, size_t bytes) { return !bytes || !memcmp(a, b, bytes); }

// Where a tagged image value came from (INTEGER inputs), for a failure line.
inline std::string tag_of(const GatherCase &c, Fill fill, float v)
{
    char buf[96];
    uint32_t bits;
    memcpy(&bits, &v, 4);
    if (std::isnan(v)) snprintf(buf, sizeof buf, "NaN 0x%08x (unwritten)", bits);
    else if (fill == Fill::INTEGER && v >= 1.0f && v == std::floor(v)) {
        const size_t e = (size_t)v - 1, img = image_floats(c.d);
        snprintf(buf, sizeof buf, "%.0f (image %zu element %zu)", (double)v, e / img, e % img);
    } else snprintf(buf, sizeof buf, "%.9g (bits 0x%08x)", (double)v, bits);
    return buf;
}

// A run's outputs against the reference, every element bit for bit (the op
// moves data): col (a non-finite element: bad_at, its index; abs and rel the
// largest |out - ref| over the finite ones; any bit difference, a -0.0 for
// +0.0 included: a failure naming the first), the workspace past col still
// poisoned (all-ones bits), x (writes_x: the gathered images; else still
// poisoned), the targets' buffer (rows, and the offset and guard bytes
// untouched), the counters after one step, the tickets all 0; and, with
// first (version 1's outputs on the same case; NULL: none), col, the
// targets and the counters bit for bit first's.
inline Errors check_step(const GatherCase &c, Fill fill, const GatherReference &R,
                         const GatherOutputs &out, bool writes_x, const GatherOutputs *first)
{
    Errors e;
    std::string failure;
    auto add = [&failure](const std::string &s) { failure += (failure.empty() ? "" : "; ") + s; };
    char buf[400];
    const size_t n_col = R.col.size(), np = col_columns(c.d);
    if (out.ws.size() < n_col) {
        e.bad_at = 0;
        e.failure = "workspace smaller than the column matrix";
        return e;
    }
    size_t differ = 0, first_diff = SIZE_MAX;
    for (size_t i = 0; i < n_col; ++i) {
        const double o = out.ws[i];
        if (!std::isfinite(o)) {
            if (e.bad_at == SIZE_MAX) e.bad_at = i;
        } else {
            const double d = std::fabs(o - (double)R.col[i]);
            e.abs = std::max(e.abs, d);
            e.rel = std::max(e.rel, d / std::max(std::fabs((double)R.col[i]), 1.0));
        }
        if (!same_bits(&out.ws[i], &R.col[i], 4)) {
            if (first_diff == SIZE_MAX) first_diff = i;
            ++differ;
        }
    }
    if (differ) {
        snprintf(buf, sizeof buf, "%zu elements of col differ from the reference; first (row %zu, column %zu): %s, want %s",
                 differ, first_diff / np, first_diff % np, tag_of(c, fill, out.ws[first_diff]).c_str(),
                 tag_of(c, fill, R.col[first_diff]).c_str());
        add(buf);
    }
    size_t past = 0;
    for (size_t i = n_col; i < out.ws.size(); ++i) {
        uint32_t bits;
        memcpy(&bits, &out.ws[i], 4);
        past += bits != 0xffffffffu;
    }
    if (past) {
        snprintf(buf, sizeof buf, "%zu floats of the workspace past col written", past);
        add(buf);
    }
    if (writes_x) {
        if (out.x.size() != R.x.size() || !same_bits(out.x.data(), R.x.data(), R.x.size() * 4))
            add("x is not the gathered images");
    } else {
        size_t written = 0;
        for (float v : out.x) {
            uint32_t bits;
            memcpy(&bits, &v, 4);
            written += bits != 0xffffffffu;
        }
        if (written) {
            snprintf(buf, sizeof buf, "%zu floats of x written (the fused gather leaves x alone)", written);
            add(buf);
        }
    }
    if (out.t.size() != R.t.size()) {
        add("targets' buffer of the wrong size");
    } else if (!same_bits(out.t.data(), R.t.data(), R.t.size())) {
        size_t at = 0;
        while (out.t[at] == R.t[at]) ++at;
        const size_t tb = t_bytes_moved(c);
        if (at < c.t_offset || at >= c.t_offset + c.d.n * tb)
            snprintf(buf, sizeof buf, "targets' buffer written outside the rows (byte %zu)", at);
        else
            snprintf(buf, sizeof buf, "targets differ: row %zu byte %zu is 0x%02x, want 0x%02x",
                     (at - c.t_offset) / tb, (at - c.t_offset) % tb, out.t[at], R.t[at]);
        add(buf);
    }
    const Counters want = counters_after(c, 1);
    if (out.counters != want) {
        snprintf(buf, sizeof buf,
                 "counters (position %lld, forwards %lld, mask %lld, steps %lld), want (%lld, %lld, %lld, %lld)",
                 (long long)out.counters[0], (long long)out.counters[1], (long long)out.counters[2],
                 (long long)out.counters[3], (long long)want[0], (long long)want[1], (long long)want[2],
                 (long long)want[3]);
        add(buf);
    }
    for (size_t i = 0; i < out.tickets.size(); ++i)
        if (out.tickets[i]) {
            snprintf(buf, sizeof buf, "ticket %zu left at %u (not handed back to 0)", i, out.tickets[i]);
            add(buf);
        }
    if (first) {
        std::string diff;
        if (first->ws.size() < n_col || !same_bits(out.ws.data(), first->ws.data(), n_col * 4)) diff += " col";
        if (out.t != first->t) diff += " targets";
        if (out.counters != first->counters) diff += " counters";
        if (!diff.empty()) add("not the bits of version 1:" + diff);
    }
    e.failure = failure;
    return e;
}

} // namespace dev

#endif
