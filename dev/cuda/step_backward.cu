// step_backward.cu: the seed CIFAR-10 CNN's training backward at batch 32
// (the loss's gradient through dense2, dense1, conv3, pool2 + conv2, pool1
// + conv1, every weight and bias gradient) and Adam on all the weights, as
// fused phases with no column matrices: issue #28's second measurement.
// The phases are step_backward_phases.cuh's; the forward is
// step_forward_phases.cuh's. Checked against step_backward_reference.h's
// float64 backward and Adam, phase by phase.
//
//   ./step_backward [VERSION] [--jsonl FILE]
//
// Versions:
//   1  the backward and Adam: 6 kernels (head, dense1, conv3, conv2, conv1,
//      Adam), a block per work item (1, 320, 512, 256, 96 and 480 blocks of
//      256 threads at batch 32), on synthetic saved tensors
//   2  the same with Adam in the phases: 5 kernels; Adam for a layer's
//      weights as extra blocks of the next phase's kernel (once the layer's
//      data gradient, which reads them, is done), conv1's in its weight items
//      (step_backward_adam_fused)
//   3  the whole training step: step_forward's 5 kernels, then version 1's
//      6, back to back on one stream, timed as one step; checked on the
//      forward's own outputs (the forward as step_forward checks it, the
//      backward and Adam from the run's saved tensors)
//   4  the whole step with version 2's backward (10 kernels)
//
// The engine's own backward is not a version here (BENCHMARKS.md gives the
// engine's step: about 140 us at batch 32 on an H100).
//
// Besides the versions' rows: version 1's six kernels and version 2's four
// phase + Adam kernels timed alone ("step_backward_phase" rows, versions 1
// and 2; each from the inputs the run before left).
#include "common.cuh"
#include "step_backward_phases.cuh"
#include "step_backward_reference.h"

using namespace dev;
using namespace stepbwd;

namespace {

// ---------------------------------------------------------------- the buffers

struct Buffers {
    int n;
    DeviceBuffer<float> x;
    DeviceBuffer<int32_t> labels;
    std::vector<std::unique_ptr<DeviceBuffer<float>>> w, g, m, v; // w1, b1, ..., w5, b5
    DeviceBuffer<float> p1;
    DeviceBuffer<int32_t> arg1;
    DeviceBuffer<float> p2;
    DeviceBuffer<int32_t> arg2;
    DeviceBuffer<float> a3, h1, logits, probs, loss, loss_sum;
    DeviceBuffer<float> gh1, g3, gp2, gp1;

    static size_t param_size(int k)
    {
        static const size_t sizes[N_PARAMS] = {(size_t)F1 * K1, F1, (size_t)F2 * K2, F2, (size_t)F3 * K3,
                                               F3, (size_t)D_IN * D1, D1, (size_t)D1 * D2, D2};
        return sizes[k];
    }

    explicit Buffers(int batch)
        : n(batch), x((size_t)n * C0 * H0 * H0), labels(n), p1((size_t)n * F1 * Q1 * Q1), arg1(p1.n),
          p2((size_t)n * F2 * Q2 * Q2), arg2(p2.n), a3((size_t)n * D_IN), h1((size_t)n * D1),
          logits((size_t)n * D2), probs((size_t)n * D2), loss(n), loss_sum(1), gh1((size_t)n * D1),
          g3((size_t)n * D_IN), gp2(p2.n), gp1(p1.n)
    {
        for (int k = 0; k < N_PARAMS; ++k)
            for (auto *list : {&w, &g, &m, &v}) list->emplace_back(new DeviceBuffer<float>(param_size(k)));
    }

    StepNet fwd() const
    {
        return {n,       x.p,      w[0]->p,  w[1]->p, w[2]->p, w[3]->p, w[4]->p, w[5]->p,
                w[6]->p, w[7]->p,  w[8]->p,  w[9]->p, labels.p, p1.p,   arg1.p,  p2.p,
                arg2.p,  a3.p,     h1.p,     logits.p, probs.p, loss.p,  loss_sum.p};
    }
    BwdNet bwd() const
    {
        return {n,       x.p,     p1.p,    arg1.p,  p2.p,    arg2.p,  a3.p,    h1.p,   probs.p,
                labels.p, w[2]->p, w[4]->p, w[6]->p, w[8]->p, gh1.p,  g3.p,    gp2.p,  gp1.p,
                g[0]->p, g[1]->p, g[2]->p, g[3]->p, g[4]->p, g[5]->p, g[6]->p, g[7]->p, g[8]->p, g[9]->p};
    }
    AdamNet adam(int step) const
    {
        AdamNet a{};
        int off = 0;
        for (int k = 0; k < N_PARAMS; ++k) {
            a.w[k] = w[k]->p, a.m[k] = m[k]->p, a.v[k] = v[k]->p, a.g[k] = g[k]->p;
            a.off[k] = off;
            off += (int)param_size(k);
        }
        a.off[N_PARAMS] = off;
        a.lr_t = (float)stepbref::adam_lr_t(step);
        a.beta_1 = (float)stepbref::BETA_1, a.beta_2 = (float)stepbref::BETA_2;
        a.epsilon = (float)stepbref::EPSILON;
        return a;
    }

    // every output NaN: every output must be written
    void fill_outputs_nan()
    {
        p1.fill_nan(), arg1.fill_nan(), p2.fill_nan(), arg2.fill_nan(), a3.fill_nan(), h1.fill_nan();
        logits.fill_nan(), probs.fill_nan(), loss.fill_nan(), loss_sum.fill_nan();
        gh1.fill_nan(), g3.fill_nan(), gp2.fill_nan(), gp1.fill_nan();
        for (auto &b : g) b->fill_nan();
    }
    void upload_weights_and_adam(const stepbref::BwdInputs &in)
    {
        for (int k = 0; k < N_PARAMS; ++k) w[k]->upload(in.param(k)), m[k]->upload(in.m[k]), v[k]->upload(in.v[k]);
        labels.upload(in.fw.labels);
    }
    // version 1's inputs: the synthetic saved tensors
    void upload_backward_inputs(const stepbref::BwdInputs &in)
    {
        upload_weights_and_adam(in);
        x.upload(in.x), p1.upload(in.p1), arg1.upload(in.arg1), p2.upload(in.p2), arg2.upload(in.arg2);
        a3.upload(in.a3), h1.upload(in.h1), probs.upload(in.probs);
    }
    // version 2's: the forward's input
    void upload_step_inputs(const stepbref::BwdInputs &in)
    {
        upload_weights_and_adam(in);
        x.upload(in.fw.x);
    }
    stepbref::BwdOutputs download_backward() const
    {
        stepbref::BwdOutputs o;
        o.gh1 = o.gh1_head = gh1.download();
        o.g3 = g3.download(), o.gp2 = gp2.download(), o.gp1 = gp1.download();
        for (int k = 0; k < N_PARAMS; ++k)
            o.grad[k] = g[k]->download(), o.w[k] = w[k]->download(), o.m[k] = m[k]->download(),
            o.v[k] = v[k]->download();
        return o;
    }
};

// ---------------------------------------------------------------- the versions

// The backward and Adam (fused: version 2's kernels) from the head (from =
// 0) or after it (1).
void launch_backward(Buffers &b, Engine &e, int step, bool fused, int from)
{
    if (fused) {
        step_backward_adam_fused(b.bwd(), b.adam(step), e.stream(), from);
    } else {
        step_backward_separate(b.bwd(), e.stream(), from);
        step_adam(b.adam(step), e.stream());
    }
}

// version vi (from 0): 0 and 1 the backward, 2 and 3 the whole step
bool run_version(size_t vi, Buffers &b, Engine &e, int step)
{
    if (vi >= 2) stepfwd::step_forward_separate(b.fwd(), e.stream());
    launch_backward(b, e, step, vi % 2 == 1, 0);
    return launched(vi >= 2 ? "the step's kernels" : "the backward's kernels");
}

const char *const VERSION_NAMES[] = {
    "backward + Adam: 6 kernels (head, dense1, conv3, conv2, conv1, Adam), a block per item",
    "backward with Adam in the phases: 5 kernels",
    "the whole step: forward 5 kernels + backward 5 + Adam, back to back",
    "the whole step: forward 5 kernels + backward with Adam in the phases 5",
};
constexpr int N_VERSIONS = 4;

struct Case {
    int n;
    Fill fill;
    stepbref::BwdInputs in;
    Buffers gpu;
    Case(int batch, Fill f, uint64_t seed) : n(batch), fill(f), in(batch, f, seed), gpu(batch) {}
};

std::string describe(const Case &c)
{
    return "batch " + std::to_string(c.n) + " (seed CNN, 122.6k weights)";
}

// Versions 1 and 2: the head, then (integer inputs) the check's integer
// gh1, then the other phases and Adam; per phase against the float64
// reference.
Errors check_backward(Case &c, Engine &eng, bool fused)
{
    Buffers &b = c.gpu;
    b.fill_outputs_nan();
    b.upload_backward_inputs(c.in);
    Errors e;
    cudaStream_t st = eng.stream();
    step_head_only(b.bwd(), st);
    if (!launched("head")) return e.bad_at = 0, e;
    CUDA_CHECK(cudaStreamSynchronize(st));
    const std::vector<float> gh1_head = b.gh1.download();
    if (c.fill == Fill::INTEGER) b.gh1.upload(c.in.gh1_int);
    launch_backward(b, eng, c.in.step, fused, 1);
    if (!launched("dense1 .. conv1, Adam")) return e.bad_at = 0, e;
    CUDA_CHECK(cudaStreamSynchronize(st));
    stepbref::BwdOutputs out = b.download_backward();
    out.gh1_head = gh1_head;
    return stepbref::compare_backward(out, c.in, c.fill == Fill::INTEGER, true);
}

// Versions 3 and 4: the whole step on the forward's input
// (stepbref::compare_step says how it is checked).
Errors check_step(size_t vi, Case &c, Engine &eng)
{
    Buffers &b = c.gpu;
    b.fill_outputs_nan();
    b.upload_step_inputs(c.in);
    Errors e;
    if (!run_version(vi, b, eng, c.in.step)) return e.bad_at = 0, e;
    CUDA_CHECK(cudaStreamSynchronize(eng.stream()));
    stepref::Outputs fo;
    fo.p1 = b.p1.download(), fo.p2 = b.p2.download(), fo.a3 = b.a3.download(), fo.h1 = b.h1.download();
    fo.logits = b.logits.download(), fo.arg1 = b.arg1.download(), fo.arg2 = b.arg2.download();
    fo.probs = b.probs.download(), fo.loss = b.loss.download(), fo.loss_sum = b.loss_sum.download();
    return stepbref::compare_step(fo, b.download_backward(), c.in);
}

Errors check(size_t vi, Case &c, Engine &eng)
{
    return vi < 2 ? check_backward(c, eng, vi == 1) : check_step(vi, c, eng);
}

double time_version(size_t vi, Case &c, Engine &eng)
{
    if (vi < 2) c.gpu.upload_backward_inputs(c.in);
    else c.gpu.upload_step_inputs(c.in);
    return time_median_ms(eng.stream(), [&] { return run_version(vi, c.gpu, eng, c.in.step); });
}

// ---------------------------------------------------------------- the extra rows

const char *const PHASES[] = {"head: softmax+CE grad, dense2 dW/db/dx, ReLU mask",
                              "dense1: dW/db/dx, ReLU mask",
                              "conv3: dW/db + dx through pool2's argmax, ReLU mask",
                              "conv2: dW/db (at pool2's argmax) + dx through pool1's argmax, ReLU mask",
                              "conv1: dW/db (at pool1's argmax)", "Adam over all 122.6k weights"};

void time_phases_v1(Report &rep, Case &c, Engine &eng)
{
    c.gpu.upload_backward_inputs(c.in);
    const BwdNet p = c.gpu.bwd();
    const AdamNet a = c.gpu.adam(c.in.step);
    cudaStream_t st = eng.stream();
    for (int ph = 0; ph < 6; ++ph) {
        const double ms = time_median_ms(st, [&] {
            switch (ph) {
            case 0: bwd_head_kernel<<<items_bhead(p.n), STEP_THREADS, 0, st>>>(p); break;
            case 1: bwd_dense1_kernel<<<items_bdense1(p.n), STEP_THREADS, 0, st>>>(p); break;
            case 2: bwd_conv3_kernel<<<items_bconv3(p.n), STEP_THREADS, 0, st>>>(p); break;
            case 3: bwd_conv2_kernel<<<items_bconv2(p.n), STEP_THREADS, 0, st>>>(p); break;
            case 4: bwd_conv1_kernel<<<items_bconv1(p.n), STEP_THREADS, 0, st>>>(p); break;
            default: adam_kernel<<<adam_blocks(a), STEP_THREADS, 0, st>>>(a); break;
            }
            return launched(PHASES[ph]);
        });
        rep.row({"step_backward_phase", 1, VERSION_NAMES[0], std::string(PHASES[ph]) + ", " + describe(c), ms,
                 0.0, ms > 0});
    }
}

// Version 2's kernels alone: the head (as version 1's) and the four phases
// with their Adam blocks.
void time_phases_v2(Report &rep, Case &c, Engine &eng)
{
    c.gpu.upload_backward_inputs(c.in);
    const BwdNet p = c.gpu.bwd();
    const AdamNet a = c.gpu.adam(c.in.step);
    cudaStream_t st = eng.stream();
    const char *const names[] = {"dense1 + Adam on w5, b5", "conv3 + Adam on w4, b4", "conv2 + Adam on w3, b3",
                                 "conv1 + Adam on w1, b1 (in its items), w2, b2"};
    for (int ph = 0; ph < 4; ++ph) {
        const double ms = time_median_ms(st, [&] {
            switch (ph) {
            case 0:
                bwd_phase_adam_kernel<PH_DENSE1>
                    <<<items_bdense1(p.n) + adam_range_blocks(a, 8, 10), STEP_THREADS, 0, st>>>(p, a, 8, 10);
                break;
            case 1:
                bwd_phase_adam_kernel<PH_CONV3>
                    <<<items_bconv3(p.n) + adam_range_blocks(a, 6, 8), STEP_THREADS, 0, st>>>(p, a, 6, 8);
                break;
            case 2:
                bwd_phase_adam_kernel<PH_CONV2>
                    <<<items_bconv2(p.n) + adam_range_blocks(a, 4, 6), STEP_THREADS, 0, st>>>(p, a, 4, 6);
                break;
            default:
                bwd_phase_adam_kernel<PH_CONV1>
                    <<<items_bconv1(p.n) + adam_range_blocks(a, 2, 4), STEP_THREADS, 0, st>>>(p, a, 2, 4);
                break;
            }
            return launched(names[ph]);
        });
        rep.row({"step_backward_phase", 2, VERSION_NAMES[1], std::string(names[ph]) + ", " + describe(c), ms, 0.0,
                 ms > 0});
    }
}

} // namespace

int main(int argc, char **argv)
{
    const Options opt = parse_args(argc, argv, N_VERSIONS);
    Engine eng;
    Report rep("step_backward", opt);
    Cases<Case> cases;
    uint64_t seed = 1700;
    for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.seed.emplace_back(new Case(32, f, seed += 20));
    for (int n : {1, 5, 33})
        for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.odd.emplace_back(new Case(n, f, seed += 20));
    std::vector<std::string> names(VERSION_NAMES, VERSION_NAMES + N_VERSIONS);
    Case &timed = *cases.seed[1];
    return run_versions(
        rep, opt, names, cases, [&](size_t vi, Case &c) { return check(vi, c, eng); },
        [&](size_t vi, Case &c) { return time_version(vi, c, eng); }, describe, {},
        [&](size_t vi) {
            if (vi == 0) time_phases_v1(rep, timed, eng);
            if (vi == 1) time_phases_v2(rep, timed, eng);
        });
}
