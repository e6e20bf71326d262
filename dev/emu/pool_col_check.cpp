// pool_col_check.cpp: a host emulation check of
// cuda/conv2d_pool_backward_kernels.cuh (run_pool_col.sh builds and runs
// it): a convolution's data gradient carried through the pooling (and
// ReLU) before it, from the product dcol. Per shape, bit for bit:
//  (1) col2im_pool_backward_planes (whole planes a block; for 3x3 kernels
//      with strides 1 also its 3x3 instance, the engine's) for every plane
//      group pb that divides c and fits the 48 KB a launch takes, with 256
//      threads a block and with 96 and 32 (the walkers through dcol and the pool outputs
//      moved on by other steps) == col2im_pool_backward_kernel (a thread a
//      pool output), on a full grid and on a small one (its grid-stride
//      loop);
//      plane_group_of's choice is one of those groups (0 where none fits);
//  (2) both == a plain loop here: col2im's sum for each pool output in the
//      order of (ki, kj), then the pool's backward as pool.cu's (max: 0 + v
//      at the argmax where the ReLU's output there is > 0; average: 0 + v /
//      count where it is > 0; 0 elsewhere).
//  (3) for a max pool after a ReLU, both kernels given the pool's output
//      (the value at each argmax: the ReLU tested there instead of on the
//      ReLU's output, the engine's way) == the plain loop.
// dx starts as a NaN sentinel with guard zones before and after (an element
// not written, or one written outside, shows). Max pools, average pools,
// with and without the ReLU; argmaxes the first maximum of the window, and
// in some shapes a few planted outside their window or -1 (nothing passes).
// Usage: pool_col_check [random shapes] [seed] [most dx elements of one
// shape] [the seed networks' pairs 1/0]; exit status 1 on any failure.
#include <cmath>
#include "conv2d_pool_backward_kernels.cuh"
#include "check_common.h"

using namespace cnn_pool_col;

struct shape {
    cnn_pool_desc p;
    cnn_conv_desc d;
    bool relu;
    bool planted; // argmaxes planted outside their windows
};

static std::string describe(const shape &s)
{
    char b[300];
    snprintf(b, sizeof b,
             "%s%s pool n%d c%d %dx%d win %dx%d stride %dx%d pad %d,%d -> %dx%d; conv %dx%d "
             "stride %dx%d pad %d,%d -> %dx%d%s",
             s.relu ? "ReLU + " : "", s.p.mode == CNN_POOL_MAX ? "max" : "avg", s.p.n, s.p.c,
             s.p.h, s.p.w, s.p.ph, s.p.pw, s.p.sh, s.p.sw, s.p.pad_top, s.p.pad_left, s.p.oh,
             s.p.ow, s.d.kh, s.d.kw, s.d.sh, s.d.sw, s.d.pad_top, s.d.pad_left, s.d.oh, s.d.ow,
             s.planted ? ", argmaxes planted" : "");
    return b;
}

// The convolution after the pool: its input is the pool's output.
static cnn_conv_desc conv_after(const cnn_pool_desc &p, int f, int kh, int kw, int sh, int sw,
                                int pad_top, int pad_left, int pad_bottom, int pad_right)
{
    cnn_conv_desc d = {};
    d.n = p.n, d.c = p.c, d.h = p.oh, d.w = p.ow, d.f = f, d.kh = kh, d.kw = kw;
    d.sh = sh, d.sw = sw, d.pad_top = pad_top, d.pad_left = pad_left;
    d.oh = (d.h + pad_top + pad_bottom - kh) / sh + 1;
    d.ow = (d.w + pad_left + pad_right - kw) / sw + 1;
    return d;
}

static bool random_shape(shape &s, long long budget)
{
    cnn_pool_desc p = {};
    p.mode = rng() % 3 ? CNN_POOL_MAX : CNN_POOL_AVG;
    p.n = irange(1, 4), p.c = irange(1, 40);
    p.sh = irange(1, 3), p.sw = irange(1, 3);
    p.ph = irange(1, p.sh), p.pw = irange(1, p.sw);
    p.pad_top = irange(0, p.ph), p.pad_left = irange(0, p.pw);
    p.h = irange(1, 24), p.w = irange(1, 24);
    // Keras's floor division, at least one window; sometimes one window more
    // (a last window clipped, or rows in no window)
    p.oh = std::max(1, (p.h + p.pad_top - p.ph) / p.sh + 1) + (int)(rng() % 4 == 0);
    p.ow = std::max(1, (p.w + p.pad_left - p.pw) / p.sw + 1) + (int)(rng() % 4 == 0);
    const int kh = irange(1, std::min(p.oh + 1, 4)), kw = irange(1, std::min(p.ow + 1, 4));
    const int pt = irange(0, kh - 1), pl = irange(0, kw - 1);
    const cnn_conv_desc d = conv_after(p, irange(1, 5), kh, kw, irange(1, 2), irange(1, 2), pt,
                                       pl, irange(0, kh - 1), irange(0, kw - 1));
    if (d.oh < 1 || d.ow < 1) return false;
    if ((long long)p.n * p.c * p.h * p.w > budget) return false;
    s.p = p, s.d = d, s.relu = rng() % 4 != 0, s.planted = rng() % 4 == 0;
    return true;
}

// The seed CIFAR-10 CNN's two pairs (batch 3), its second as an average
// pool, and a pool with a plane too large for shared memory (the per-output
// kernel alone).
static std::vector<shape> fixed_shapes()
{
    std::vector<shape> v;
    cnn_pool_desc p1 = {CNN_POOL_MAX, 3, 32, 30, 30, 2, 2, 2, 2, 0, 0, 15, 15};
    v.push_back({p1, conv_after(p1, 64, 3, 3, 1, 1, 0, 0, 0, 0), true, false});
    cnn_pool_desc p2 = {CNN_POOL_MAX, 3, 64, 13, 13, 2, 2, 2, 2, 0, 0, 6, 6};
    v.push_back({p2, conv_after(p2, 64, 3, 3, 1, 1, 0, 0, 0, 0), true, false});
    cnn_pool_desc p2a = {CNN_POOL_AVG, 2, 6, 13, 13, 2, 2, 2, 2, 0, 0, 6, 6}; // a row, a column in no window
    v.push_back({p2a, conv_after(p2a, 3, 3, 3, 1, 1, 0, 0, 0, 0), true, false});
    cnn_pool_desc p3 = {CNN_POOL_MAX, 1, 2, 80, 80, 2, 2, 2, 2, 0, 0, 40, 40};
    v.push_back({p3, conv_after(p3, 4, 3, 3, 1, 1, 1, 1, 1, 1), true, false});
    return v;
}

// The pool's window of output (r, s), clipped: as pool_geom.cuh's window().
static void clip(int o, int stride, int pad, int k, int in, int *lo, int *hi)
{
    const int start = o * stride - pad;
    *lo = std::max(start, 0);
    *hi = std::min(start + k, in);
}

static void run_case(const shape &s)
{
    const cnn_pool_desc &p = s.p;
    const cnn_conv_desc &d = s.d;
    const pool_geom g = geom_of(&p);
    const int kk = d.kh * d.kw, P = d.oh * d.ow, NP = d.n * P;
    const size_t planes = (size_t)p.n * p.c, in_plane = (size_t)p.h * p.w,
                 op = (size_t)p.oh * p.ow, total = planes * in_plane;
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> col((size_t)d.c * kk * NP), y(total);
    for (float &v : col) v = u(rng);
    for (float &v : y) v = s.relu ? std::max(u(rng), 0.0f) : u(rng);
    // the argmax: the window's first maximum (pool.cu), -1 for an empty window
    std::vector<int32_t> argmax(planes * op, -1);
    for (size_t q = 0; q < planes; ++q)
        for (int r = 0; r < p.oh; ++r)
            for (int c = 0; c < p.ow; ++c) {
                int r0, r1, c0, c1;
                clip(r, p.sh, p.pad_top, p.ph, p.h, &r0, &r1);
                clip(c, p.sw, p.pad_left, p.pw, p.w, &c0, &c1);
                int32_t best_at = -1;
                for (int i = r0; i < r1; ++i)
                    for (int j = c0; j < c1; ++j)
                        if (best_at < 0 || y[q * in_plane + i * p.w + j] > y[q * in_plane + best_at])
                            best_at = i * p.w + j;
                int32_t &a = argmax[q * op + r * p.ow + c];
                a = best_at;
                if (s.planted && rng() % 5 == 0) a = rng() % 2 ? -1 : (int32_t)(rng() % in_plane);
            }
    // the pool's output as the kernels may read it (a max pool after a ReLU):
    // the value at the argmax (max_window's, planted argmaxes included), NaN
    // where there is none
    std::vector<float> pool_y(planes * op, NAN);
    for (size_t q = 0; q < planes; ++q)
        for (size_t o = 0; o < op; ++o)
            if (argmax[q * op + o] >= 0) pool_y[q * op + o] = y[q * in_plane + argmax[q * op + o]];
    // (2)'s plain loop
    std::vector<float> want(total, 0.0f);
    for (size_t q = 0; q < planes; ++q) {
        const int image = (int)(q / p.c), ch = (int)(q % p.c);
        for (int r = 0; r < p.oh; ++r)
            for (int c = 0; c < p.ow; ++c) {
                float v = 0.0f;
                for (int ki = 0; ki < d.kh; ++ki)
                    for (int kj = 0; kj < d.kw; ++kj) {
                        const int rr = r + d.pad_top - ki, cc = c + d.pad_left - kj;
                        if (rr < 0 || cc < 0 || rr % d.sh || cc % d.sw) continue;
                        if (rr / d.sh >= d.oh || cc / d.sw >= d.ow) continue;
                        v += col[(size_t)(ch * kk + ki * d.kw + kj) * NP + (size_t)image * P +
                                 (rr / d.sh) * d.ow + cc / d.sw];
                    }
                int r0, r1, c0, c1;
                clip(r, p.sh, p.pad_top, p.ph, p.h, &r0, &r1);
                clip(c, p.sw, p.pad_left, p.pw, p.w, &c0, &c1);
                for (int i = r0; i < r1; ++i)
                    for (int j = c0; j < c1; ++j) {
                        const size_t e = q * in_plane + i * p.w + j;
                        if (s.relu && !(y[e] > 0.0f)) continue;
                        if (p.mode == CNN_POOL_MAX) {
                            if (argmax[q * op + r * p.ow + c] == i * p.w + j) want[e] = 0.0f + v;
                        } else {
                            want[e] = 0.0f + v / (float)((r1 - r0) * (c1 - c0));
                        }
                    }
            }
    }
    const float *relu = s.relu ? y.data() : nullptr;
    const float *py = nullptr; // the kernels' pool_y: NULL, then (max after a ReLU) the pool's output
    const bool max = p.mode == CNN_POOL_MAX, unit = d.sh == 1 && d.sw == 1;
    const std::string tag = describe(s);
    // the kernels as the engine launches them (the plane kernel with pb
    // planes a block and `threads` threads; k33: its 3x3 instance)
#define LAUNCH(kernel, ...)                                                                        \
    EMU_LAUNCH(kernel, blocks, threads, __VA_ARGS__, col.data(), argmax.data(), relu, py, dx.data())
    auto per_output = [&](unsigned blocks, guarded<float> &dx) {
        const unsigned outputs = (unsigned)(planes * op);
        const int threads = CNN_THREADS;
        if (max && unit) LAUNCH((col2im_pool_backward_kernel<true, true>), outputs, d, g);
        else if (max) LAUNCH((col2im_pool_backward_kernel<true, false>), outputs, d, g);
        else if (unit) LAUNCH((col2im_pool_backward_kernel<false, true>), outputs, d, g);
        else LAUNCH((col2im_pool_backward_kernel<false, false>), outputs, d, g);
    };
    // aligned: dcol copied 16 bytes at a time (where plane_copies_aligned)
    auto plane_kernel = [&](int pb, int threads, bool k33, bool aligned, guarded<float> &dx) {
        const unsigned blocks = (unsigned)(planes / pb);
        if (k33 && max) LAUNCH((col2im_pool_backward_planes<true, true, 3, 3>), d, g, pb, aligned);
        else if (k33) LAUNCH((col2im_pool_backward_planes<false, true, 3, 3>), d, g, pb, aligned);
        else if (max && unit) LAUNCH((col2im_pool_backward_planes<true, true>), d, g, pb, aligned);
        else if (max) LAUNCH((col2im_pool_backward_planes<true, false>), d, g, pb, aligned);
        else if (unit) LAUNCH((col2im_pool_backward_planes<false, true>), d, g, pb, aligned);
        else LAUNCH((col2im_pool_backward_planes<false, false>), d, g, pb, aligned);
    };
    const bool can_align = plane_copies_aligned(d, col.data());
#undef LAUNCH
    guarded<float> ref(total, 64, sentinel_f());
    per_output(cnn_blocks(planes * op, CNN_THREADS), ref);
    compare("per-output kernel against the plain loop", ref, want.data(), sentinel_f(), tag);
    guarded<float> small(total, 64, sentinel_f());
    per_output(1, small);
    compare("per-output kernel on one block against the plain loop", small, want.data(),
            sentinel_f(), tag);
    int groups = 0;
    const bool has_k33 = unit && d.kh == 3 && d.kw == 3; // the engine's 3x3 instance too
    for (int pb = 1; pb <= p.c; ++pb) {
        if (p.c % pb || plane_group_floats(d, g, pb) > PLANES_SMEM_MAX_FLOATS) continue;
        groups++;
        for (int threads : {CNN_THREADS, 96, 32})
            for (bool k33 : {false, true})
                for (bool aligned : {false, true}) {
                    if ((k33 && !has_k33) || (aligned && !can_align)) continue;
                    guarded<float> dx(total, 64, sentinel_f());
                    plane_kernel(pb, threads, k33, aligned, dx);
                    compare(("plane kernel" + std::string(k33 ? " for 3x3, " : ", ") +
                             std::string(aligned ? "16-byte copies, " : "") +
                             std::to_string(pb) + " planes a block, " +
                             std::to_string(threads) + " threads, against the per-output kernel")
                                .c_str(),
                            dx, ref.data(), sentinel_f(), tag);
                }
    }
    if (!groups) fprintf(stderr, "(no plane group fits: %s)\n", tag.c_str());
    // a max pool after a ReLU: the ReLU tested on the pool's output (the
    // engine's way) gives the same bits, per output and by planes
    if (max && s.relu) {
        py = pool_y.data();
        guarded<float> dx(total, 64, sentinel_f());
        per_output(cnn_blocks(planes * op, CNN_THREADS), dx);
        compare("per-output kernel testing the pool's output against the plain loop", dx,
                want.data(), sentinel_f(), tag);
        for (int pb = 1; pb <= p.c; ++pb) {
            if (p.c % pb || plane_group_floats(d, g, pb) > PLANES_SMEM_MAX_FLOATS) continue;
            for (bool k33 : {false, true}) {
                if (k33 && !has_k33) continue;
                guarded<float> dp(total, 64, sentinel_f());
                plane_kernel(pb, 96, k33, can_align, dp);
                compare(("plane kernel testing the pool's output" +
                         std::string(k33 ? ", 3x3, " : ", ") + std::to_string(pb) +
                         " planes a block, against the plain loop")
                            .c_str(),
                        dp, want.data(), sentinel_f(), tag);
            }
        }
        py = nullptr;
    }
    // the group the engine picks is one of those run above, or 0 where none
    // fits (for a GPU of one SM: these small grids would hold the engine to
    // one plane a block on 132)
    const int chosen = plane_group_of(d, g, 1);
    checks++;
    if (chosen == 0 ? groups != 0
                    : p.c % chosen || (chosen > 1 && plane_group_floats(d, g, chosen) > PLANES_SMEM_FLOATS))
        fail("plane_group_of gave " + std::to_string(chosen) + " | " + tag);
}

int main(int argc, char **argv)
{
    const run_args A = parse_args(argc, argv, 20000);
    const int shapes = run_shapes(A, fixed_shapes(), 25, run_case, random_shape, describe);
    printf("pool_col_check: %lld checks over %d shapes, %lld failed\n", checks, shapes, failures);
    return failures ? 1 : 0;
}
