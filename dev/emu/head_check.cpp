// head_check.cpp: a host emulation check of cuda/dense_head.cu's backward
// (run_head.sh builds and runs it). The kernel against (a) the orders its
// comments document, re-derived here, bit for bit; (b) float64, within the
// bounds of float32 rounding; (c) a baseline dense_head.cu (the kernel before
// the backward's rewrite), bit for bit where the orders are the same: dx,
// db_below, the loss sums, and dw and db for n <= 32. Every output starts as
// NaN (a value not written shows). Usage: head_check [random shapes] [most
// n in k of one] [seed]; exit status 1 on any failure.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <random>
#include <string>
#include "cuda_common.cuh"
#include "cuda_ops.h"

extern "C" cnn_status cuda_dense_loss_head_old(cnn_ctx *ctx, const cnn_loss_desc *d, int in,
                                               int softmax, int relu, const float *x,
                                               const float *w, const float *b,
                                               const int32_t *labels, const float *targets,
                                               int scale_n, float *z, float *p, float *dw,
                                               float *db, float *dx, float *db_below,
                                               float *sums, void *ws);
int emu_skip_forward = 1;
namespace emu { extern int order_mode; extern long long switches; }

static std::mt19937_64 rng;
static long long checks = 0, failures = 0;

static bool same_bits(float a, float b) { return memcmp(&a, &b, 4) == 0; }

struct result {
    std::vector<float> dw, db, dx, dbb, z, p;
    float sums[2];
};

static void fail(const std::string &what)
{
    failures++;
    if (failures < 30) fprintf(stderr, "FAIL %s\n", what.c_str());
}

static int ref_slices(int n, long long outputs)
{
    int s = 1;
    while (s < 32 && (n + s - 1) / s > 32 && (s < 8 || outputs * s * 2 <= 131072)) s *= 2;
    return s;
}

struct shape { int n, in, k, relu, softmax, sparse, with_db, with_dx, with_dbb, full; };

static void run_case(const shape &S, int mode)
{
    const int n = S.n, in = S.in, k = S.k;
    std::normal_distribution<float> N(0.0f, 1.0f);
    std::vector<float> x((size_t)n * in), w((size_t)in * k), b(k);
    for (auto &v : x) { v = N(rng); if (S.relu) v = v > 0 ? v : 0.0f; }
    for (auto &v : w) v = 0.3f * N(rng);
    for (auto &v : b) v = 0.1f * N(rng);
    std::vector<int32_t> labels(n);
    std::vector<float> targets((size_t)n * k, 0.0f);
    for (int i = 0; i < n; ++i) {
        labels[i] = (int)(rng() % k);
        targets[(size_t)i * k + labels[i]] = 1.0f;
    }
    const size_t wsb = CNN_HEAD_WS_BYTES(n, k);
    std::vector<double> ws0((wsb + 7) / 8);
    double *rows = ws0.data();
    float *dz = (float *)(rows + 2 * (size_t)n);
    for (int i = 0; i < n; ++i) {
        rows[i] = std::fabs((double)N(rng)) * 3.0;
        rows[n + i] = (double)(rng() & 1);
    }
    for (size_t i = 0; i < (size_t)n * k; ++i) dz[i] = N(rng) / (float)std::max(n, 1);
    cnn_cuda_impl impl{};
    cnn_ctx ctx{};
    ctx.impl = &impl;
    cnn_loss_desc d{};
    d.kind = S.sparse ? CNN_LOSS_SPARSE_CE : CNN_LOSS_CATEGORICAL_CE;
    d.from_logits = !S.softmax;
    d.n = n;
    d.k = k;
    result R[2];
    std::vector<double> wsv[2] = {ws0, ws0};
    for (int which = 0; which < 2; ++which) {
        result &r = R[which];
        const float nan = std::nanf("");
        r.dw.assign((size_t)in * k, nan);
        r.db.assign(k, nan);
        r.dx.assign((size_t)n * in, nan);
        r.dbb.assign(in, nan);
        r.z.assign((size_t)n * k, nan);
        r.p.assign((size_t)n * k, nan);
        r.sums[0] = 1.5f;
        r.sums[1] = 2.0f;
        emu::order_mode = mode;
        emu_skip_forward = !S.full;
        auto fn = which == 0 ? cuda_dense_loss_head : cuda_dense_loss_head_old;
        cnn_status st = fn(&ctx, &d, in, S.softmax, S.relu, x.data(), w.data(),
                           S.with_db ? b.data() : nullptr, S.sparse ? labels.data() : nullptr,
                           S.sparse ? nullptr : targets.data(), n, r.z.data(),
                           S.softmax ? r.p.data() : nullptr, r.dw.data(),
                           S.with_db ? r.db.data() : nullptr, S.with_dx ? r.dx.data() : nullptr,
                           S.with_dbb ? r.dbb.data() : nullptr, r.sums, wsv[which].data());
        if (st != CNN_OK) { fail("status"); return; }
    }
    char tag[200];
    snprintf(tag, sizeof tag, "n=%d in=%d k=%d relu=%d db=%d dx=%d dbb=%d full=%d mode=%d", n,
             in, k, S.relu, S.with_db, S.with_dx, S.with_dbb, S.full, mode);
    const result &A = R[0], &O = R[1];
    // the forward (when run) is the same code: the same dz and rows
    const float *dzn = (const float *)(wsv[0].data() + 2 * (size_t)n);
    const float *dzo = (const float *)(wsv[1].data() + 2 * (size_t)n);
    if (memcmp(dzn, dzo, sizeof(float) * (size_t)n * k) != 0) fail(std::string("dz ") + tag);
    // dw, db: the documented order (slices, tree), bitwise; float64 within bounds
    const long long outputs = (long long)in * k + (S.with_db ? k : 0);
    const int SL = n == 0 ? 1 : ref_slices(n, outputs);
    const int L = (n + SL - 1) / SL;
    std::vector<float> part(SL);
    for (long long e = 0; e < outputs; ++e) {
        const bool isdb = e >= (long long)in * k;
        const int j = isdb ? -1 : (int)(e / k), c = isdb ? (int)(e - (long long)in * k) : (int)(e % k);
        double r64 = 0.0, bound = 0.0;
        for (int s = 0; s < SL; ++s) {
            const int r0 = std::min(n, s * L), cnt = std::min(n - r0, L);
            float acc = 0.0f;
            for (int r = r0; r < r0 + cnt; ++r) {
                const float xv = isdb ? 1.0f : x[(size_t)r * in + j];
                const float zv = dzn[(size_t)r * k + c];
                acc = isdb ? acc + zv : fmaf(xv, zv, acc);
                r64 += (double)xv * zv;
                bound += std::fabs((double)xv * zv);
            }
            part[s] = acc;
        }
        for (int h = SL / 2; h > 0; h /= 2)
            for (int s = 0; s < h; ++s) part[s] += part[s + h];
        const float got = isdb ? A.db[c] : A.dw[e];
        const float old = isdb ? O.db[c] : O.dw[e];
        checks++;
        if (!same_bits(got, part[0]))
            fail(std::string(isdb ? "db order " : "dw order ") + tag);
        if (!(std::fabs(got - r64) <= 2e-6 * bound + 1e-30))
            fail(std::string(isdb ? "db f64 " : "dw f64 ") + tag);
        if (n <= 32 && !same_bits(got, old)) fail(std::string(isdb ? "db old " : "dw old ") + tag);
    }
    // dx: fmaf over c from 0, the ReLU's mask; db_below: the row-order sum of dx
    if (S.with_dx) {
        for (int j = 0; j < in; ++j) {
            float col = 0.0f;
            for (int r = 0; r < n; ++r) {
                float acc = 0.0f;
                double r64 = 0.0, bound = 0.0;
                for (int c = 0; c < k; ++c) {
                    acc = fmaf(dzn[(size_t)r * k + c], w[(size_t)j * k + c], acc);
                    r64 += (double)dzn[(size_t)r * k + c] * w[(size_t)j * k + c];
                    bound += std::fabs((double)dzn[(size_t)r * k + c] * w[(size_t)j * k + c]);
                }
                if (S.relu && !(x[(size_t)r * in + j] > 0.0f)) acc = 0.0f, r64 = 0.0;
                const float got = A.dx[(size_t)r * in + j];
                checks++;
                if (!same_bits(got, acc)) fail(std::string("dx order ") + tag);
                if (!same_bits(got, O.dx[(size_t)r * in + j])) fail(std::string("dx old ") + tag);
                if (!(std::fabs(got - r64) <= 1e-6 * bound + 1e-30)) fail(std::string("dx f64 ") + tag);
                col += acc;
            }
            if (S.with_dbb) {
                checks++;
                if (!same_bits(A.dbb[j], col)) fail(std::string("db_below order ") + tag);
                if (!same_bits(A.dbb[j], O.dbb[j])) fail(std::string("db_below old ") + tag);
            }
        }
    }
    // loss sums: lane l adds rows l, l + 32, ... in order, then the butterfly
    {
        double l[32] = {0}, c[32] = {0};
        for (int i = 0; i < n; ++i) {
            l[i % 32] += rows[i];
            c[i % 32] += rows[n + i];
        }
        for (int o = 16; o > 0; o >>= 1) {
            double l2[32], c2[32];
            for (int t = 0; t < 32; ++t) l2[t] = l[t] + l[t ^ o], c2[t] = c[t] + c[t ^ o];
            memcpy(l, l2, sizeof l);
            memcpy(c, c2, sizeof c);
        }
        checks++;
        if (!S.full && (!same_bits(A.sums[0], 1.5f + (float)l[0]) ||
                        !same_bits(A.sums[1], 2.0f + (float)c[0])))
            fail(std::string("sums order ") + tag);
    }
    // loss sums: the old bits
    checks++;
    if (!same_bits(A.sums[0], O.sums[0]) || !same_bits(A.sums[1], O.sums[1]))
        fail(std::string("sums old ") + tag);
    if (S.full) {
        for (size_t i = 0; i < A.z.size(); ++i)
            if (!same_bits(A.z[i], O.z[i])) { fail(std::string("z ") + tag); break; }
    }
}

static int pick(const std::vector<int> &edges, int lo, int hi)
{
    if (rng() % 2) return edges[rng() % edges.size()];
    return lo + (int)(rng() % (unsigned)(hi - lo + 1));
}

int main(int argc, char **argv)
{
    const int cases = argc > 1 ? atoi(argv[1]) : 200;
    const long long budget = argc > 2 ? atoll(argv[2]) : 3000000;
    rng.seed(argc > 3 ? strtoull(argv[3], nullptr, 10) : 7);
    const std::vector<int> ns = {1, 2, 7, 31, 32, 33, 63, 64, 65, 127, 129, 223, 224, 225, 256,
                                 447, 448, 449, 511, 512, 513, 1023, 1024, 1025, 1031, 2048};
    const std::vector<int> ins = {1, 2, 3, 31, 32, 33, 63, 64, 65, 84, 255, 256, 257, 511,
                                  512, 1023, 1024, 1352};
    const std::vector<int> ks = {1, 2, 3, 8, 9, 10, 15, 16, 17, 31, 32, 33, 63, 64};
    // the fixed cases first: the seeds' heads at the batches measured
    std::vector<shape> fixed = {
        {512, 64, 10, 1, 0, 1, 1, 1, 1, 0},   {32, 64, 10, 1, 0, 1, 1, 1, 1, 0},
        {2048, 64, 10, 1, 0, 1, 1, 1, 1, 0},  {512, 84, 10, 1, 0, 1, 1, 1, 1, 0},
        {32, 1352, 10, 0, 1, 1, 1, 1, 0, 0},  {513, 1352, 10, 0, 1, 1, 1, 1, 0, 0},
        {1031, 1, 64, 1, 0, 0, 1, 1, 1, 0},   {2048, 1352, 10, 1, 0, 1, 1, 1, 1, 0},
        {7, 19, 64, 1, 1, 1, 1, 1, 1, 1},     {33, 30, 10, 0, 0, 0, 1, 1, 1, 1},
        {5, 3, 2, 1, 1, 0, 0, 1, 0, 1},       {1, 1, 1, 0, 0, 1, 0, 0, 0, 0},
        // the forward in each of its four instances (loss by labels or rows,
        // with or without the softmax), tiny MNIST's 1352 inputs (27 rows a
        // thread) among them
        {8, 1352, 10, 0, 1, 0, 1, 0, 0, 1},   {6, 1352, 10, 0, 1, 1, 1, 0, 0, 1},
        {9, 700, 10, 1, 0, 0, 1, 1, 1, 1},    {4, 84, 10, 1, 0, 1, 1, 1, 1, 1},
    };
    int done = 0;
    for (const shape &s : fixed) {
        run_case(s, done % 3);
        done++;
        fprintf(stderr, "fixed %d: n=%d in=%d k=%d checks=%lld failures=%lld switches=%lld\n",
                done, s.n, s.in, s.k, checks, failures, emu::switches);
    }
    for (int c = 0; c < cases; ++c) {
        shape s;
        do {
            s.n = pick(ns, 1, 2100);
            s.in = pick(ins, 1, 1400);
            s.k = pick(ks, 1, 64);
        } while ((long long)s.n * s.in * s.k > budget);
        s.relu = rng() % 2;
        s.softmax = rng() % 2;
        s.sparse = rng() % 2;
        s.with_db = rng() % 2;
        s.with_dx = rng() % 4 != 0;
        s.with_dbb = s.with_dx && rng() % 2;
        s.full = s.n * (long long)s.in < 20000 && rng() % 4 == 0;
        run_case(s, c % 3);
        done++;
        if (c % 20 == 0)
            fprintf(stderr, "case %d: checks=%lld failures=%lld\n", c, checks, failures);
    }
    printf("%d shapes, %lld checks, %lld failures\n", done, checks, failures);
    return failures != 0;
}
