// step_backward_check.cpp: a host emulation check of
// dev/cuda/step_backward_phases.cuh, the phases of the seed CNN's training
// backward and Adam (dev/cuda/step_backward.cu; run_step_backward.sh builds
// and runs it). Version 1's kernels (the head, dense1, conv3, conv2, conv1
// and Adam, one kernel each, a block per work item) run under the emulator
// (cuda_runtime.h: a block's threads as fibers in a random order,
// __syncthreads checked) at batch 32 and at odd batches, with integer and
// uniform inputs, and are compared with step_backward_reference.h's
// float64 backward by the same rules as the GPU program (per phase, from the
// run's own input of the phase; integer inputs: the check's integer gh1
// after the head, then every gradient bit for bit; Adam to tolerance).
// Every output starts as NaN (an element not written fails). Then the check
// itself: each gradient changed by one unit in the last place (integer
// inputs) or by 1e-3 of its scale (uniform), an Adam output by 1e-3 of its
// scale, or an element left unwritten, must fail.
// Version 2's kernels (Adam in the phases: step_backward_adam_fused) run
// on the same inputs and are held to the same checks; version 4 (the whole
// step: step_forward's kernels then version 2's) on the forward's input,
// checked as the GPU program checks it (stepbref::compare_step).
// Usage: step_backward_check [batches...] (default 32 1 5 33); exit status 1
// on any failure.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <vector>

#include "cuda_runtime.h"
#include "step_backward_phases_emu.h"
#include "step_backward_reference.h"

using namespace stepbwd;
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
    char b[300];
    snprintf(b, sizeof b, "abs %.3e rel %.3e bad_at %zd", e.abs, e.rel,
             e.bad_at == SIZE_MAX ? (ssize_t)-1 : (ssize_t)e.bad_at);
    return b + (e.failure.empty() ? std::string() : " | " + e.failure);
}

static void run_batch(int n, Fill fill, uint64_t seed, bool fused)
{
    const char *kind = fill == Fill::INTEGER ? "integer" : "uniform";
    const char *how = fused ? "v2 (Adam in the phases)" : "v1 (6 kernels)";
    stepbref::BwdInputs in(n, fill, seed);
    stepbref::BwdOutputs out;
    const float nan = std::nanf("");
    out.gh1.assign((size_t)n * D1, nan);
    out.g3.assign((size_t)n * D_IN, nan);
    out.gp2.assign((size_t)n * F2 * Q2 * Q2, nan);
    out.gp1.assign((size_t)n * F1 * Q1 * Q1, nan);
    for (int k = 0; k < N_PARAMS; ++k) out.grad[k].assign(in.param(k).size(), nan);
    BwdNet p{n,
             in.x.data(), in.p1.data(), in.arg1.data(), in.p2.data(), in.arg2.data(),
             in.a3.data(), in.h1.data(), in.probs.data(), in.fw.labels.data(),
             in.fw.w2.data(), in.fw.w3.data(), in.fw.w4.data(), in.fw.w5.data(),
             out.gh1.data(), out.g3.data(), out.gp2.data(), out.gp1.data(),
             out.grad[0].data(), out.grad[1].data(), out.grad[2].data(), out.grad[3].data(),
             out.grad[4].data(), out.grad[5].data(), out.grad[6].data(), out.grad[7].data(),
             out.grad[8].data(), out.grad[9].data()};
    AdamNet a{};
    int off = 0;
    for (int k = 0; k < N_PARAMS; ++k) {
        out.w[k] = in.param(k), out.m[k] = in.m[k], out.v[k] = in.v[k];
        a.w[k] = out.w[k].data(), a.m[k] = out.m[k].data(), a.v[k] = out.v[k].data();
        a.g[k] = out.grad[k].data();
        a.off[k] = off;
        off += (int)out.w[k].size();
    }
    a.off[N_PARAMS] = off;
    a.lr_t = (float)stepbref::adam_lr_t(in.step);
    a.beta_1 = (float)stepbref::BETA_1, a.beta_2 = (float)stepbref::BETA_2;
    a.epsilon = (float)stepbref::EPSILON;
    step_head_only(p, nullptr);
    out.gh1_head = out.gh1;
    if (fill == Fill::INTEGER) std::copy(in.gh1_int.begin(), in.gh1_int.end(), out.gh1.begin()); // p.gh1 stays valid
    if (fused) {
        step_backward_adam_fused(p, a, nullptr, 1);
    } else {
        step_backward_separate(p, nullptr, 1);
        step_adam(a, nullptr);
    }

    const bool exact = fill == Fill::INTEGER;
    const dev::Errors e = stepbref::compare_backward(out, in, exact, true);
    const stepbref::BwdReference ref(in, out);
    char tag[200];
    snprintf(tag, sizeof tag, "batch %d, %s inputs, %s (largest sum of |terms| %.3g)", n, kind, how,
             ref.magnitude);
    expect(dev::passes(fill, e), std::string(tag) + ": " + describe(e));
    printf("%-90s %s  %s\n", tag, dev::passes(fill, e) ? "ok  " : "FAIL", describe(e).c_str());

    // the check fails a wrong output
    auto must_fail = [&](const std::string &what_changed, auto change) {
        stepbref::BwdOutputs bad = out;
        change(bad);
        const dev::Errors eb = stepbref::compare_backward(bad, in, exact, true);
        expect(!dev::passes(fill, eb), std::string(tag) + ": a wrong " + what_changed + " passed");
    };
    auto nudge = [&](std::vector<float> &v, size_t k, double scale, bool ex) {
        v[k] = ex ? std::nextafter(v[k], INFINITY) : v[k] + (float)(1e-3 * std::max(scale, 1e-3));
    };
    // a nonzero element of each (a masked zero's reference scale is 0)
    auto pick = [](const std::vector<double> &scale) {
        size_t best = 0;
        for (size_t k = 0; k < scale.size(); ++k)
            if (scale[k] > scale[best]) best = k;
        return best;
    };
    must_fail("gh1 (head)", [&](stepbref::BwdOutputs &b) {
        const size_t k = pick(ref.gh1s);
        nudge(b.gh1_head, k, ref.gh1s[k], false);
    });
    must_fail("g3", [&](stepbref::BwdOutputs &b) { const size_t k = pick(ref.g3s); nudge(b.g3, k, ref.g3s[k], exact); });
    must_fail("gp2", [&](stepbref::BwdOutputs &b) { const size_t k = pick(ref.gp2s); nudge(b.gp2, k, ref.gp2s[k], exact); });
    must_fail("gp1", [&](stepbref::BwdOutputs &b) { const size_t k = pick(ref.gp1s); nudge(b.gp1, k, ref.gp1s[k], exact); });
    for (int g = 0; g < N_PARAMS; ++g) {
        must_fail(stepbref::PARAM_NAMES[g], [&](stepbref::BwdOutputs &b) {
            const size_t k = pick(ref.grads[g]);
            nudge(b.grad[g], k, ref.grads[g][k], exact && g < 8);
        });
        must_fail(std::string("adam weight of ") + stepbref::PARAM_NAMES[g], [&](stepbref::BwdOutputs &b) {
            b.w[g][0] += (float)(1e-3 * ref.ws[g][0]);
        });
        must_fail(std::string("adam m of ") + stepbref::PARAM_NAMES[g], [&](stepbref::BwdOutputs &b) {
            b.m[g][0] += (float)(1e-3 * ref.ms[g][0]);
        });
        must_fail(std::string("adam v of ") + stepbref::PARAM_NAMES[g], [&](stepbref::BwdOutputs &b) {
            b.v[g][0] += (float)(1e-3 * ref.vs[g][0]);
        });
    }
    must_fail("unwritten gp1", [&](stepbref::BwdOutputs &b) { b.gp1.back() = nan; });
    must_fail("unwritten dw1", [&](stepbref::BwdOutputs &b) { b.grad[0].back() = nan; });
}

// Version 4 (the whole step: step_forward's kernels, then version 2's) on
// the forward's input, checked as step_backward.cu checks it
// (stepbref::compare_step); then the step check fails a nudged activation
// and a nudged gradient.
static void run_step(int n, Fill fill, uint64_t seed)
{
    const char *kind = fill == Fill::INTEGER ? "integer" : "uniform";
    stepbref::BwdInputs in(n, fill, seed);
    const float nan = std::nanf("");
    stepref::Outputs fo;
    fo.p1.assign((size_t)n * F1 * Q1 * Q1, nan), fo.arg1.assign(fo.p1.size(), -7);
    fo.p2.assign((size_t)n * F2 * Q2 * Q2, nan), fo.arg2.assign(fo.p2.size(), -7);
    fo.a3.assign((size_t)n * D_IN, nan), fo.h1.assign((size_t)n * D1, nan);
    fo.logits.assign((size_t)n * D2, nan), fo.probs.assign((size_t)n * D2, nan);
    fo.loss.assign(n, nan), fo.loss_sum.assign(1, nan);
    stepbref::BwdOutputs bo;
    bo.gh1.assign((size_t)n * D1, nan), bo.g3.assign((size_t)n * D_IN, nan);
    bo.gp2.assign(fo.p2.size(), nan), bo.gp1.assign(fo.p1.size(), nan);
    AdamNet a{};
    int off = 0;
    for (int k = 0; k < N_PARAMS; ++k) {
        bo.grad[k].assign(in.param(k).size(), nan);
        bo.w[k] = in.param(k), bo.m[k] = in.m[k], bo.v[k] = in.v[k];
        a.w[k] = bo.w[k].data(), a.m[k] = bo.m[k].data(), a.v[k] = bo.v[k].data(), a.g[k] = bo.grad[k].data();
        a.off[k] = off;
        off += (int)bo.w[k].size();
    }
    a.off[N_PARAMS] = off;
    a.lr_t = (float)stepbref::adam_lr_t(in.step);
    a.beta_1 = (float)stepbref::BETA_1, a.beta_2 = (float)stepbref::BETA_2;
    a.epsilon = (float)stepbref::EPSILON;
    // the weights the forward and the backward read: the step's own (Adam
    // updates them last), as on the GPU
    stepfwd::StepNet f{n, in.fw.x.data(), bo.w[0].data(), bo.w[1].data(), bo.w[2].data(), bo.w[3].data(),
                       bo.w[4].data(), bo.w[5].data(), bo.w[6].data(), bo.w[7].data(), bo.w[8].data(),
                       bo.w[9].data(), in.fw.labels.data(), fo.p1.data(), fo.arg1.data(), fo.p2.data(),
                       fo.arg2.data(), fo.a3.data(), fo.h1.data(), fo.logits.data(), fo.probs.data(),
                       fo.loss.data(), fo.loss_sum.data()};
    BwdNet p{n,
             in.fw.x.data(), fo.p1.data(), fo.arg1.data(), fo.p2.data(), fo.arg2.data(),
             fo.a3.data(), fo.h1.data(), fo.probs.data(), in.fw.labels.data(),
             bo.w[2].data(), bo.w[4].data(), bo.w[6].data(), bo.w[8].data(),
             bo.gh1.data(), bo.g3.data(), bo.gp2.data(), bo.gp1.data(),
             bo.grad[0].data(), bo.grad[1].data(), bo.grad[2].data(), bo.grad[3].data(),
             bo.grad[4].data(), bo.grad[5].data(), bo.grad[6].data(), bo.grad[7].data(),
             bo.grad[8].data(), bo.grad[9].data()};
    stepfwd::step_forward_separate(f, nullptr);
    step_backward_adam_fused(p, a, nullptr, 0);
    bo.gh1_head = bo.gh1;
    const dev::Errors e = stepbref::compare_step(fo, bo, in);
    char tag[200];
    snprintf(tag, sizeof tag, "batch %d, %s inputs, v4 (the whole step)", n, kind);
    expect(dev::passes(fill, e), std::string(tag) + ": " + describe(e));
    printf("%-90s %s  %s\n", tag, dev::passes(fill, e) ? "ok  " : "FAIL", describe(e).c_str());
    stepref::Outputs bad_f = fo;
    bad_f.a3[7] = std::nextafter(bad_f.a3[7], INFINITY) + 1e-3f * std::fabs(bad_f.a3[7]);
    expect(!dev::passes(fill, stepbref::compare_step(bad_f, bo, in)), std::string(tag) + ": a wrong a3 passed");
    stepbref::BwdOutputs bad_b = bo;
    bad_b.grad[2][5] += 1e-2f * (1.0f + std::fabs(bad_b.grad[2][5]));
    expect(!dev::passes(fill, stepbref::compare_step(fo, bad_b, in)), std::string(tag) + ": a wrong dw2 passed");
}

// step_backward_check [-x] [batches...]: -x stops after the first version
// (v1, v2 or v4 at one batch and kind of input) with a failed check -- all
// a mutant's test needs to know
int main(int argc, char **argv)
{
    std::vector<int> batches;
    bool first_failure = false;
    for (int a = 1; a < argc; ++a) {
        if (std::string(argv[a]) == "-x") first_failure = true;
        else batches.push_back(atoi(argv[a]));
    }
    if (batches.empty()) batches = {32, 1, 5, 33};
    for (int n : batches) {
        if (n < 1 || n > MAX_BATCH) {
            fprintf(stderr, "step_backward_check: batch %d outside 1..%d\n", n, MAX_BATCH);
            return 2;
        }
    }
    uint64_t seed = 900;
    for (int n : batches) {
        for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) {
            seed += 20;
            for (bool fused : {false, true}) {
                run_batch(n, f, seed, fused);
                if (first_failure && failures) goto done;
            }
            run_step(n, f, seed);
            if (first_failure && failures) goto done;
        }
    }
done:
    printf("step_backward_check: %d checks, %d failed%s\n", checks, failures,
           first_failure && failures ? " (-x: stopped at the first version that failed)" : "");
    return failures ? 1 : 0;
}
