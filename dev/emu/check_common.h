// check_common.h: what the host emulation's kernel checks share
// (pool_im2col_check.cpp, gather_im2col_check.cpp, gemm_shapes_check.cpp):
// the random generator, the check and failure counters, the NaN sentinel,
// buffers with guard zones and their bit-for-bit comparison, conv2d.cu's
// column matrix from its comment, a refusal's check, and main()'s loop over
// the fixed and random shapes. Each program is one translation unit:
// everything here is static.
#ifndef EMU_CHECK_COMMON_H
#define EMU_CHECK_COMMON_H

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cnn.h"

static std::mt19937_64 rng;
static long long checks = 0, failures = 0;

// A failure: counted; the first 39 printed.
static void fail(const std::string &what)
{
    failures++;
    if (failures < 40) fprintf(stderr, "FAIL %s\n", what.c_str());
}

static int irange(int lo, int hi) { return lo + (int)(rng() % (unsigned)(hi - lo + 1)); }

// Keras's 'same' padding of one dimension (the odd pad after): `in`
// elements, window k, stride s -> the pads before and after.
static void same_pads(int in, int k, int s, int *before, int *after)
{
    const int out = (in + s - 1) / s, total = std::max((out - 1) * s + k - in, 0);
    *before = total / 2, *after = total - total / 2;
}

static float f_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
// float buffers' fill: a quiet NaN with a payload (an element not written
// shows, also where the right value is a NaN)
static const uint32_t SENTINEL = 0x7fa5a5a5u;
static float sentinel_f() { return f_of(SENTINEL); }

// A buffer of n elements with `guard` sentinel elements before and after.
template <typename T> struct guarded {
    std::vector<T> v;
    size_t n, g;
    guarded(size_t n_, size_t g_, T fill) : v(n_ + 2 * g_, fill), n(n_), g(g_) {}
    T *data() { return v.data() + g; }
    const T *data() const { return v.data() + g; }
    T operator[](size_t i) const { return v[g + i]; }
};
template <typename T> static bool same(T a, T b) { return memcmp(&a, &b, sizeof(T)) == 0; }
template <typename T> static long long guard_hits(const guarded<T> &b, T fill)
{
    long long hits = 0;
    for (size_t i = 0; i < b.g; ++i) {
        hits += !same(b.v[i], fill);
        hits += !same(b.v[b.g + b.n + i], fill);
    }
    return hits;
}
// every element, guards included, still the fill
template <typename T> static bool untouched(const guarded<T> &b, T fill)
{
    for (const T &x : b.v)
        if (!same(x, fill)) return false;
    return true;
}

// got against want (n elements), bit for bit; got's guards must still hold
// the fill. `tag` (the shape) ends a failure's line.
template <typename T>
static void compare(const char *what, const guarded<T> &got, const T *want, T fill,
                    const std::string &tag)
{
    long long bad = 0, unwritten = 0;
    size_t first = 0;
    for (size_t i = 0; i < got.n; ++i) {
        checks++;
        if (!same(got[i], want[i])) {
            if (!bad) first = i;
            bad++;
            unwritten += same(got[i], fill);
        }
    }
    const long long guards = guard_hits(got, fill);
    checks++;
    if (bad || guards) {
        char b[300];
        snprintf(b, sizeof b,
                 "%s: %lld of %zu differ (%lld not written; first at %zu), %lld guard elements "
                 "written | ",
                 what, bad, got.n, unwritten, first, guards);
        fail(b + tag);
    }
}

// conv2d.cu's column matrix of x (d's input), from its comment.
static void col_ref(const cnn_conv_desc &d, const float *x, std::vector<float> &col)
{
    const size_t P = (size_t)d.oh * d.ow, NP = (size_t)d.n * P;
    col.assign((size_t)d.c * d.kh * d.kw * NP, 0.0f);
    for (int ch = 0; ch < d.c; ++ch)
        for (int ki = 0; ki < d.kh; ++ki)
            for (int kj = 0; kj < d.kw; ++kj)
                for (int i = 0; i < d.n; ++i)
                    for (int r = 0; r < d.oh; ++r)
                        for (int s = 0; s < d.ow; ++s) {
                            const int row = r * d.sh - d.pad_top + ki,
                                      column = s * d.sw - d.pad_left + kj;
                            float v = 0.0f;
                            if (row >= 0 && row < d.h && column >= 0 && column < d.w)
                                v = x[(((size_t)i * d.c + ch) * d.h + row) * d.w + column];
                            col[((size_t)(ch * d.kh + ki) * d.kw + kj) * NP + i * P +
                                r * d.ow + s] = v;
                        }
}

// A host entry's refusal `name` (status st, `written`: whether it wrote
// anything): CNN_ERR_VALUE, cnn_last_error() starting with `prefix` and
// holding `needle`, nothing written; one check. A refusal that passes is
// listed on stderr ("refused NAME "MESSAGE"").
static void check_refusal(const char *prefix, const char *name, const char *needle,
                          cnn_status st, bool written)
{
    const std::string msg = cnn_last_error();
    checks++;
    if (st != CNN_ERR_VALUE || msg.rfind(prefix, 0) != 0 ||
        msg.find(needle) == std::string::npos || written)
        fail(std::string("refusal ") + name + ": status " + std::to_string(st) +
             ", message \"" + msg + "\"" + (written ? ", wrote" : ""));
    else
        fprintf(stderr, "refused %-32s \"%s\"\n", name, msg.c_str());
}

// main()'s arguments: [random shapes] [seed] [budget of one shape] [the
// seed networks' shapes 1/0]; seeds rng.
struct run_args {
    int cases;
    long long budget;
    bool seeds;
};
static run_args parse_args(int argc, char **argv, long long default_budget)
{
    run_args A;
    A.cases = argc > 1 ? atoi(argv[1]) : 300;
    rng.seed(argc > 2 ? strtoull(argv[2], nullptr, 10) : 7);
    A.budget = argc > 3 ? atoll(argv[3]) : default_budget;
    A.seeds = argc > 4 ? atoi(argv[4]) != 0 : true;
    return A;
}

// The fixed shapes (unless !A.seeds), then A.cases random ones (random_shape
// until it gives one within A.budget), each through run_case; a progress
// line on stderr after each fixed shape and every `every` random ones.
// Returns the number of shapes run.
template <typename Shape>
static int run_shapes(const run_args &A, const std::vector<Shape> &fixed, int every,
                      void (*run_case)(const Shape &), bool (*random_shape)(Shape &, long long),
                      std::string (*describe)(const Shape &))
{
    int done = 0;
    if (A.seeds)
        for (const Shape &s : fixed) {
            run_case(s);
            done++;
            fprintf(stderr, "%s: checks=%lld failures=%lld\n", describe(s).c_str(), checks,
                    failures);
        }
    for (int c = 0; c < A.cases; ++c) {
        Shape s;
        while (!random_shape(s, A.budget)) {}
        run_case(s);
        done++;
        if (c % every == 0)
            fprintf(stderr, "case %d: checks=%lld failures=%lld (%s)\n", c, checks, failures,
                    describe(s).c_str());
    }
    return done;
}

#endif
