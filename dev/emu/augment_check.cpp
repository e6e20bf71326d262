// augment_check.cpp: a host emulation check of the augmentation kernels
// (cuda/random_flip.cu, random_affine.cu, random_contrast.cu,
// random_crop.cu; run_augment.sh builds and runs it). Each entry against
// the same transform written out as plain loops over the NCHW batch with
// augment.h's per-sample functions (whose arithmetic the cpu engine and the
// NumPy reference share: tests/augment/test_augment_ops.py checks those
// against each other), bit for bit; RandomContrast's mean, whose double sum
// the kernel adds in a tree, within 1e-6 relative. What this checks is the
// kernels' own part: the grid (one column of blocks per sample, the tiles'
// stride over a sample of more than 1024 x 256 outputs), the draws made once
// per sample into shared memory, the indexing of every output, row0 and the
// forward counter read on the device, the inference paths. Every output
// starts as NaN (a value not written shows). Usage: augment_check [random
// cases] [seed]; exit status 1 on any failure.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_common.cuh"
#include "cuda_ops.h"

namespace emu { extern int order_mode; }

static std::mt19937_64 rng;
static long long checks = 0, failures = 0;

static void fail(const std::string &what)
{
    failures++;
    if (failures < 40) fprintf(stderr, "FAIL %s\n", what.c_str());
}

static int irange(int lo, int hi) { return lo + (int)(rng() % (unsigned)(hi - lo + 1)); }
static float frange(float lo, float hi)
{
    return lo + (hi - lo) * (float)((rng() >> 11) * (1.0 / 9007199254740992.0));
}

enum { FLIP, AFFINE, CONTRAST, CROP };
static const char *names[] = {"random_flip", "random_affine", "random_contrast", "random_crop"};

// The transform as plain loops (see the file's comment).
static void expected(int op, const cnn_aug_desc &d, int training, int64_t forward, int64_t row0,
                     const std::vector<float> &x, std::vector<float> &y)
{
    const uint64_t key_t = cnn_rng_key(d.key, (uint64_t)forward);
    const size_t plane = (size_t)d.h * d.w, oplane = (size_t)d.oh * d.ow;
    for (int i = 0; i < d.n; i++) {
        float m[6];
        int flip = 0, oy = 0, ox = 0;
        if (op == FLIP) flip = cnn_aug_draw(key_t, row0 + i, 0) <= 0.5f;
        if (op == AFFINE) cnn_aug_matrix(&d, key_t, row0 + i, m);
        if (op == CROP) cnn_aug_crop_offsets(&d, training, key_t, row0 + i, &oy, &ox);
        for (int ch = 0; ch < d.c; ch++) {
            const float *p = x.data() + ((size_t)i * d.c + ch) * plane;
            float *q = y.data() + ((size_t)i * d.c + ch) * oplane;
            if (op == CROP) {
                for (int r = 0; r < d.oh; r++)
                    for (int s = 0; s < d.ow; s++) q[r * d.ow + s] = p[(r + oy) * d.w + s + ox];
                continue;
            }
            if (!training) {
                memcpy(q, p, plane * sizeof(float));
                continue;
            }
            double sum = 0;
            for (size_t k = 0; k < plane; k++) sum += p[k];
            const float mean = (float)(sum / (double)plane);
            const float f = op == CONTRAST ? cnn_aug_value(&d, key_t, row0 + i, 0) : 0.0f;
            for (int r = 0; r < d.h; r++)
                for (int s = 0; s < d.w; s++) {
                    float v;
                    if (op == FLIP) {
                        v = p[(flip && d.flip_v ? d.h - 1 - r : r) * d.w +
                              (flip && d.flip_h ? d.w - 1 - s : s)];
                    } else if (op == AFFINE) {
                        float sy, sx;
                        cnn_aug_source(m, r, s, &sy, &sx);
                        v = cnn_aug_sample(&d, p, sy, sx);
                    } else {
                        v = (p[r * d.w + s] - mean) * f + mean;
                        v = std::min(std::max(v, d.vmin), d.vmax);
                    }
                    q[r * d.w + s] = v;
                }
        }
    }
}

static cnn_status run(int op, cnn_ctx *ctx, const cnn_aug_desc &d, int training,
                      const int64_t *forward, int64_t row0, const float *x, float *y)
{
    switch (op) {
    case FLIP: return cuda_random_flip(ctx, &d, training, forward, row0, x, y);
    case AFFINE: return cuda_random_affine(ctx, &d, training, forward, row0, x, y);
    case CONTRAST: return cuda_random_contrast(ctx, &d, training, forward, row0, x, y);
    default: return cuda_random_crop(ctx, &d, training, forward, row0, x, y);
    }
}

static void check(int op, cnn_aug_desc d, int training, int64_t forward, int64_t row0)
{
    cnn_cuda_impl impl{};
    cnn_ctx ctx{};
    ctx.impl = &impl;
    if (op != CROP) d.oh = d.h, d.ow = d.w;
    const size_t in = (size_t)d.n * d.c * d.h * d.w, out = (size_t)d.n * d.c * d.oh * d.ow;
    std::vector<float> x(in), y(out, std::nanf("")), want(out, std::nanf(""));
    for (auto &v : x) v = frange(-2.0f, 3.0f);
    const int64_t counter = forward;
    char tag[256];
    snprintf(tag, sizeof tag,
             "%s training %d n %d c %d h %d w %d -> %d x %d affine %d fill %d interp %d "
             "row0 %lld forward %lld",
             names[op], training, d.n, d.c, d.h, d.w, d.oh, d.ow, d.affine, d.fill, d.interp,
             (long long)row0, (long long)forward);
    checks++;
    if (run(op, &ctx, d, training, &counter, row0, x.data(), y.data()) != CNN_OK) {
        fail(std::string("status | ") + tag);
        return;
    }
    expected(op, d, training, forward, row0, x, want);
    for (size_t k = 0; k < out; k++) {
        const bool same = op == CONTRAST && training
                              ? std::fabs(y[k] - want[k]) <= 1e-6f * (1.0f + std::fabs(want[k]))
                              : memcmp(&y[k], &want[k], 4) == 0;
        if (!same) {
            fail(std::string(tag) + " | output " + std::to_string(k) + ": " +
                 std::to_string(y[k]) + " != " + std::to_string(want[k]));
            return;
        }
    }
}

static cnn_aug_desc random_desc(int op, int big)
{
    cnn_aug_desc d{};
    d.n = irange(1, 4);
    d.c = irange(1, 4);
    d.h = big ? 300 : irange(1, 23);
    d.w = big ? 301 : irange(1, 23);
    d.oh = irange(1, d.h);
    d.ow = irange(1, d.w);
    d.flip_h = irange(0, 1);
    d.flip_v = d.flip_h ? irange(0, 1) : 1;
    d.affine = irange(0, 2);
    d.fill = irange(0, 3);
    d.interp = irange(0, 1);
    d.fill_value = frange(-1, 1);
    d.same_zoom = irange(0, 1);
    const float lo[3][2] = {{-180, -180}, {0.4f, 0.4f}, {-1, -1}};
    const float hi[3][2] = {{180, 180}, {1.9f, 1.9f}, {1, 1}};
    const int a = op == AFFINE ? d.affine : 1;
    for (int k = 0; k < 2; k++) {
        d.lo[k] = frange(lo[a][k], 0.5f * (lo[a][k] + hi[a][k]));
        d.hi[k] = frange(d.lo[k], hi[a][k]);
    }
    d.vmin = frange(-2.5f, 0.0f);
    d.vmax = frange(0.5f, 3.0f);
    d.key = rng();
    (void)op;
    return d;
}

int main(int argc, char **argv)
{
    const int cases = argc > 1 ? atoi(argv[1]) : 200;
    rng.seed(argc > 2 ? strtoull(argv[2], nullptr, 10) : 7);
    for (int k = 0; k < cases; k++) {
        emu::order_mode = k % 3;
        const int op = k % 4;
        const int training = k % 5 != 0;
        const int64_t row0 = k % 7 == 0 ? 0 : irange(0, 1000);
        check(op, random_desc(op, 0), training, irange(0, 1 << 20), row0);
    }
    // a sample of more than 1024 x 256 outputs: the tiles' stride
    for (int op = 0; op < 4; op++) {
        cnn_aug_desc d = random_desc(op, 1);
        d.n = 1;
        d.c = 3;
        check(op, d, 1, 5, 3);
    }
    printf("augment_check: %lld checks, %lld failures\n", checks, failures);
    return failures ? 1 : 0;
}
