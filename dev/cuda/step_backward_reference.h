// step_backward_reference.h: the host side of step_backward.cu's checks,
// with no CUDA in it (the host emulation's dev/emu/step_backward_check.cpp
// includes it too): the backward's inputs (the forward's saved tensors, or
// synthetic ones), the float64 backward and Adam per phase, and the
// comparison of a run's outputs with them.
//
// Per phase: each phase's float64 result is computed from the run's own
// input of that phase (the head from the saved tensors; dense1 from the
// run's gh1; conv3 from its g3; conv2 from its gp2; conv1 from its gp1;
// Adam from its gradients), so that a wrong phase fails where it is wrong.
// Scales: each output's sum of |terms|. Uniform inputs: every output to
// REL_TOL of its scale. Integer inputs: the head's outputs are not integers
// (dz has 1/n), so the head is held to the tolerance, and the check puts an
// integer gh1 of its own (masked by h1 > 0) between the head and dense1;
// from there every gradient is a sum of integers whose |terms| add up to
// less than 2^24 (asserted: magnitude), exact in any order, so the run must
// equal the reference bit for bit. Adam (square roots, divisions) to the
// tolerance: m and v of |m| + |g| and |v| + g^2, a weight of |w| + |its
// update with m's scale in place of m|.
#ifndef DEV_CUDA_STEP_BACKWARD_REFERENCE_H
#define DEV_CUDA_STEP_BACKWARD_REFERENCE_H

#include <array>
#include <cmath>

#include "step_forward_reference.h"

namespace stepbref {

using namespace stepref; // sizes, Inputs, Errors, Fill, compare_into
constexpr int N_PARAMS = 10;

// Keras's Adam defaults
constexpr double LR = 0.001, BETA_1 = 0.9, BETA_2 = 0.999, EPSILON = 1e-7;
inline double adam_lr_t(int step)
{
    return LR * std::sqrt(1.0 - std::pow(BETA_2, step)) / (1.0 - std::pow(BETA_1, step));
}

// The backward's inputs: the weights, x and labels (stepref::Inputs), the
// forward's saved tensors, Adam's state (m, v, the step count).
struct BwdInputs {
    Inputs fw;
    int n;
    Fill fill;
    std::vector<float> x, p1, p2, a3, h1, probs;
    std::vector<int32_t> arg1, arg2;
    std::array<std::vector<float>, N_PARAMS> m, v;
    int step = 3;
    std::vector<float> gh1_int; // integer inputs: the gh1 dense1 gets

    const std::vector<float> &param(int k) const
    {
        const std::vector<float> *w[N_PARAMS] = {&fw.w1, &fw.b1, &fw.w2, &fw.b2, &fw.w3,
                                                 &fw.b3, &fw.w4, &fw.b4, &fw.w5, &fw.b5};
        return *w[k];
    }

    // Synthetic saved tensors (the backward's check needs no forward):
    // activations >= 0 with about half of them 0 (ReLU'd), argmax anywhere in
    // its window, probabilities a softmax of random logits. Integer inputs:
    // activations in {0, 1, 2}, x in [-1, 1] (small enough for 2^24).
    BwdInputs(int batch, Fill f, uint64_t seed) : fw(batch, f, seed), n(batch), fill(f)
    {
        dev::Rng rng(seed + 1000);
        auto act = [&](size_t count) {
            std::vector<float> a(count);
            for (auto &e : a)
                e = f == Fill::INTEGER ? (float)std::max(0, rng.integer(-2, 2)) : std::max(0.0f, rng.uniform());
            return a;
        };
        x = fw.x;
        if (f == Fill::INTEGER)
            for (auto &e : x) e = (float)rng.integer(-1, 1);
        p1 = act((size_t)n * F1 * Q1 * Q1), p2 = act((size_t)n * F2 * Q2 * Q2);
        a3 = act((size_t)n * D_IN), h1 = act((size_t)n * D1);
        auto args = [&](size_t count, int q, int h) {
            std::vector<int32_t> a(count);
            for (size_t o = 0; o < count; ++o) {
                const int r = (int)(o / q % q), s = (int)(o % q), w = rng.integer(0, 3);
                a[o] = (2 * r + w / 2) * h + 2 * s + w % 2;
            }
            return a;
        };
        arg1 = args(p1.size(), Q1, H1), arg2 = args(p2.size(), Q2, H2);
        probs.resize((size_t)n * D2);
        for (int i = 0; i < n; ++i) {
            double z[D2], sum = 0;
            for (int j = 0; j < D2; ++j) sum += (z[j] = std::exp(3.0 * rng.uniform()));
            for (int j = 0; j < D2; ++j) probs[(size_t)i * D2 + j] = (float)(z[j] / sum);
        }
        init_adam(seed + 2000);
        gh1_int.resize((size_t)n * D1);
        for (size_t o = 0; o < gh1_int.size(); ++o) gh1_int[o] = h1[o] > 0 ? (float)rng.integer(-2, 2) : 0.0f;
    }
    // Adam's state: m in [-1e-2, 1e-2), v in [0, 1e-4) (uniform, as after a
    // few steps), the step count 3.
    void init_adam(uint64_t seed)
    {
        dev::Rng rng(seed);
        for (int k = 0; k < N_PARAMS; ++k) {
            m[k].resize(param(k).size()), v[k].resize(param(k).size());
            for (auto &e : m[k]) e = 1e-2f * rng.uniform();
            for (auto &e : v[k]) e = 1e-4f * (0.5f + 0.5f * rng.uniform());
        }
    }
};

// A run's outputs: gh1_head (the head's), gh1 (what dense1 got), g3, gp2,
// gp1, the weight gradients (dw1, db1, ..., dw5, db5 in that order), and
// after Adam the weights, m and v.
struct BwdOutputs {
    std::vector<float> gh1_head, gh1, g3, gp2, gp1;
    std::array<std::vector<float>, N_PARAMS> grad, w, m, v;
};

// The float64 backward and Adam, per phase from the run's own inputs.
struct BwdReference {
    int n = 0;
    std::vector<double> gh1, gh1s, g3, g3s, gp2, gp2s, gp1, gp1s;
    std::array<std::vector<double>, N_PARAMS> grad, grads, w, ws, m, ms, v, vs;
    double magnitude = 0; // the largest sum of |terms| past the head

    static std::vector<double> d(const std::vector<float> &v) { return {v.begin(), v.end()}; }

    BwdReference(const BwdInputs &in, const BwdOutputs &run) : n(in.n)
    {
        const Inputs &fw = in.fw;
        // head
        std::vector<double> dz((size_t)n * D2), dzs(dz.size());
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < D2; ++j) {
                const double oh = j == fw.labels[i] ? 1.0 : 0.0, pr = in.probs[(size_t)i * D2 + j];
                dz[(size_t)i * D2 + j] = (pr - oh) / n;
                dzs[(size_t)i * D2 + j] = (std::fabs(pr) + oh) / n;
            }
        grad[8].assign((size_t)D1 * D2, 0), grads[8] = grad[8], grad[9].assign(D2, 0), grads[9] = grad[9];
        for (int k = 0; k < D1; ++k)
            for (int j = 0; j < D2; ++j)
                for (int i = 0; i < n; ++i) {
                    grad[8][k * D2 + j] += in.h1[(size_t)i * D1 + k] * dz[(size_t)i * D2 + j];
                    grads[8][k * D2 + j] += std::fabs(in.h1[(size_t)i * D1 + k]) * dzs[(size_t)i * D2 + j];
                }
        for (int j = 0; j < D2; ++j)
            for (int i = 0; i < n; ++i) grad[9][j] += dz[(size_t)i * D2 + j], grads[9][j] += dzs[(size_t)i * D2 + j];
        gh1.assign((size_t)n * D1, 0), gh1s = gh1;
        for (int i = 0; i < n; ++i)
            for (int k = 0; k < D1; ++k) {
                if (!(in.h1[(size_t)i * D1 + k] > 0)) continue;
                for (int j = 0; j < D2; ++j) {
                    gh1[(size_t)i * D1 + k] += dz[(size_t)i * D2 + j] * fw.w5[k * D2 + j];
                    gh1s[(size_t)i * D1 + k] += dzs[(size_t)i * D2 + j] * std::fabs(fw.w5[k * D2 + j]);
                }
            }
        // dense1, from the run's gh1
        const std::vector<double> g = d(run.gh1.size() >= gh1.size() ? run.gh1 : std::vector<float>(gh1.size()));
        grad[6].assign((size_t)D_IN * D1, 0), grads[6] = grad[6], grad[7].assign(D1, 0), grads[7] = grad[7];
        for (int k = 0; k < D_IN; ++k)
            for (int j = 0; j < D1; ++j)
                for (int i = 0; i < n; ++i) {
                    const double a = in.a3[(size_t)i * D_IN + k], gv = g[(size_t)i * D1 + j];
                    grad[6][(size_t)k * D1 + j] += a * gv, grads[6][(size_t)k * D1 + j] += std::fabs(a * gv);
                }
        for (int j = 0; j < D1; ++j)
            for (int i = 0; i < n; ++i) grad[7][j] += g[(size_t)i * D1 + j], grads[7][j] += std::fabs(g[(size_t)i * D1 + j]);
        g3.assign((size_t)n * D_IN, 0), g3s = g3;
        for (int i = 0; i < n; ++i)
            for (int k = 0; k < D_IN; ++k) {
                if (!(in.a3[(size_t)i * D_IN + k] > 0)) continue;
                for (int j = 0; j < D1; ++j) {
                    const double t = g[(size_t)i * D1 + j] * fw.w4[(size_t)k * D1 + j];
                    g3[(size_t)i * D_IN + k] += t, g3s[(size_t)i * D_IN + k] += std::fabs(t);
                }
            }
        // conv3, from the run's g3
        conv_back(d(pad(run.g3, g3.size())), F3, H3, in.p2, F2, Q2, nullptr, 0, fw.w3, grad[4], grads[4],
                  grad[5], grads[5]);
        data_back_conv3(d(pad(run.g3, g3.size())), in, fw.w3);
        // conv2, from the run's gp2 (at arg2)
        conv_back(d(pad(run.gp2, gp2.size())), F2, Q2, in.p1, F1, Q1, &in.arg2, H2, fw.w2, grad[2], grads[2],
                  grad[3], grads[3]);
        data_back_conv2(d(pad(run.gp2, gp2.size())), in, fw.w2);
        // conv1, from the run's gp1 (at arg1)
        conv_back(d(pad(run.gp1, gp1.size())), F1, Q1, in.x, C0, H0, &in.arg1, H1, fw.w1, grad[0], grads[0],
                  grad[1], grads[1]);
        for (int k = 0; k < 8; ++k)
            for (double s : grads[k]) magnitude = std::max(magnitude, s);
        for (double s : g3s) magnitude = std::max(magnitude, s);
        for (double s : gp2s) magnitude = std::max(magnitude, s);
        for (double s : gp1s) magnitude = std::max(magnitude, s);
        // Adam, from the run's gradients
        // the hyperparameters as float32 holds them (Keras's variables and
        // the kernel's arguments): 1 - 0.999f is 1.3e-5 off 0.001
        const double lr_t = (float)adam_lr_t(in.step), b1 = (float)BETA_1, b2 = (float)BETA_2,
                     eps = (float)EPSILON;
        for (int k = 0; k < N_PARAMS; ++k) {
            const std::vector<float> &p = in.param(k);
            const std::vector<float> gk = pad(run.grad[k], p.size());
            w[k].resize(p.size()), ws[k] = w[k], m[k] = w[k], ms[k] = w[k], v[k] = w[k], vs[k] = w[k];
            for (size_t e = 0; e < p.size(); ++e) {
                const double gv = gk[e], m0 = in.m[k][e], v0 = in.v[k][e];
                m[k][e] = m0 + (gv - m0) * (1 - b1), ms[k][e] = std::fabs(m0) + std::fabs(gv);
                v[k][e] = v0 + (gv * gv - v0) * (1 - b2), vs[k][e] = std::fabs(v0) + gv * gv;
                const double up = lr_t * m[k][e] / (std::sqrt(v[k][e]) + eps);
                // the update's scale from m's (a cancelling m + (g - m)(1 - beta_1)
                // is as exact as |m| + |g| allows); v's terms are >= 0
                w[k][e] = p[e] - up, ws[k][e] = std::fabs(p[e]) + lr_t * ms[k][e] / (std::sqrt(v[k][e]) + eps);
            }
        }
    }
    static std::vector<float> pad(const std::vector<float> &v, size_t count)
    {
        return v.size() >= count ? v : std::vector<float>(count, 0.0f);
    }

    // A convolution's weight and bias gradients from its output gradient g
    // (n, f, gh, gh) and its input x (n, c, xh, xh); with arg (pooled g): g's
    // element (plane, q) sits at the conv output position arg[q] of a plane
    // ah wide, else at q itself.
    void conv_back(const std::vector<double> &g, int f, int gh, const std::vector<float> &x, int c, int xh,
                   const std::vector<int32_t> *arg, int ah, const std::vector<float> &w,
                   std::vector<double> &dw, std::vector<double> &dws, std::vector<double> &db,
                   std::vector<double> &dbs)
    {
        (void)w;
        dw.assign((size_t)f * c * 9, 0), dws = dw, db.assign(f, 0), dbs = db;
        for (int i = 0; i < n; ++i)
            for (int fi = 0; fi < f; ++fi)
                for (int q = 0; q < gh * gh; ++q) {
                    const size_t gi = ((size_t)i * f + fi) * gh * gh + q;
                    const double gv = g[gi];
                    const int r = arg ? (*arg)[gi] / ah : q / gh, s = arg ? (*arg)[gi] % ah : q % gh;
                    db[fi] += gv, dbs[fi] += std::fabs(gv);
                    for (int ch = 0; ch < c; ++ch)
                        for (int ki = 0; ki < 3; ++ki)
                            for (int kj = 0; kj < 3; ++kj) {
                                const double t = gv * x[(((size_t)i * c + ch) * xh + r + ki) * xh + s + kj];
                                dw[((size_t)fi * c + ch) * 9 + ki * 3 + kj] += t;
                                dws[((size_t)fi * c + ch) * 9 + ki * 3 + kj] += std::fabs(t);
                            }
                }
    }
    // conv3's data gradient (full correlation of g3 with w3), masked by p2 > 0
    void data_back_conv3(const std::vector<double> &g, const BwdInputs &in, const std::vector<float> &w3)
    {
        gp2.assign((size_t)n * F2 * Q2 * Q2, 0), gp2s = gp2;
        for (int i = 0; i < n; ++i)
            for (int f = 0; f < F3; ++f)
                for (int r = 0; r < H3; ++r)
                    for (int s = 0; s < H3; ++s) {
                        const double gv = g[((size_t)i * F3 + f) * H3 * H3 + r * H3 + s];
                        for (int c = 0; c < F2; ++c)
                            for (int ki = 0; ki < 3; ++ki)
                                for (int kj = 0; kj < 3; ++kj) {
                                    const size_t o = (((size_t)i * F2 + c) * Q2 + r + ki) * Q2 + s + kj;
                                    if (!(in.p2[o] > 0)) continue;
                                    const double t = gv * w3[(((size_t)f * F2 + c) * 3 + ki) * 3 + kj];
                                    gp2[o] += t, gp2s[o] += std::fabs(t);
                                }
                    }
    }
    // conv2's data gradient from gp2 at arg2, masked by p1 > 0
    void data_back_conv2(const std::vector<double> &g, const BwdInputs &in, const std::vector<float> &w2)
    {
        gp1.assign((size_t)n * F1 * Q1 * Q1, 0), gp1s = gp1;
        for (int i = 0; i < n; ++i)
            for (int f = 0; f < F2; ++f)
                for (int q = 0; q < Q2 * Q2; ++q) {
                    const size_t gi = ((size_t)i * F2 + f) * Q2 * Q2 + q;
                    const double gv = g[gi];
                    const int r = in.arg2[gi] / H2, s = in.arg2[gi] % H2;
                    for (int c = 0; c < F1; ++c)
                        for (int ki = 0; ki < 3; ++ki)
                            for (int kj = 0; kj < 3; ++kj) {
                                const size_t o = (((size_t)i * F1 + c) * Q1 + r + ki) * Q1 + s + kj;
                                if (!(in.p1[o] > 0)) continue;
                                const double t = gv * w2[(((size_t)f * F1 + c) * 3 + ki) * 3 + kj];
                                gp1[o] += t, gp1s[o] += std::fabs(t);
                            }
                }
    }
};

inline const char *const PARAM_NAMES[N_PARAMS] = {"dw1", "db1", "dw2", "db2", "dw3",
                                                  "db3", "dw4", "db4", "dw5", "db5"};

// A run's backward (and, with adam, its Adam) against the per-phase
// reference. exact: integer inputs past the head (gh1 was the check's
// integer one): bit for bit there; else everything to tolerance.
inline Errors compare_backward(const BwdOutputs &got, const BwdInputs &in, bool exact, bool adam)
{
    Errors e;
    // an argmax outside its window (a forward that did not write it) would
    // send the reference outside its planes: failed here instead
    auto in_window = [&](const std::vector<int32_t> &arg, int q, int h) {
        for (size_t o = 0; o < arg.size(); ++o) {
            const int r = (int)(o / q % q), s = (int)(o % q), a = arg[o];
            if (a < 0 || a / h < 2 * r || a / h > 2 * r + 1 || a % h < 2 * s || a % h > 2 * s + 1) return false;
        }
        return true;
    };
    if (!in_window(in.arg1, Q1, H1) || !in_window(in.arg2, Q2, H2)) {
        e.failure = "a saved argmax outside its pooling window";
        e.bad_at = 0;
        return e;
    }
    const BwdReference ref(in, got);
    double worst = 0, head_worst = 0;
    if (exact && ref.magnitude >= 16777216.0) {
        char b[160];
        snprintf(b, sizeof b, "integer inputs: a sum of |terms| reaches %.3g >= 2^24 (not exact)", ref.magnitude);
        e.failure = b;
    }
    compare_into(e, "gh1 (head)", got.gh1_head, ref.gh1, ref.gh1s, false, head_worst);
    compare_into(e, "dw5", got.grad[8], ref.grad[8], ref.grads[8], false, head_worst);
    compare_into(e, "db5", got.grad[9], ref.grad[9], ref.grads[9], false, head_worst);
    compare_into(e, "g3", got.g3, ref.g3, ref.g3s, exact, worst);
    compare_into(e, "gp2", got.gp2, ref.gp2, ref.gp2s, exact, worst);
    compare_into(e, "gp1", got.gp1, ref.gp1, ref.gp1s, exact, worst);
    for (int k = 0; k < 8; ++k) compare_into(e, PARAM_NAMES[k], got.grad[k], ref.grad[k], ref.grads[k], exact, worst);
    if (adam) {
        static const char *const W[N_PARAMS] = {"w1", "b1", "w2", "b2", "w3", "b3", "w4", "b4", "w5", "b5"};
        for (int k = 0; k < N_PARAMS; ++k) {
            compare_into(e, (std::string("adam m of ") + W[k]).c_str(), got.m[k], ref.m[k], ref.ms[k], false, head_worst);
            compare_into(e, (std::string("adam v of ") + W[k]).c_str(), got.v[k], ref.v[k], ref.vs[k], false, head_worst);
            compare_into(e, (std::string("adam ") + W[k]).c_str(), got.w[k], ref.w[k], ref.ws[k], false, head_worst);
        }
    }
    e.rel = exact ? head_worst : std::max(worst, head_worst);
    return e;
}

// A whole step's outputs (versions 3 and 4): the forward's (fo) against
// step_forward's reference (integer inputs bit for bit), then the backward
// and Adam (bo) against the float64 backward from the run's own saved
// tensors, to the tolerance (the forward's integer activations make the
// head's gradients non-integers).
inline Errors compare_step(const stepref::Outputs &fo, const BwdOutputs &bo, const BwdInputs &in)
{
    Errors e = stepref::compare(fo, in.fw, stepref::WITH_ARGMAX | stepref::WITH_HEAD);
    BwdInputs saved = in;
    saved.x = in.fw.x, saved.p1 = fo.p1, saved.arg1 = fo.arg1, saved.p2 = fo.p2, saved.arg2 = fo.arg2;
    saved.a3 = fo.a3, saved.h1 = fo.h1, saved.probs = fo.probs;
    const size_t n = in.n;
    if (saved.p1.size() < n * F1 * Q1 * Q1 || saved.arg1.size() < n * F1 * Q1 * Q1 ||
        saved.p2.size() < n * F2 * Q2 * Q2 || saved.arg2.size() < n * F2 * Q2 * Q2 ||
        saved.a3.size() < n * D_IN || saved.h1.size() < n * D1 || saved.probs.size() < n * D2) {
        e.failure += std::string(e.failure.empty() ? "" : "; ") + "a saved tensor missing";
        e.bad_at = 0;
        return e;
    }
    for (const auto *t : {&saved.p1, &saved.p2, &saved.a3, &saved.h1, &saved.probs})
        for (float f : *t)
            if (!std::isfinite(f)) return e.bad_at = 0, e; // the forward's compare said which
    const Errors b = compare_backward(bo, saved, false, true);
    e.abs = std::max(e.abs, b.abs), e.rel = std::max(e.rel, b.rel);
    e.bad_at = std::min(e.bad_at, b.bad_at);
    e.mismatches += b.mismatches;
    if (!b.failure.empty()) e.failure += (e.failure.empty() ? "" : "; ") + b.failure;
    return e;
}

} // namespace stepbref

#endif
