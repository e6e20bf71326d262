// step_forward_reference.h: the host side of step_forward.cu's checks, with
// no CUDA in it (the host emulation's check dev/emu/step_forward_check.cpp
// includes it too): the seed CNN's inputs and weights, the float64 forward
// (step_forward_phases.cuh says what each phase computes) with each
// output's error scale, and the comparison of a run's outputs with it.
//
// The check is per phase: each phase's float64 reference is computed from
// the run's own output of the phase before (conv1's from x), so that an
// output is held to its own terms, and a wrong phase fails where it is
// wrong. Uniform inputs: an output to REL_TOL relative to the sum of the
// absolute values of its terms (and the bias); the probabilities to
// REL_TOL absolute, a loss to REL_TOL of 1 + |max logit| + |logit[label]|
// (the float32 subtraction of the two), the loss sum to REL_TOL of the sum
// of its losses' scales. Integer inputs: every convolution and dense output
// is a sum of integers whose absolute values add up to less than 2^24 (the
// reference checks it: magnitude), so float32 computes it exactly in any
// order and the run must equal the reference bit for bit; the softmax and
// the losses (not integers) as with uniform inputs. Argmax: equal, or
// (uniform inputs) a window whose two candidates differ by at most the
// tolerance in the reference (a near tie that rounding may flip).
#ifndef DEV_CUDA_STEP_FORWARD_REFERENCE_H
#define DEV_CUDA_STEP_FORWARD_REFERENCE_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "checks.cuh"

namespace stepref {

using dev::Errors;
using dev::Fill;

// sizes (as step_forward_phases.cuh's)
constexpr int C0 = 3, H0 = 32, F1 = 32, H1 = 30, Q1 = 15, F2 = 64, H2 = 13, Q2 = 6, F3 = 64,
              H3 = 4, D_IN = F3 * H3 * H3, D1 = 64, D2 = 10;

// The inputs: the batch x, its labels, and the weights, seeded.
struct Inputs {
    int n;
    Fill fill;
    std::vector<float> x, w1, b1, w2, b2, w3, b3, w4, b4, w5, b5;
    std::vector<int32_t> labels;
    Inputs(int batch, Fill f, uint64_t seed) : n(batch), fill(f)
    {
        // integer inputs: x in [-3, 3], weights and biases in [-1, 1] (sums
        // stay below 2^24 at the seed network's sizes; the reference checks)
        const int xr = 3, wr = 1;
        auto make = [&](size_t count, int range) {
            return dev::random_vector(count, f, seed++, range);
        };
        x = make((size_t)n * C0 * H0 * H0, xr);
        w1 = make((size_t)F1 * C0 * 9, wr), b1 = make(F1, wr);
        w2 = make((size_t)F2 * F1 * 9, wr), b2 = make(F2, wr);
        w3 = make((size_t)F3 * F2 * 9, wr), b3 = make(F3, wr);
        w4 = make((size_t)D_IN * D1, wr), b4 = make(D1, wr);
        w5 = make((size_t)D1 * D2, wr), b5 = make(D2, wr);
        dev::Rng rng(seed++);
        labels.resize(n);
        for (auto &l : labels) l = rng.integer(0, D2 - 1);
    }
};

// The outputs of a run, on the host (a version fills what it computes).
struct Outputs {
    std::vector<float> p1, p2, a3, h1, logits, probs, loss, loss_sum;
    std::vector<int32_t> arg1, arg2;
};

// The float64 forward: each output's value and scale (the sum of |terms|);
// c1 and c2 (the ReLU'd convolutions before their pools) for the argmax's
// near ties. With a run (its outputs), each phase starts from the run's
// output of the phase before instead of its own (the per-phase check);
// the head then needs the run's logits, which every version writes.
struct Reference {
    int n = 0;
    std::vector<double> c1, c1s, p1, p1s, c2, c2s, p2, p2s, a3, a3s, h1, h1s, z, zs, probs, loss;
    std::vector<int32_t> arg1, arg2;
    double loss_sum = 0, loss_sum_s = 0;
    double magnitude = 0; // the largest sum of |terms| of a convolution or dense output
    std::vector<double> probs_s, loss_s;

    // One valid 3x3 convolution + bias + ReLU: in (n, c, h, h) -> out (n, f, h-2, h-2).
    void conv(const std::vector<double> &in, const std::vector<double> &ins, int c, int h,
              const std::vector<float> &w, const std::vector<float> &b, int f,
              std::vector<double> &out, std::vector<double> &outs)
    {
        const int oh = h - 2;
        out.assign((size_t)n * f * oh * oh, 0.0);
        outs.assign(out.size(), 0.0);
        for (int i = 0; i < n; ++i)
            for (int fi = 0; fi < f; ++fi)
                for (int r = 0; r < oh; ++r)
                    for (int s = 0; s < oh; ++s) {
                        double acc = b[fi], sc = std::fabs(b[fi]), mag = sc;
                        for (int ch = 0; ch < c; ++ch)
                            for (int ki = 0; ki < 3; ++ki)
                                for (int kj = 0; kj < 3; ++kj) {
                                    const size_t xi = (((size_t)i * c + ch) * h + r + ki) * h + s + kj;
                                    const double wv = w[(((size_t)fi * c + ch) * 3 + ki) * 3 + kj];
                                    acc += wv * in[xi];
                                    sc += std::fabs(wv) * ins[xi];
                                    mag += std::fabs(wv * in[xi]);
                                }
                        const size_t o = (((size_t)i * f + fi) * oh + r) * oh + s;
                        out[o] = std::max(acc, 0.0);
                        outs[o] = sc;
                        magnitude = std::max(magnitude, mag);
                    }
    }
    // Max pool 2x2 (floor): in (n, c, h, h) -> out (n, c, h/2, h/2), the first maximum.
    void pool(const std::vector<double> &in, const std::vector<double> &ins, int c, int h,
              std::vector<double> &out, std::vector<double> &outs, std::vector<int32_t> &arg)
    {
        const int q = h / 2;
        out.assign((size_t)n * c * q * q, 0.0);
        outs.assign(out.size(), 0.0);
        arg.assign(out.size(), 0);
        for (size_t plane = 0; plane < (size_t)n * c; ++plane)
            for (int r = 0; r < q; ++r)
                for (int s = 0; s < q; ++s) {
                    int at = -1;
                    double best = 0, sc = 0;
                    for (int a = 0; a < 2; ++a)
                        for (int bb = 0; bb < 2; ++bb) {
                            const size_t xi = (plane * h + 2 * r + a) * h + 2 * s + bb;
                            if (at < 0 || in[xi] > best) best = in[xi], at = (2 * r + a) * h + 2 * s + bb;
                            sc = std::max(sc, ins[xi]);
                        }
                    const size_t o = (plane * q + r) * q + s;
                    out[o] = best, outs[o] = sc, arg[o] = at;
                }
    }
    // A dense layer: in (n, k) -> out (n, m), w (k, m); relu or not.
    void dense(const std::vector<double> &in, const std::vector<double> &ins, int k,
               const std::vector<float> &w, const std::vector<float> &b, int m, bool relu,
               std::vector<double> &out, std::vector<double> &outs)
    {
        out.assign((size_t)n * m, 0.0);
        outs.assign(out.size(), 0.0);
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < m; ++j) {
                double acc = b[j], sc = std::fabs(b[j]), mag = sc;
                for (int kk = 0; kk < k; ++kk) {
                    const double wv = w[(size_t)kk * m + j], xv = in[(size_t)i * k + kk];
                    acc += wv * xv;
                    sc += std::fabs(wv) * ins[(size_t)i * k + kk];
                    mag += std::fabs(wv * xv);
                }
                out[(size_t)i * m + j] = relu ? std::max(acc, 0.0) : acc;
                outs[(size_t)i * m + j] = sc;
                magnitude = std::max(magnitude, mag);
            }
    }

    // the input of the next phase: the run's output (from), or this one's
    static void feed(const std::vector<double> &mine, const std::vector<double> &mine_s,
                     const std::vector<float> *from, std::vector<double> &in,
                     std::vector<double> &in_s)
    {
        if (!from || from->size() < mine.size()) {
            in = mine, in_s = mine_s;
            return;
        }
        in.assign(from->begin(), from->begin() + mine.size());
        in_s.resize(in.size());
        for (size_t e = 0; e < in.size(); ++e) in_s[e] = std::fabs(in[e]);
    }

    Reference(const Inputs &in, const Outputs *run) : n(in.n)
    {
        std::vector<double> x(in.x.begin(), in.x.end()), xs(x.size()), y, ys;
        for (size_t e = 0; e < x.size(); ++e) xs[e] = std::fabs(x[e]);
        conv(x, xs, C0, H0, in.w1, in.b1, F1, c1, c1s);
        pool(c1, c1s, F1, H1, p1, p1s, arg1);
        feed(p1, p1s, run ? &run->p1 : nullptr, y, ys);
        conv(y, ys, F1, Q1, in.w2, in.b2, F2, c2, c2s);
        pool(c2, c2s, F2, H2, p2, p2s, arg2);
        feed(p2, p2s, run ? &run->p2 : nullptr, y, ys);
        conv(y, ys, F2, Q2, in.w3, in.b3, F3, a3, a3s);
        feed(a3, a3s, run ? &run->a3 : nullptr, y, ys);
        dense(y, ys, D_IN, in.w4, in.b4, D1, true, h1, h1s);
        feed(h1, h1s, run ? &run->h1 : nullptr, y, ys);
        dense(y, ys, D1, in.w5, in.b5, D2, false, z, zs);
        std::vector<double> zin, zin_s;
        feed(z, zs, run ? &run->logits : nullptr, zin, zin_s);
        probs.assign((size_t)n * D2, 0.0);
        probs_s.assign(probs.size(), 1.0);
        loss.assign(n, 0.0);
        loss_s.assign(n, 0.0);
        for (int i = 0; i < n; ++i) {
            const double *zi = &zin[(size_t)i * D2];
            double m = zi[0], sum = 0;
            for (int j = 0; j < D2; ++j) m = std::max(m, zi[j]);
            for (int j = 0; j < D2; ++j) sum += std::exp(zi[j] - m);
            for (int j = 0; j < D2; ++j) probs[(size_t)i * D2 + j] = std::exp(zi[j] - m) / sum;
            const double zl = zi[in.labels[i]];
            loss[i] = std::log(sum) - (zl - m);
            loss_s[i] = 1.0 + std::fabs(m) + std::fabs(zl);
            loss_sum += loss[i];
            loss_sum_s += loss_s[i];
        }
    }
};

// What a version computes: the pooled activations' argmax and the head's
// softmax and losses besides the activations and the logits.
enum : unsigned { WITH_ARGMAX = 1, WITH_HEAD = 2 };

// got against want to tolerance, into e (max abs and rel over outputs);
// the first non-finite output's index into e.bad_at; name into e.failure
// when this tensor alone fails its tolerance.
inline void compare_into(Errors &e, const char *name, const std::vector<float> &got,
                         const std::vector<double> &want, const std::vector<double> &scale,
                         bool exact, double &worst_rel)
{
    if (got.size() < want.size()) {
        e.failure += std::string(e.failure.empty() ? "" : "; ") + name + ": missing";
        e.bad_at = 0;
        return;
    }
    double abs_err = 0, rel_err = 0;
    for (size_t k = 0; k < want.size(); ++k) {
        if (!std::isfinite(got[k]) || !std::isfinite(want[k])) { // want: from a run's non-finite input
            if (e.bad_at == SIZE_MAX) e.bad_at = k;
            continue;
        }
        const double d = std::fabs((double)got[k] - want[k]);
        abs_err = std::max(abs_err, d);
        rel_err = std::max(rel_err, d / std::max(scale[k], 1e-30));
    }
    if (exact) {
        e.abs = std::max(e.abs, abs_err);
        e.rel = std::max(e.rel, rel_err);
        if (abs_err != 0.0) {
            char b[200];
            snprintf(b, sizeof b, "%s: max abs err %.3e (exact expected)", name, abs_err);
            e.failure += std::string(e.failure.empty() ? "" : "; ") + b;
        }
    } else if (rel_err > e.tol) {
        char b[200];
        snprintf(b, sizeof b, "%s: max rel err %.3e > %.1e", name, rel_err, e.tol);
        e.failure += std::string(e.failure.empty() ? "" : "; ") + b;
    }
    worst_rel = std::max(worst_rel, rel_err);
}

// argmax: equal, or (not exact) a near tie in the reference's window.
inline void compare_argmax(Errors &e, const char *name, const std::vector<int32_t> &got,
                           const std::vector<int32_t> &want, const std::vector<double> &c,
                           const std::vector<double> &cs, int h, bool exact)
{
    if (got.size() < want.size()) {
        e.failure += std::string(e.failure.empty() ? "" : "; ") + name + ": missing";
        return;
    }
    const int q = h / 2;
    size_t bad = 0;
    for (size_t o = 0; o < want.size(); ++o) {
        if (got[o] == want[o]) continue;
        const size_t plane = o / ((size_t)q * q);
        const int r = (int)(o / q % q), s = (int)(o % q);
        const int g = got[o];
        const bool inside = g >= 0 && g / h >= 2 * r && g / h < 2 * r + 2 && g % h >= 2 * s &&
                            g % h < 2 * s + 2;
        if (!exact && inside) {
            const size_t a = plane * h * h + want[o], b = plane * h * h + g;
            if (std::fabs(c[a] - c[b]) <= e.tol * std::max(cs[a], cs[b])) continue;
        }
        ++bad;
    }
    if (bad) {
        e.mismatches += bad;
        e.failure += std::string(e.failure.empty() ? "" : "; ") + name + ": " + std::to_string(bad) +
                     " argmax differ";
    }
}

// A run's outputs against the per-phase reference (computed here from the
// inputs and the run). Integer inputs: the activations and the logits
// exactly (e.abs is their largest error), the head to tolerance; uniform
// inputs: everything to tolerance (e.rel is the largest relative error).
// e.failure names the tensors that failed.
inline Errors compare(const Outputs &got, const Inputs &in, unsigned what)
{
    const Reference ref(in, &got);
    Errors e;
    const bool exact = in.fill == Fill::INTEGER;
    double worst = 0;
    if (exact && ref.magnitude >= 16777216.0) {
        char b[160];
        snprintf(b, sizeof b, "integer inputs: a sum of |terms| reaches %.3g >= 2^24 (not exact)",
                 ref.magnitude);
        e.failure = b;
    }
    compare_into(e, "p1", got.p1, ref.p1, ref.p1s, exact, worst);
    compare_into(e, "p2", got.p2, ref.p2, ref.p2s, exact, worst);
    compare_into(e, "a3", got.a3, ref.a3, ref.a3s, exact, worst);
    compare_into(e, "h1", got.h1, ref.h1, ref.h1s, exact, worst);
    compare_into(e, "logits", got.logits, ref.z, ref.zs, exact, worst);
    if (what & WITH_ARGMAX) {
        compare_argmax(e, "arg1", got.arg1, ref.arg1, ref.c1, ref.c1s, H1, exact);
        compare_argmax(e, "arg2", got.arg2, ref.arg2, ref.c2, ref.c2s, H2, exact);
    }
    if (what & WITH_HEAD) {
        double head_worst = 0;
        compare_into(e, "probs", got.probs, ref.probs, ref.probs_s, false, head_worst);
        compare_into(e, "loss", got.loss, ref.loss, ref.loss_s, false, head_worst);
        compare_into(e, "loss_sum", got.loss_sum, std::vector<double>{ref.loss_sum},
                     std::vector<double>{ref.loss_sum_s}, false, head_worst);
        if (!exact) worst = std::max(worst, head_worst);
    }
    if (!exact) e.rel = worst;
    return e;
}

} // namespace stepref

#endif
