// step_forward.cu: the seed CIFAR-10 CNN's training forward at batch 32
// (conv1+ReLU+pool, conv2+ReLU+pool, conv3+ReLU, dense1+ReLU, dense2 +
// softmax + sparse cross-entropy; NCHW), as separate kernels and as one
// resident kernel: issue #28's first measurement. The phases are
// step_forward_phases.cuh's block-wide functions of one work item; every
// version is checked against step_forward_reference.h's float64 forward,
// phase by phase.
//
//   ./step_forward [VERSION] [--jsonl FILE]
//
// Versions:
//   1  a kernel per phase (5 launches), a block per work item (256, 256,
//      256, 128 and 1 blocks of 256 threads at batch 32)
//   2  the same phase functions in one persistent kernel: the grid is the
//      co-resident maximum (cudaOccupancyMaxActiveBlocksPerMultiprocessor x
//      SMs) launched with cudaLaunchCooperativeKernel; each block loops over
//      a phase's items; cooperative_groups grid.sync() between phases
//   3  as 2 with a barrier of our own (an atomic counter and a generation
//      word; the spin is bounded: after 1 s it gives up, says so, and the
//      version fails)
//   4  the engine through the logits: cuda_conv2d_forward_relu and
//      cuda_pool_forward (conv1, conv2), cuda_conv2d_forward_relu (conv3),
//      cuda_dense_forward_relu and cuda_dense_forward (im2col + split-K
//      SGEMMs); the engine's softmax and loss are fused with the backward
//      in its dense head, so they are not in this version
//
// Besides the versions' rows: version 1's five kernels timed alone
// ("step_forward_phase" rows), versions 2 and 3's phases as block 0 sees
// them (globaltimer stamps after each barrier, medians of 20 runs), and the
// barriers alone ("grid_barrier" rows: a cooperative kernel of the step's
// grid doing 0 and K = 1000 barriers; per barrier = the difference / K).
#include <cooperative_groups.h>

#include "common.cuh"
#include "step_forward_phases.cuh"
#include "step_forward_reference.h"

namespace cg = cooperative_groups;
using namespace dev;
using namespace stepfwd;

namespace {

// ---------------------------------------------------------------- the barriers

// Version 3's barrier: count (blocks arrived), gen (barriers completed),
// timed_out (set by a block that waited over BARRIER_LIMIT_NS; the others
// then stop waiting too). Zero at the start; each barrier leaves count 0.
struct GridBarrier {
    unsigned count, gen, timed_out;
};
constexpr unsigned long long BARRIER_LIMIT_NS = 1000000000ull; // 1 s

__device__ inline unsigned long long global_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Thread 0 of each block: reads the generation, makes the block's writes
// visible (the block's threads reached the __syncthreads before, and the
// fence is cumulative), arrives; the last to arrive resets the count and
// opens the next generation; the others wait for it (bounded).
__device__ inline void atomic_grid_sync(GridBarrier *b)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        volatile unsigned *gen = &b->gen, *timed_out = &b->timed_out;
        const unsigned g = *gen;
        __threadfence();
        const unsigned arrived = atomicAdd(&b->count, 1u);
        if (arrived == gridDim.x - 1) {
            atomicExch(&b->count, 0u);
            __threadfence();
            atomicAdd(&b->gen, 1u);
        } else {
            const unsigned long long start = global_ns();
            while (*gen == g) {
                if (*timed_out) break;
                if (global_ns() - start > BARRIER_LIMIT_NS) {
                    atomicExch(&b->timed_out, 1u);
                    break;
                }
            }
        }
        __threadfence();
    }
    __syncthreads();
}

template <int MODE> // 0: cooperative groups' grid.sync(); 1: atomic_grid_sync
__device__ inline void grid_barrier(GridBarrier *b)
{
    if (MODE == 0)
        cg::this_grid().sync();
    else
        atomic_grid_sync(b);
}

// ---------------------------------------------------------------- versions 2 and 3

// The whole forward in one launch: each phase's items over the grid's
// blocks, a barrier between phases; block 0 does the head (one item).
// stamps (NULL: none): block 0's globaltimer at the start and after each
// barrier and at the end (6 values).
// At most 64 registers a thread (4 blocks of 256 an SM, as shared memory
// allows): versions 2 and 3 then run on the same grid (grid.sync() alone
// took 67 registers, 3 blocks an SM).
constexpr int PERSISTENT_BLOCKS_PER_SM = 4;

template <int MODE>
__global__ void __launch_bounds__(STEP_THREADS, PERSISTENT_BLOCKS_PER_SM)
step_persistent_kernel(StepNet p, GridBarrier *bar, unsigned long long *stamps)
{
    __shared__ float4 sm4[(SMEM_MAX + 3) / 4];
    float *sm = reinterpret_cast<float *>(sm4);
    const bool stamp = stamps && blockIdx.x == 0 && threadIdx.x == 0;
    if (stamp) stamps[0] = global_ns();
    for (int it = blockIdx.x; it < items_conv1(p.n); it += gridDim.x) phase_conv1(p, it, sm);
    grid_barrier<MODE>(bar);
    if (stamp) stamps[1] = global_ns();
    for (int it = blockIdx.x; it < items_conv2(p.n); it += gridDim.x) phase_conv2(p, it, sm);
    grid_barrier<MODE>(bar);
    if (stamp) stamps[2] = global_ns();
    for (int it = blockIdx.x; it < items_conv3(p.n); it += gridDim.x) phase_conv3(p, it, sm);
    grid_barrier<MODE>(bar);
    if (stamp) stamps[3] = global_ns();
    for (int it = blockIdx.x; it < items_dense1(p.n); it += gridDim.x) phase_dense1(p, it, sm);
    grid_barrier<MODE>(bar);
    if (stamp) stamps[4] = global_ns();
    for (int it = blockIdx.x; it < items_head(p.n); it += gridDim.x) phase_head(p, it, sm);
    if (stamp) stamps[5] = global_ns();
}

// K barriers and nothing else, on the step's grid.
template <int MODE>
__global__ void __launch_bounds__(STEP_THREADS) barrier_kernel(int k, GridBarrier *bar)
{
    for (int i = 0; i < k; ++i) grid_barrier<MODE>(bar);
}

// A cooperative kernel's grid: the co-resident maximum, or 0 with why.
struct Grid {
    int blocks = 0, per_sm = 0, sms = 0;
    std::string why; // not empty: it cannot run
};

Grid coresident_grid(const void *kernel)
{
    Grid g;
    int dev = 0, coop = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&g.sms, cudaDevAttrMultiProcessorCount, dev));
    if (!coop) {
        g.why = "the device cannot launch cooperative kernels";
        return g;
    }
    // all of the unified L1 as shared memory where the blocks need it (4 x 45 KB)
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    (int)cudaSharedmemCarveoutMaxShared));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&g.per_sm, kernel, STEP_THREADS, 0));
    if (g.per_sm < 1) {
        g.why = "no block of the persistent kernel fits an SM (occupancy 0)";
        return g;
    }
    g.blocks = g.per_sm * g.sms;
    return g;
}

// A cooperative launch; false (said) when it fails, e.g. a grid that cannot
// be co-resident (cudaErrorCooperativeLaunchTooLarge), which is not sticky.
bool launch_cooperative(const void *kernel, int blocks, void **args, cudaStream_t st, const char *what)
{
    const cudaError_t e = cudaLaunchCooperativeKernel(kernel, dim3(blocks), dim3(STEP_THREADS), args, 0, st);
    if (e == cudaSuccess) return true;
    cudaGetLastError();
    fprintf(stderr, "%s: cooperative launch of %d blocks of %d threads failed: %s (%s)\n", what, blocks,
            STEP_THREADS, cudaGetErrorString(e), cudaGetErrorName(e));
    return false;
}

// ---------------------------------------------------------------- the buffers

struct Buffers {
    int n;
    DeviceBuffer<float> x, w1, b1, w2, b2, w3, b3, w4, b4, w5, b5;
    DeviceBuffer<int32_t> labels;
    DeviceBuffer<float> p1;
    DeviceBuffer<int32_t> arg1;
    DeviceBuffer<float> p2;
    DeviceBuffer<int32_t> arg2;
    DeviceBuffer<float> a3, h1, logits, probs, loss, loss_sum;
    // the engine's (version 4): the convolutions' outputs before their
    // pools, its argmax, the convolutions' workspace (their column matrices)
    DeviceBuffer<float> c1, c2;
    DeviceBuffer<int32_t> e_arg1, e_arg2;
    DeviceBuffer<float> ws;
    DeviceBuffer<GridBarrier> bar;
    DeviceBuffer<unsigned long long> stamps;

    static cnn_conv_desc conv_desc(int n, int layer)
    {
        if (layer == 1) return {n, C0, H0, H0, F1, 3, 3, 1, 1, 0, 0, H1, H1};
        if (layer == 2) return {n, F1, Q1, Q1, F2, 3, 3, 1, 1, 0, 0, H2, H2};
        return {n, F2, Q2, Q2, F3, 3, 3, 1, 1, 0, 0, H3, H3};
    }
    static size_t workspace_floats(int n)
    {
        size_t most = 0;
        for (int layer = 1; layer <= 3; ++layer) {
            const cnn_conv_desc d = conv_desc(n, layer);
            most = std::max(most, cuda_conv2d_workspace(&d));
        }
        return most / sizeof(float) + 1;
    }

    explicit Buffers(int batch)
        : n(batch), x((size_t)n * C0 * H0 * H0), w1((size_t)F1 * K1), b1(F1), w2((size_t)F2 * K2),
          b2(F2), w3((size_t)F3 * K3), b3(F3), w4((size_t)D_IN * D1), b4(D1), w5((size_t)D1 * D2),
          b5(D2), labels(n), p1((size_t)n * F1 * Q1 * Q1), arg1(p1.n), p2((size_t)n * F2 * Q2 * Q2),
          arg2(p2.n), a3((size_t)n * D_IN), h1((size_t)n * D1), logits((size_t)n * D2),
          probs((size_t)n * D2), loss(n), loss_sum(1), c1((size_t)n * F1 * H1 * H1),
          c2((size_t)n * F2 * H2 * H2), e_arg1(p1.n), e_arg2(p2.n), ws(workspace_floats(batch)), bar(1),
          stamps(8)
    {
        CUDA_CHECK(cudaMemset(bar.p, 0, sizeof(GridBarrier)));
        CUDA_CHECK(cudaDeviceSynchronize());
    }

    StepNet net() const
    {
        return {n,      x.p,      w1.p,   b1.p,     w2.p,    b2.p,    w3.p,     b3.p,
                w4.p,   b4.p,     w5.p,   b5.p,     labels.p, p1.p,   arg1.p,   p2.p,
                arg2.p, a3.p,     h1.p,   logits.p, probs.p, loss.p,  loss_sum.p};
    }

    void fill_outputs_nan()
    {
        p1.fill_nan(), arg1.fill_nan(), p2.fill_nan(), arg2.fill_nan(), a3.fill_nan(), h1.fill_nan();
        logits.fill_nan(), probs.fill_nan(), loss.fill_nan(), loss_sum.fill_nan();
    }

    // version 3's barrier: whether it timed out since the last call (then
    // said, and the barrier reset)
    bool barrier_timed_out(const char *what)
    {
        GridBarrier b;
        CUDA_CHECK(cudaMemcpy(&b, bar.p, sizeof b, cudaMemcpyDeviceToHost));
        if (!b.timed_out) return false;
        fprintf(stderr, "%s: a block waited over %.1f s at the atomic barrier (count %u): gave up\n", what,
                BARRIER_LIMIT_NS * 1e-9, b.count);
        CUDA_CHECK(cudaMemset(bar.p, 0, sizeof(GridBarrier)));
        CUDA_CHECK(cudaDeviceSynchronize());
        return true;
    }
};

// ---------------------------------------------------------------- the versions

Grid grid_v2, grid_v3; // set in main

bool run_v1(Buffers &m, Engine &e)
{
    step_forward_separate(m.net(), e.stream());
    return launched("v1: the phase kernels");
}

template <int MODE>
bool run_persistent_stamped(Buffers &m, Engine &e, unsigned long long *stamps)
{
    const Grid &g = MODE == 0 ? grid_v2 : grid_v3;
    if (!g.why.empty()) {
        fprintf(stderr, "v%d: %s\n", MODE + 2, g.why.c_str());
        return false;
    }
    StepNet net = m.net();
    GridBarrier *bar = m.bar.p;
    void *args[] = {&net, &bar, &stamps};
    return launch_cooperative((const void *)step_persistent_kernel<MODE>, g.blocks, args, e.stream(),
                              MODE == 0 ? "v2" : "v3");
}

template <int MODE>
bool run_persistent(Buffers &m, Engine &e)
{
    return run_persistent_stamped<MODE>(m, e, nullptr);
}

bool run_engine(Buffers &m, Engine &e)
{
    const int n = m.n;
    const cnn_conv_desc d1 = Buffers::conv_desc(n, 1), d2 = Buffers::conv_desc(n, 2),
                        d3 = Buffers::conv_desc(n, 3);
    const cnn_pool_desc q1 = {CNN_POOL_MAX, n, F1, H1, H1, 2, 2, 2, 2, 0, 0, Q1, Q1},
                        q2 = {CNN_POOL_MAX, n, F2, H2, H2, 2, 2, 2, 2, 0, 0, Q2, Q2};
    return engine_ok(cuda_conv2d_forward_relu(e.ctx, &d1, m.x.p, m.w1.p, m.b1.p, m.c1.p, m.ws.p), "conv1") &&
           engine_ok(cuda_pool_forward(e.ctx, &q1, m.c1.p, m.p1.p, m.e_arg1.p), "pool1") &&
           engine_ok(cuda_conv2d_forward_relu(e.ctx, &d2, m.p1.p, m.w2.p, m.b2.p, m.c2.p, m.ws.p), "conv2") &&
           engine_ok(cuda_pool_forward(e.ctx, &q2, m.c2.p, m.p2.p, m.e_arg2.p), "pool2") &&
           engine_ok(cuda_conv2d_forward_relu(e.ctx, &d3, m.p2.p, m.w3.p, m.b3.p, m.a3.p, m.ws.p), "conv3") &&
           engine_ok(cuda_dense_forward_relu(e.ctx, n, D_IN, D1, m.a3.p, m.w4.p, m.b4.p, m.h1.p), "dense1") &&
           engine_ok(cuda_dense_forward(e.ctx, n, D1, D2, m.h1.p, m.w5.p, m.b5.p, m.logits.p), "dense2");
}

struct Version {
    const char *name;
    bool (*run)(Buffers &, Engine &);
    unsigned what; // stepref::WITH_*: what it computes besides activations and logits
};

const unsigned ALL = stepref::WITH_ARGMAX | stepref::WITH_HEAD;
const Version VERSIONS[] = {
    {"a kernel per phase (5 launches), a block per work item", run_v1, ALL},
    {"one persistent cooperative kernel, grid.sync() between phases", run_persistent<0>, ALL},
    {"one persistent cooperative kernel, atomic-counter barrier between phases", run_persistent<1>, ALL},
    {"engine: conv2d_forward_relu + pool_forward, dense_forward (to the logits)", run_engine, 0},
};
constexpr int N_VERSIONS = sizeof VERSIONS / sizeof VERSIONS[0];

// One batch with one kind of input (the check computes its float64
// reference per phase from the run: stepref::compare).
struct Case {
    int n;
    Fill fill;
    stepref::Inputs in;
    Buffers gpu;

    Case(int batch, Fill f, uint64_t seed) : n(batch), fill(f), in(batch, f, seed), gpu(batch)
    {
        gpu.x.upload(in.x);
        gpu.w1.upload(in.w1), gpu.b1.upload(in.b1), gpu.w2.upload(in.w2), gpu.b2.upload(in.b2);
        gpu.w3.upload(in.w3), gpu.b3.upload(in.b3), gpu.w4.upload(in.w4), gpu.b4.upload(in.b4);
        gpu.w5.upload(in.w5), gpu.b5.upload(in.b5);
        gpu.labels.upload(in.labels);
    }
};

std::string describe(const Case &c)
{
    return "batch " + std::to_string(c.n) + " x(" + std::to_string(c.n) + ",3,32,32) -> logits (" +
           std::to_string(c.n) + ",10)";
}

Errors check(size_t vi, Case &c, Engine &eng)
{
    const Version &v = VERSIONS[vi];
    c.gpu.fill_outputs_nan(); // every output must be written
    Errors e;
    if (!v.run(c.gpu, eng)) {
        e.bad_at = 0;
        return e;
    }
    CUDA_CHECK(cudaStreamSynchronize(eng.stream()));
    if (c.gpu.barrier_timed_out(v.name)) {
        e.bad_at = 0;
        e.failure = "the atomic barrier timed out";
        return e;
    }
    stepref::Outputs out;
    out.p1 = c.gpu.p1.download(), out.p2 = c.gpu.p2.download(), out.a3 = c.gpu.a3.download();
    out.h1 = c.gpu.h1.download(), out.logits = c.gpu.logits.download();
    if (v.what & stepref::WITH_ARGMAX) out.arg1 = c.gpu.arg1.download(), out.arg2 = c.gpu.arg2.download();
    if (v.what & stepref::WITH_HEAD)
        out.probs = c.gpu.probs.download(), out.loss = c.gpu.loss.download(),
        out.loss_sum = c.gpu.loss_sum.download();
    return stepref::compare(out, c.in, v.what);
}

double time_version(size_t vi, Case &c, Engine &eng)
{
    const double ms = time_median_ms(eng.stream(), [&] { return VERSIONS[vi].run(c.gpu, eng); });
    if (c.gpu.barrier_timed_out(VERSIONS[vi].name)) return -1.0;
    return ms;
}

// ---------------------------------------------------------------- the extra rows

const char *const PHASES[] = {"conv1+ReLU+pool", "conv2+ReLU+pool", "conv3+ReLU", "dense1+ReLU",
                              "dense2+softmax+loss"};

// Version 1's kernels, each timed alone (its inputs from the run before).
void time_phases_v1(Report &rep, Case &c, Engine &eng)
{
    const StepNet p = c.gpu.net();
    cudaStream_t st = eng.stream();
    for (int ph = 0; ph < 5; ++ph) {
        const double ms = time_median_ms(st, [&] {
            switch (ph) {
            case 0: step_conv1_kernel<<<items_conv1(p.n), STEP_THREADS, 0, st>>>(p); break;
            case 1: step_conv2_kernel<<<items_conv2(p.n), STEP_THREADS, 0, st>>>(p); break;
            case 2: step_conv3_kernel<<<items_conv3(p.n), STEP_THREADS, 0, st>>>(p); break;
            case 3: step_dense1_kernel<<<items_dense1(p.n), STEP_THREADS, 0, st>>>(p); break;
            default: step_head_kernel<<<items_head(p.n), STEP_THREADS, 0, st>>>(p); break;
            }
            return launched(PHASES[ph]);
        });
        rep.row({"step_forward_phase", 1, VERSIONS[0].name, std::string(PHASES[ph]) + ", " + describe(c), ms,
                 0.0, ms > 0});
    }
}

// Versions 2 and 3: block 0's time from one stamp to the next (a phase and
// the barrier after it; the first from block 0's start, so without the
// launch), the medians of REPEATS runs.
template <int MODE>
void time_phases_persistent(Report &rep, Case &c, Engine &eng)
{
    std::vector<std::vector<double>> us(5);
    bool ok = true;
    for (int r = 0; r < WARMUP + REPEATS && ok; ++r) {
        ok = run_persistent_stamped<MODE>(c.gpu, eng, c.gpu.stamps.p);
        CUDA_CHECK(cudaStreamSynchronize(eng.stream()));
        const std::vector<unsigned long long> s = c.gpu.stamps.download();
        if (r >= WARMUP)
            for (int ph = 0; ph < 5; ++ph) us[ph].push_back((double)(s[ph + 1] - s[ph]) * 1e-3);
    }
    ok = !c.gpu.barrier_timed_out("phase stamps") && ok;
    for (int ph = 0; ph < 5; ++ph) {
        double med = -1.0;
        if (ok) {
            std::nth_element(us[ph].begin(), us[ph].begin() + REPEATS / 2, us[ph].end());
            med = us[ph][REPEATS / 2] * 1e-3; // ms
        }
        const std::string what = std::string(PHASES[ph]) + (ph < 4 ? " + barrier" : "") +
                                 " (block 0's globaltimer), " + describe(c);
        if (ok && med <= 0.0) { // a timer coarser than the phase: said, no row
            printf("  v%d %s: 0 ns between stamps (the globaltimer is coarser than this phase)\n", MODE + 2,
                   what.c_str());
            continue;
        }
        rep.row({"step_forward_phase", MODE + 2, VERSIONS[MODE + 1].name, what, med, 0.0, ok && med > 0});
    }
}

// The barrier alone: a cooperative kernel on the step kernel's grid doing
// 0 and K barriers; rows: the launch with 0, and per barrier.
template <int MODE>
void time_barrier(Report &rep, Buffers &m, Engine &eng)
{
    const Grid &g = MODE == 0 ? grid_v2 : grid_v3;
    const char *name = MODE == 0 ? "cooperative_groups grid.sync()" : "atomic counter + generation (bounded spin)";
    if (!g.why.empty()) {
        rep.row({"grid_barrier", MODE + 1, name, "per barrier: " + g.why, -1.0, 0.0, false});
        return;
    }
    constexpr int K = 1000;
    double ms[2];
    for (int pass = 0; pass < 2; ++pass) {
        int k = pass ? K : 0;
        GridBarrier *bar = m.bar.p;
        void *args[] = {&k, &bar};
        ms[pass] = time_median_ms(eng.stream(), [&] {
            return launch_cooperative((const void *)barrier_kernel<MODE>, g.blocks, args, eng.stream(),
                                      "barrier");
        });
    }
    const bool ok = !m.barrier_timed_out(name) && ms[0] > 0 && ms[1] > 0;
    char grid[120];
    snprintf(grid, sizeof grid, "grid %d x %d threads (%d per SM)", g.blocks, STEP_THREADS, g.per_sm);
    rep.row({"grid_barrier", MODE + 1, name, std::string("launch with 0 barriers, ") + grid, ms[0], 0.0, ok});
    rep.row({"grid_barrier", MODE + 1, name, "per barrier (" + std::to_string(K) + " in one launch), " + grid,
             ok ? (ms[1] - ms[0]) / K : -1.0, 0.0, ok && ms[1] > ms[0]});
}

} // namespace

int main(int argc, char **argv)
{
    const Options opt = parse_args(argc, argv, N_VERSIONS);
    Engine eng;
    Report rep("step_forward", opt);
    grid_v2 = coresident_grid((const void *)step_persistent_kernel<0>);
    grid_v3 = coresident_grid((const void *)step_persistent_kernel<1>);
    for (const Grid *g : {&grid_v2, &grid_v3})
        if (g->why.empty())
            printf("  persistent kernel v%d: %d blocks per SM x %d SMs = %d blocks of %d threads\n",
                   g == &grid_v2 ? 2 : 3, g->per_sm, g->sms, g->blocks, STEP_THREADS);
        else
            printf("  persistent kernel v%d: cannot run: %s\n", g == &grid_v2 ? 2 : 3, g->why.c_str());
    Cases<Case> cases;
    uint64_t seed = 700;
    for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.seed.emplace_back(new Case(32, f, seed += 20));
    // odd batches: 1, 5, 33, and 100 (800 items: more than a grid of up to
    // 3 blocks per SM, so the persistent kernel's blocks loop)
    for (int n : {1, 5, 33, 100})
        for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.odd.emplace_back(new Case(n, f, seed += 20));
    std::vector<std::string> names, skip(N_VERSIONS);
    for (const Version &v : VERSIONS) names.push_back(v.name);
    // a GPU without cooperative launches cannot run 2 and 3 (said, not failed)
    if (grid_v2.why == "the device cannot launch cooperative kernels") skip[1] = skip[2] = grid_v2.why;
    Case &timed = *cases.seed[1];
    return run_versions(
        rep, opt, names, cases, [&](size_t vi, Case &c) { return check(vi, c, eng); },
        [&](size_t vi, Case &c) { return time_version(vi, c, eng); }, describe, skip,
        [&](size_t vi) {
            if (vi == 0) time_phases_v1(rep, timed, eng);
            if (vi == 1) {
                time_phases_persistent<0>(rep, timed, eng);
                time_barrier<0>(rep, timed.gpu, eng);
            }
            if (vi == 2) {
                time_phases_persistent<1>(rep, timed, eng);
                time_barrier<1>(rep, timed.gpu, eng);
            }
        });
}
