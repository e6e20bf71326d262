// step_forward_check.cpp: a host emulation check of
// dev/cuda/step_forward_phases.cuh, the phases of the seed CNN's training
// forward (dev/cuda/step_forward.cu; run_step_forward.sh builds and runs
// it). Version 1's five kernels (one per phase, a block per work item) run
// under the emulator (cuda_runtime.h: a block's threads as fibers in a
// random order, __syncthreads and the warp shuffles checked) at batch 32
// and at odd batches, with integer and uniform inputs, and are compared with
// step_forward_reference.h's float64 forward by the same rules as the GPU
// program (per phase, from the run's output of the phase before; integer
// inputs: the activations and logits bit for bit).
// Versions 2 and 3 run the same phase functions in one persistent kernel,
// so this covers their arithmetic; their grid barriers are not emulated.
// Every output starts as NaN (an element not written fails). Then the check
// itself: an output changed by one unit in the last place (integer inputs)
// or by 1e-3 of its scale (uniform), or an argmax moved, must fail.
// Usage: step_forward_check [batches...] (default 32 1 5 33); exit status 1
// on any failure.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_runtime.h"
#include "step_forward_phases_emu.h"
#include "step_forward_reference.h"

using namespace stepfwd;
using dev::Fill;

static int failures = 0, checks = 0;

static void expect(bool ok, const std::string &what)
{
    ++checks;
    if (!ok) {
        ++failures;
        fprintf(stderr, "FAIL %s\n", what.c_str());
    }
}

static std::string describe(const dev::Errors &e)
{
    char b[160];
    snprintf(b, sizeof b, "abs %.3e rel %.3e bad_at %zd mismatches %zu", e.abs, e.rel,
             e.bad_at == SIZE_MAX ? (ssize_t)-1 : (ssize_t)e.bad_at, e.mismatches);
    return b + (e.failure.empty() ? std::string() : " | " + e.failure);
}

static void run_batch(int n, Fill fill, uint64_t seed)
{
    const char *kind = fill == Fill::INTEGER ? "integer" : "uniform";
    stepref::Inputs in(n, fill, seed);
    stepref::Outputs out;
    const float nan = std::nanf("");
    out.p1.assign((size_t)n * F1 * Q1 * Q1, nan);
    out.arg1.assign(out.p1.size(), -7);
    out.p2.assign((size_t)n * F2 * Q2 * Q2, nan);
    out.arg2.assign(out.p2.size(), -7);
    out.a3.assign((size_t)n * D_IN, nan);
    out.h1.assign((size_t)n * D1, nan);
    out.logits.assign((size_t)n * D2, nan);
    out.probs.assign((size_t)n * D2, nan);
    out.loss.assign(n, nan);
    out.loss_sum.assign(1, nan);
    StepNet p{n,
              in.x.data(),
              in.w1.data(), in.b1.data(), in.w2.data(), in.b2.data(), in.w3.data(), in.b3.data(),
              in.w4.data(), in.b4.data(), in.w5.data(), in.b5.data(),
              in.labels.data(),
              out.p1.data(), out.arg1.data(), out.p2.data(), out.arg2.data(),
              out.a3.data(), out.h1.data(), out.logits.data(), out.probs.data(), out.loss.data(),
              out.loss_sum.data()};
    step_forward_separate(p, nullptr);
    const unsigned what = stepref::WITH_ARGMAX | stepref::WITH_HEAD;
    const dev::Errors e = stepref::compare(out, in, what);
    const stepref::Reference ref(in, &out); // the per-phase reference compare used
    char tag[200];
    snprintf(tag, sizeof tag, "batch %d, %s inputs (largest sum of |terms| %.3g)", n, kind,
             ref.magnitude);
    expect(dev::passes(fill, e), std::string(tag) + ": " + describe(e));
    printf("%-60s %s  %s\n", tag, dev::passes(fill, e) ? "ok  " : "FAIL", describe(e).c_str());

    // the check fails a wrong output: one element of each tensor nudged, an argmax moved
    auto must_fail = [&](const char *what_changed, auto change) {
        stepref::Outputs bad = out;
        change(bad);
        const dev::Errors eb = stepref::compare(bad, in, what);
        expect(!dev::passes(fill, eb), std::string(tag) + ": a wrong " + what_changed + " passed");
    };
    auto nudge = [&](std::vector<float> &v, size_t k, double scale) {
        v[k] = fill == Fill::INTEGER && scale == 0 ? std::nextafter(v[k], INFINITY)
                                                   : v[k] + (float)(1e-3 * std::max(scale, 1.0));
    };
    const size_t mid1 = out.p1.size() / 2 + 3, mid2 = out.p2.size() / 3 + 1;
    must_fail("p1", [&](stepref::Outputs &b) { nudge(b.p1, mid1, fill == Fill::INTEGER ? 0 : ref.p1s[mid1]); });
    must_fail("p2", [&](stepref::Outputs &b) { nudge(b.p2, mid2, fill == Fill::INTEGER ? 0 : ref.p2s[mid2]); });
    must_fail("a3", [&](stepref::Outputs &b) { nudge(b.a3, 17, fill == Fill::INTEGER ? 0 : ref.a3s[17]); });
    must_fail("h1", [&](stepref::Outputs &b) { nudge(b.h1, 5, fill == Fill::INTEGER ? 0 : ref.h1s[5]); });
    must_fail("logit", [&](stepref::Outputs &b) { nudge(b.logits, 3, fill == Fill::INTEGER ? 0 : ref.zs[3]); });
    must_fail("probability", [&](stepref::Outputs &b) { b.probs[2] += 1e-3f * (float)ref.probs_s[2]; });
    must_fail("loss", [&](stepref::Outputs &b) { b.loss[0] += 1e-3f * (float)ref.loss_s[0]; });
    must_fail("loss sum", [&](stepref::Outputs &b) { b.loss_sum[0] += 1e-3f * (float)ref.loss_sum_s; });
    must_fail("unwritten a3", [&](stepref::Outputs &b) { b.a3.back() = nan; });
    // an argmax moved to another element of its window whose value differs
    for (size_t o = 0; o < out.arg1.size(); ++o) {
        const int r = (int)(o / Q1 % Q1), s = (int)(o % Q1), plane = (int)(o / (Q1 * Q1));
        for (int a = 0; a < 4; ++a) {
            const int at = (2 * r + a / 2) * H1 + 2 * s + a % 2;
            const double v = ref.c1[(size_t)plane * H1 * H1 + at],
                         w = ref.c1[(size_t)plane * H1 * H1 + out.arg1[o]];
            if (at != out.arg1[o] && std::fabs(v - w) > 0.1 * (1.0 + std::fabs(w))) {
                must_fail("argmax", [&](stepref::Outputs &b) { b.arg1[o] = at; });
                o = out.arg1.size();
                break;
            }
        }
    }
}

int main(int argc, char **argv)
{
    std::vector<int> batches;
    for (int a = 1; a < argc; ++a) batches.push_back(atoi(argv[a]));
    if (batches.empty()) batches = {32, 1, 5, 33};
    uint64_t seed = 500;
    for (int n : batches) {
        if (n < 1 || n > MAX_BATCH) {
            fprintf(stderr, "step_forward_check: batch %d outside 1..%d\n", n, MAX_BATCH);
            return 2;
        }
        for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) run_batch(n, f, seed += 20);
    }
    printf("step_forward_check: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
