// pool_im2col_check.cpp: a host emulation check of
// dev/cuda/pool_im2col_kernels.cuh (the
// pooling forward that also writes the next convolution's column matrix)
// and of pool.cu's forward kernels after their move onto pool_geom.cuh's
// max_window/avg_window (run_pool_im2col.sh builds and runs it). Per shape,
// bit for bit:
//  (1) the fused kernel's y and argmax == the baseline revision's pool.cu
//      forward (its host entry, 32-bit kernels) on the same x;
//  (2) the fused kernel's column matrix == conv2d_kernels.cuh's
//      im2col_kernel over that y (conv2d.cu's grid), col first filled with a
//      NaN sentinel (an entry not written shows), with guard zones before
//      and after col's (K, n*oh*ow) and after y and argmax (a write outside
//      shows); also im2col on a small grid and the layout of conv2d.cu's
//      comment, computed here, agree;
//  (3) the working tree's pool.cu forward (its host entry; its unsigned and
//      size_t kernels launched directly, on small grids too, so the
//      grid-stride loops run) == the baseline's, and the baseline's size_t
//      kernels == its unsigned ones; both == a plain loop here (first
//      maximum in row-major order, empty window 0 and -1; the row-major
//      float sum over the in-image count);
//  (4) the host entry's refusals (pads, a last window outside, n/c/h/w not
//      the pool's output, ...): CNN_ERR_VALUE, a message naming the entry
//      (csrc/status.c's cnn_set_error, linked), nothing written.
// The fused kernel runs through its host entry (cuda_pool_forward_im2col)
// and directly on a small grid. Usage: pool_im2col_check [random shapes]
// [seed] [most input elements of one shape]; exit status 1 on any failure.
#include <cmath>
#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "conv2d_kernels.cuh"
#include "check_common.h"

// pool_im2col_kernels.cuh's host entry (emulated in its own object)
extern "C" cnn_status cuda_pool_forward_im2col(cnn_ctx *ctx, const cnn_pool_desc *p,
                                               const cnn_conv_desc *d, const float *x, float *y,
                                               int32_t *argmax, void *ws);

extern "C" {
cnn_status cuda_pool_forward_old(cnn_ctx *ctx, const cnn_pool_desc *d, const float *x, float *y,
                                 int32_t *argmax);
void emu_pool_forward_kernels(const cnn_pool_desc *d, int wide, unsigned blocks, const float *x,
                              float *y, int32_t *argmax);
void emu_pool_forward_kernels_old(const cnn_pool_desc *d, int wide, unsigned blocks,
                                  const float *x, float *y, int32_t *argmax);
void emu_pool_forward_im2col_kernel(const cnn_pool_desc *p, const cnn_conv_desc *d,
                                    unsigned blocks, const float *x, float *y, int32_t *argmax,
                                    float *col);
// pool.cu's backward with a ReLU calls it; nothing here runs that
cnn_status cuda_activation_backward(cnn_ctx *, int, int, int, const float *, const float *,
                                    float *)
{
    fprintf(stderr, "cuda_activation_backward: not emulated\n");
    abort();
}
}
namespace emu { extern int order_mode; extern long long switches; }

static long long empty_windows = 0, tied_windows = 0, grid_stride_runs = 0;
// shapes of each kind run (the summary's coverage line)
static long long n_max = 0, n_avg = 0, n_overlap = 0, n_padded = 0, n_odd = 0, n_pool2 = 0,
                 n_conv_nonsquare = 0, n_conv_strided = 0, n_conv_short = 0;

static const int32_t ARG_SENTINEL = 0x5a5a5a5a; // argmax buffers' fill

struct shape {
    cnn_pool_desc p;
    cnn_conv_desc d;
    int dist;
    std::string name;
};

static std::string describe(const shape &S)
{
    const cnn_pool_desc &p = S.p;
    const cnn_conv_desc &d = S.d;
    char b[400];
    snprintf(b, sizeof b,
             "%s%s%s pool n=%d c=%d %dx%d win %dx%d stride %dx%d pad %d,%d -> %dx%d; conv %dx%d "
             "stride %dx%d -> %dx%d (f %d) dist %d",
             S.name.c_str(), S.name.empty() ? "" : ": ", p.mode == CNN_POOL_MAX ? "max" : "avg",
             p.n, p.c, p.h, p.w, p.ph, p.pw, p.sh, p.sw, p.pad_top, p.pad_left, p.oh, p.ow, d.kh,
             d.kw, d.sh, d.sw, d.oh, d.ow, d.f, S.dist);
    return b;
}

// The plain loops: pool.cu's documented semantics.
static void window(int o, int stride, int pad, int k, int in, int *lo, int *hi)
{
    const int start = o * stride - pad;
    *lo = std::max(start, 0);
    *hi = std::min(start + k, in);
}
static void pool_ref(const cnn_pool_desc &p, const std::vector<float> &x, std::vector<float> &y,
                     std::vector<int32_t> &a)
{
    const size_t planes = (size_t)p.n * p.c;
    y.assign(planes * p.oh * p.ow, 0.0f);
    a.assign(planes * p.oh * p.ow, -1);
    for (size_t q = 0; q < planes; ++q) {
        const float *xq = x.data() + q * p.h * p.w;
        for (int r = 0; r < p.oh; ++r)
            for (int s = 0; s < p.ow; ++s) {
                const size_t o = (q * p.oh + r) * p.ow + s;
                int r0, r1, c0, c1;
                window(r, p.sh, p.pad_top, p.ph, p.h, &r0, &r1);
                window(s, p.sw, p.pad_left, p.pw, p.w, &c0, &c1);
                if (r0 >= r1 || c0 >= c1) {
                    empty_windows++;
                    continue; // 0 and -1
                }
                if (p.mode == CNN_POOL_MAX) {
                    float best = -INFINITY;
                    int at = -1, ties = 0;
                    for (int i = r0; i < r1; ++i)
                        for (int j = c0; j < c1; ++j) {
                            const float v = xq[i * p.w + j];
                            if (at < 0 || v > best) best = v, at = i * p.w + j, ties = 0;
                            else if (v == best) ties++;
                        }
                    tied_windows += ties > 0;
                    y[o] = best;
                    a[o] = at;
                } else {
                    float sum = 0.0f;
                    for (int i = r0; i < r1; ++i)
                        for (int j = c0; j < c1; ++j) sum += xq[i * p.w + j];
                    y[o] = sum / (float)((r1 - r0) * (c1 - c0));
                }
            }
    }
}

struct pool_out {
    guarded<float> y;
    guarded<int32_t> a;
    pool_out(size_t n) : y(n, 64, sentinel_f()), a(n, 64, ARG_SENTINEL) {}
};

static void fill_x(std::vector<float> &x, int dist)
{
    static const float ties[] = {-2.0f, -1.0f, -0.5f, -0.0f, 0.0f, 0.5f, 1.0f, 2.0f, 3.0f};
    std::normal_distribution<float> N(0.0f, 1.0f);
    for (auto &v : x) {
        switch (dist) {
        case 0: v = ties[rng() % 9]; break;              // ties, +-0
        case 1: v = N(rng); break;                       // distinct, about half negative
        case 2: v = -1.0f - (float)(rng() % 3); break;   // all negative, ties
        default: v = rng() % 8 ? 1.0f : N(rng); break;   // mostly one value
        }
    }
}

static void run_case(const shape &S)
{
    const cnn_pool_desc &p = S.p;
    const cnn_conv_desc &d = S.d;
    const bool is_max = p.mode == CNN_POOL_MAX;
    const size_t in = (size_t)p.n * p.c * p.h * p.w, total = (size_t)p.n * p.c * p.oh * p.ow;
    const size_t np = (size_t)d.n * d.oh * d.ow, K = (size_t)d.c * d.kh * d.kw;
    std::vector<float> x(in);
    fill_x(x, S.dist);
    emu::order_mode = (int)(rng() % 3);
    cnn_cuda_impl impl{};
    cnn_ctx ctx{};
    ctx.impl = &impl;
    const std::string tag = describe(S);
    (is_max ? n_max : n_avg)++;
    n_overlap += p.ph > p.sh || p.pw > p.sw;
    n_padded += p.pad_top > 0 || p.pad_left > 0;
    n_odd += p.h % 2 || p.w % 2;
    // pool.cu's 2x2 kernel (pool_2x2_fits)
    n_pool2 += p.mode == CNN_POOL_MAX && p.ph == 2 && p.pw == 2 && p.sh == 2 && p.sw == 2 &&
               p.pad_top == 0 && p.pad_left == 0 && 2 * p.oh <= p.h && 2 * p.ow <= p.w;
    n_conv_nonsquare += d.kh != d.kw;
    n_conv_strided += d.sh > 1 || d.sw > 1;
    n_conv_short += (d.oh - 1) * d.sh + d.kh + d.sh <= d.h || // one more row would fit
                    (d.ow - 1) * d.sw + d.kw + d.sw <= d.w;
    const unsigned few = 1 + (unsigned)(rng() % 3); // blocks of a small grid

    // the plain loops, then the baseline's host entry
    std::vector<float> yr;
    std::vector<int32_t> ar;
    pool_ref(p, x, yr, ar);
    pool_out base(total);
    if (cuda_pool_forward_old(&ctx, &p, x.data(), base.y.data(), is_max ? base.a.data() : nullptr))
        fail("baseline status | " + tag);
    compare("baseline y vs the plain loop", base.y, yr.data(), sentinel_f(), tag);
    if (is_max)
        compare("baseline argmax vs the plain loop", base.a, ar.data(), ARG_SENTINEL, tag);
    const float *y0 = base.y.data();
    const int32_t *a0 = base.a.data();

    // (3) the working tree's pool.cu, and the baseline's size_t kernels
    {
        pool_out o(total);
        if (cuda_pool_forward(&ctx, &p, x.data(), o.y.data(), is_max ? o.a.data() : nullptr))
            fail("pool_forward status | " + tag);
        compare("pool_forward y", o.y, y0, sentinel_f(), tag);
        if (is_max) compare("pool_forward argmax", o.a, a0, ARG_SENTINEL, tag);
    }
    for (int variant = 0; variant < 5; ++variant) {
        // new unsigned few, new size_t full, new size_t few, old size_t full, old unsigned few
        const bool old = variant >= 3, wide = variant == 1 || variant == 2 || variant == 3;
        const unsigned blocks =
            (variant == 0 || variant == 2 || variant == 4) ? few : cnn_blocks(total, CNN_THREADS);
        grid_stride_runs += (size_t)blocks * CNN_THREADS < total;
        pool_out o(total);
        (old ? emu_pool_forward_kernels_old : emu_pool_forward_kernels)(
            &p, wide, blocks, x.data(), o.y.data(), is_max ? o.a.data() : nullptr);
        char what[120];
        snprintf(what, sizeof what, "%s pool.cu %s kernel, %u blocks", old ? "baseline" : "new",
                 wide ? "size_t" : "unsigned", blocks);
        compare((std::string(what) + " y").c_str(), o.y, y0, sentinel_f(), tag);
        if (is_max)
            compare((std::string(what) + " argmax").c_str(), o.a, a0, ARG_SENTINEL, tag);
    }

    // (2) the reference column matrix: im2col_kernel over the baseline's y
    // guards of a row of col and more: a write one row (ki, kj) off shows
    const size_t cg = np + 256;
    guarded<float> colr(K * np, cg, sentinel_f());
    {
        const dim3 grid(cnn_blocks(np, CNN_THREADS), (unsigned)std::min(d.c, 65535));
        EMU_LAUNCH(cnn_conv2d::im2col_kernel, grid, CNN_THREADS, d, y0, colr.data());
        std::vector<float> cr;
        col_ref(d, y0, cr);
        compare("im2col_kernel vs conv2d.cu's layout", colr, cr.data(), sentinel_f(), tag);
        guarded<float> c2(K * np, cg, sentinel_f());
        const dim3 small(few, 1 + (unsigned)(rng() % 2));
        EMU_LAUNCH(cnn_conv2d::im2col_kernel, small, CNN_THREADS, d, y0, c2.data());
        compare("im2col_kernel on a small grid", c2, colr.data(), sentinel_f(), tag);
    }

    // (1), (2) the fused kernel: through its host entry, then on a small grid
    for (int variant = 0; variant < 2; ++variant) {
        pool_out o(total);
        // the workspace: col, then the convolution's t (f, NP), whose first
        // floats are the guard after col
        guarded<float> ws(K * np, cg, sentinel_f());
        const char *how = variant ? "fused kernel, small grid" : "fused host entry";
        if (variant == 0) {
            const cnn_status st = cuda_pool_forward_im2col(
                &ctx, &p, &d, x.data(), o.y.data(), is_max ? o.a.data() : nullptr, ws.data());
            if (st != CNN_OK)
                fail(std::string("fused status ") + cnn_last_error() + " | " + tag);
        } else {
            grid_stride_runs += (size_t)few * CNN_THREADS < total;
            emu_pool_forward_im2col_kernel(&p, &d, few, x.data(), o.y.data(),
                                           is_max ? o.a.data() : nullptr, ws.data());
        }
        compare((std::string(how) + " y").c_str(), o.y, y0, sentinel_f(), tag);
        if (is_max)
            compare((std::string(how) + " argmax").c_str(), o.a, a0, ARG_SENTINEL, tag);
        else {
            checks++;
            if (!untouched(o.a, ARG_SENTINEL))
                fail(std::string(how) + " wrote argmax for avg | " + tag);
        }
        compare((std::string(how) + " col").c_str(), ws, colr.data(), sentinel_f(), tag);
    }
}

// (4) the host entry's refusals: CNN_ERR_VALUE with a message, nothing written.
static void refusals()
{
    cnn_cuda_impl impl{};
    cnn_ctx ctx{};
    ctx.impl = &impl;
    const cnn_pool_desc p0 = {CNN_POOL_MAX, 2, 3, 9, 9, 2, 2, 2, 2, 0, 0, 4, 4};
    const cnn_conv_desc d0 = {2, 3, 4, 4, 5, 3, 3, 1, 1, 0, 0, 2, 2}; // last window ends at 4
    std::vector<float> x((size_t)2 * 3 * 9 * 9, 1.0f);
    struct refusal {
        const char *name, *needle;
        cnn_pool_desc p;
        cnn_conv_desc d;
        bool no_argmax;
    };
    std::vector<refusal> R;
    auto add = [&](const char *name, const char *needle, auto change, bool no_argmax = false) {
        refusal r{name, needle, p0, d0, no_argmax};
        change(r.p, r.d);
        R.push_back(r);
    };
    using P = cnn_pool_desc &;
    using D = cnn_conv_desc &;
    add("pad_top 1", "must read inside", [](P, D d) { d.pad_top = 1; });
    add("pad_left 1", "must read inside", [](P, D d) { d.pad_left = 1; });
    add("pads 1 ('same')", "must read inside",
        [](P, D d) { d.pad_top = d.pad_left = 1, d.oh = d.ow = 4; });
    add("oh one too many", "must read inside", [](P, D d) { d.oh = 3; });
    add("ow one too many", "must read inside", [](P, D d) { d.ow = 3; });
    add("stride 2 last row outside", "must read inside", [](P, D d) { d.sh = 2; d.oh = 2; });
    add("stride 3 last column outside", "must read inside", [](P, D d) { d.sw = 3; d.ow = 2; });
    add("n mismatch", "is not the pool's output", [](P, D d) { d.n = 3; });
    add("n mismatch (pool 0)", "is not the pool's output", [](P p, D) { p.n = 0; });
    add("c mismatch", "is not the pool's output", [](P, D d) { d.c = 4; });
    add("h mismatch (the pool's input h)", "is not the pool's output", [](P, D d) { d.h = 9; });
    add("w mismatch", "is not the pool's output", [](P, D d) { d.w = 5; });
    add("h, w swapped", "is not the pool's output",
        [](P p, D d) { p.ow = 3; p.w = 7; d.h = 3; d.w = 4; d.oh = 1; });
    add("max without argmax", "argmax", [](P, D) {}, true);
    add("conv f 0", "bad convolution descriptor", [](P, D d) { d.f = 0; });
    add("conv kh 0", "bad convolution descriptor", [](P, D d) { d.kh = 0; });
    add("conv sw 0", "bad convolution descriptor", [](P, D d) { d.sw = 0; });
    add("conv oh 0", "bad convolution descriptor", [](P, D d) { d.oh = 0; });
    add("pool mode 7", "unknown pool mode", [](P p, D) { p.mode = 7; });
    add("pool stride 0", "bad descriptor", [](P p, D) { p.sh = 0; });
    for (const refusal &r : R) {
        guarded<float> y(2 * 3 * 16, 64, sentinel_f()), ws(4096, 64, sentinel_f());
        guarded<int32_t> a(2 * 3 * 16, 64, ARG_SENTINEL);
        cnn_set_error(CNN_OK, "%s", "");
        const cnn_status st = cuda_pool_forward_im2col(&ctx, &r.p, &r.d, x.data(), y.data(),
                                                       r.no_argmax ? nullptr : a.data(),
                                                       ws.data());
        const bool written = !untouched(y, sentinel_f()) || !untouched(ws, sentinel_f()) ||
                             !untouched(a, ARG_SENTINEL);
        check_refusal("pool_forward_im2col: ", r.name, r.needle, st, written);
    }
    // accepted at the edges: last windows exactly inside, strides > 1
    const cnn_conv_desc ok[] = {
        d0,
        {2, 3, 4, 4, 5, 3, 3, 1, 1, 0, 0, 1, 1}, // fewer rows and columns than valid
        {2, 3, 4, 4, 5, 2, 2, 2, 2, 0, 0, 2, 2}, // stride 2, disjoint, ends at 4
        {2, 3, 4, 4, 5, 1, 4, 3, 1, 0, 0, 2, 1}, // rows 0 and 3 of 1x4
    };
    for (const cnn_conv_desc &d : ok) {
        guarded<float> y(2 * 3 * 16, 64, sentinel_f()), ws(4096, 64, sentinel_f());
        guarded<int32_t> a(2 * 3 * 16, 64, ARG_SENTINEL);
        const cnn_status st =
            cuda_pool_forward_im2col(&ctx, &p0, &d, x.data(), y.data(), a.data(), ws.data());
        checks++;
        if (st != CNN_OK || same(y[0], sentinel_f()))
            fail(std::string("accepted shape refused: ") + cnn_last_error());
    }
}

// A random pool, then a convolution reading inside its output.
static bool random_shape(shape &S, long long budget)
{
    cnn_pool_desc &p = S.p;
    cnn_conv_desc &d = S.d;
    p.mode = rng() % 2 ? CNN_POOL_MAX : CNN_POOL_AVG;
    p.n = irange(1, 5);
    p.c = rng() % 4 ? irange(1, 40) : irange(1, 3);
    // odd sizes half the time, so that pools drop rows and columns
    p.h = irange(1, 17) * 2 - (int)(rng() % 2);
    p.w = rng() % 3 ? irange(1, 17) * 2 - (int)(rng() % 2) : p.h;
    p.ph = irange(1, 3);
    p.pw = rng() % 3 ? p.ph : irange(1, 3);
    p.sh = rng() % 2 ? p.ph : irange(1, 3); // = the window: disjoint, as Keras's default
    p.sw = rng() % 2 ? p.sh : irange(1, 3);
    // the seed networks' 2x2 pools, strides 2, 'valid' (pool.cu's 2x2
    // kernel) or 'same' (at odd sizes its last window clipped: not that kernel)
    const bool seed_like = rng() % 8 == 0;
    if (seed_like) p.ph = p.pw = p.sh = p.sw = 2;
    const int pad_kind = seed_like ? (int)(rng() % 2) : (int)(rng() % 3);
    int pb = 0, pr = 0;
    if (pad_kind == 0) { // 'valid'
        p.pad_top = p.pad_left = 0;
    } else if (pad_kind == 1) { // 'same'
        same_pads(p.h, p.ph, p.sh, &p.pad_top, &pb);
        same_pads(p.w, p.pw, p.sw, &p.pad_left, &pr);
    } else { // pads 0 or 1 before, 0..2 after: windows of only padding where
             // a pad reaches past a 1-wide window, or past the image's end
        p.pad_top = irange(0, 1), p.pad_left = irange(0, 1);
        pb = irange(0, 2), pr = irange(0, 2);
    }
    if (p.h + p.pad_top + pb < p.ph || p.w + p.pad_left + pr < p.pw) return false;
    p.oh = (p.h + p.pad_top + pb - p.ph) / p.sh + 1;
    p.ow = (p.w + p.pad_left + pr - p.pw) / p.sw + 1;
    if ((long long)p.n * p.c * p.h * p.w > budget) return false;
    d.n = p.n, d.c = p.c, d.h = p.oh, d.w = p.ow;
    d.f = irange(1, 64);
    if (p.oh < 1 || p.ow < 1) return false;
    d.kh = irange(1, std::min(5, d.h));
    d.kw = rng() % 3 ? std::min(d.kh, d.w) : irange(1, std::min(5, d.w)); // square, or not
    d.sh = irange(1, 3);
    d.sw = rng() % 2 ? d.sh : irange(1, 3);
    d.pad_top = d.pad_left = 0;
    d.oh = (d.h - d.kh) / d.sh + 1; // 'valid'
    d.ow = (d.w - d.kw) / d.sw + 1;
    if (rng() % 4 == 0) { // fewer output rows or columns than 'valid' allows
        d.oh = irange(1, d.oh);
        d.ow = irange(1, d.ow);
    }
    S.dist = (int)(rng() % 4);
    S.name.clear();
    return cnn_conv_reads_inside(&d);
}

int main(int argc, char **argv)
{
    const run_args A = parse_args(argc, argv, 60000);
    refusals();
    // the seed networks' pool -> conv pairs at batch 32 (cnncuda/seeds.py)
    std::vector<shape> fixed = {
        {{CNN_POOL_MAX, 32, 32, 30, 30, 2, 2, 2, 2, 0, 0, 15, 15},
         {32, 32, 15, 15, 64, 3, 3, 1, 1, 0, 0, 13, 13}, 1, "CIFAR b32 pool1->conv2"},
        {{CNN_POOL_MAX, 32, 64, 13, 13, 2, 2, 2, 2, 0, 0, 6, 6},
         {32, 64, 6, 6, 64, 3, 3, 1, 1, 0, 0, 4, 4}, 0, "CIFAR b32 pool2->conv3"},
        {{CNN_POOL_AVG, 32, 6, 28, 28, 2, 2, 2, 2, 0, 0, 14, 14},
         {32, 6, 14, 14, 16, 5, 5, 1, 1, 0, 0, 10, 10}, 1, "LeNet b32 avgpool1->conv2"},
        // small hand-made edges: windows of only padding (1x1 pool, pad 1),
        // all-negative input (max 0 only where the window is empty)
        {{CNN_POOL_MAX, 2, 3, 5, 4, 1, 1, 1, 1, 1, 1, 6, 5},
         {2, 3, 6, 5, 7, 2, 3, 1, 1, 0, 0, 5, 3}, 2, "1x1 pool, pad 1 (empty windows)"},
        {{CNN_POOL_AVG, 3, 2, 5, 5, 1, 2, 2, 1, 1, 0, 3, 4},
         {3, 2, 3, 4, 3, 3, 1, 1, 3, 0, 0, 1, 2}, 2, "avg 1x2 pool, pad 1 (empty windows)"},
        {{CNN_POOL_MAX, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1},
         {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1}, 1, "1x1 everything"},
    };
    const int done = run_shapes(A, fixed, 50, run_case, random_shape, describe);
    printf("coverage: %lld max (%lld on the 2x2 kernel), %lld avg; %lld overlapping pools, %lld "
           "with pool padding, %lld odd inputs; convolutions: %lld non-square, %lld strided, "
           "%lld short of 'valid'\n",
           n_max, n_pool2, n_avg, n_overlap, n_padded, n_odd, n_conv_nonsquare, n_conv_strided,
           n_conv_short);
    printf("%d shapes (%lld windows of only padding, %lld max windows with ties, %lld "
           "grid-stride launches), %lld checks, %lld failures\n",
           done, empty_windows, tied_windows, grid_stride_runs, checks, failures);
    return failures != 0;
}
