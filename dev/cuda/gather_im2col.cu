// gather_im2col.cu: the start of a training step on resident data when the
// network's first layer is a convolution, checked against a CPU reference
// and timed at the seed networks' first convolutions at batch 32 (CIFAR-10
// CNN conv1, LeNet-5 conv1, tiny MNIST conv1), each over 1000 resident
// images with a shuffled order, the batch at a nonzero position:
//   idx = order + counters[POSITION]      read on the device
//   t row i = src_t row idx[i]            labels or targets (0 for idx < 0)
//   counters: MASK = FORWARDS++, STEPS += 1, POSITION += rows
//   col (K, NP) = im2col(images idx[0..n)) the first convolution's column
//                                         matrix, in its workspace: row
//                                         (ch*kh + ki)*kw + kj, column i*P +
//                                         r*ow + s holds image idx[i]'s
//                                         [ch, r*sh - pad_top + ki, s*sw -
//                                         pad_left + kj], 0 outside it (and
//                                         for idx[i] < 0)
//
//   ./gather_im2col [VERSION] [--jsonl FILE]
//
// Versions:
//   1  the engine's two launches apart: cuda_gather_batch (cuda/gather.cu)
//      copies the batch's images into the Net's input x (and the targets,
//      and moves the counters), then im2col_kernel (cnn_conv2d,
//      cuda/conv2d_kernels.cuh, on the grid conv2d.cu's im2col uses) reads x
//      back into col: the engine's path with CNNCUDA_FUSE_GATHER_IM2COL unset
//   2  the engine: cuda_gather_batch_im2col (cuda/gather_im2col.cu): im2col's
//      threads read the resident images through the order, the targets and
//      the counters as gather.cu moves them; x not written; one launch
//
// Checks (every version, every case, tagged integer and uniform images;
// the workspace, x and the targets' buffer poisoned with all-ones bytes and
// the counters reset before each run), every element bit for bit:
//   - col against the reference (the copies, +0.0 in the padding and for a
//     negative index), the workspace past col not written;
//   - x: version 1 the gathered images, version 2 not written;
//   - the targets' rows, the bytes around them not written;
//   - the counters after the step, the context's tickets back to 0;
//   - col, targets and counters those of version 1 (version 2 runs version 1
//     first on the case when it has not been run there).
// Timing: the order holds the batch's window of `rows` entries repeated past
// its position (WINDOWS times), so that each of a timing's runs, moving the
// position on by rows, gathers the same batch; the counters are reset before
// each timing and checked after it (WARMUP + REPEATS steps taken, tickets
// back to 0: a failure otherwise). The cases, their reference and these
// comparisons: gather_im2col_cases.cuh (host code only).
#include "common.cuh"
#include "conv2d_kernels.cuh"
#include "gather_im2col_cases.cuh"

using namespace dev;

namespace {

// The batch's window in the order, this many times: a timing's WARMUP +
// REPEATS runs and a spare.
constexpr int WINDOWS = WARMUP + REPEATS + 2;

struct Buffers {
    DeviceBuffer<float> images, x, ws;
    DeviceBuffer<uint8_t> src_t, dst_t;
    DeviceBuffer<int32_t> order;
    DeviceBuffer<int64_t> counters;
    Buffers(const GatherCase &c, size_t order_entries)
        : images(c.resident * image_floats(c.d)), x((size_t)c.d.n * image_floats(c.d)),
          ws(cuda_conv2d_workspace(&c.d) / sizeof(float)), src_t(src_t_bytes(c)),
          dst_t(dst_t_bytes(c)), order(order_entries), counters(CNN_COUNTERS)
    {
    }
};

size_t x_row_bytes(const GatherCase &c) { return image_floats(c.d) * sizeof(float); }
// src_t NULL without targets (t_row_bytes is passed all the same: ignored)
const void *src_t_of(const GatherCase &c, Buffers &m)
{
    return c.targets == Targets::NONE ? nullptr : m.src_t.p + c.t_offset;
}
void *dst_t_of(const GatherCase &c, Buffers &m) { return m.dst_t.p + c.t_offset; }

// ---- version 1: the engine's gather into x, then its im2col kernel on x.
bool gather_alone(const GatherCase &c, Buffers &m, Engine &e)
{
    return engine_ok(cuda_gather_batch(e.ctx, m.order.p, m.counters.p, c.d.n, c.rows, x_row_bytes(c),
                                       m.images.p, m.x.p, c.t_row_bytes, src_t_of(c, m), dst_t_of(c, m)),
                     "cuda_gather_batch");
}

bool im2col_alone(const GatherCase &c, Buffers &m, Engine &e)
{
    const cnn_conv_desc &d = c.d;
    return engine_ok(cnn_cuda_im2col(e.ctx, &d, m.x.p, m.ws.p), "cnn_cuda_im2col"); // the engine's launch
}

bool v1(const GatherCase &c, Buffers &m, Engine &e) { return gather_alone(c, m, e) && im2col_alone(c, m, e); }

// ---- version 2: the engine's fused entry.
bool v2(const GatherCase &c, Buffers &m, Engine &e)
{
    return engine_ok(cuda_gather_batch_im2col(e.ctx, m.order.p, m.counters.p, c.d.n, c.rows, x_row_bytes(c),
                                              m.images.p, m.x.p, c.t_row_bytes, src_t_of(c, m),
                                              dst_t_of(c, m), &c.d, m.ws.p),
                     "cuda_gather_batch_im2col");
}

struct Version {
    const char *name;
    bool writes_x;
    bool (*run)(const GatherCase &, Buffers &, Engine &);
};

const Version VERSIONS[] = {
    {"apart: engine cuda_gather_batch into x, then im2col_kernel (2 launches)", true, v1},
    {"engine cuda_gather_batch_im2col: gather + col in one launch", false, v2},
};
constexpr int N_VERSIONS = sizeof VERSIONS / sizeof VERSIONS[0];

GatherInputs checked_inputs(const GatherCase &c, Fill f, uint64_t seed)
{
    if (!consistent(c)) {
        fprintf(stderr, "case '%s': not a convolution that reads its image, or the batch is not a slice "
                        "of the order inside the resident rows\n", describe(c).c_str());
        exit(2);
    }
    return gather_inputs(c, f, seed, WINDOWS);
}

// One step with one kind of images: the inputs, their reference, the
// device buffers (inputs uploaded), and version 1's outputs here once it has
// run (the bits the others must give).
struct Case {
    GatherCase gc;
    Fill fill;
    GatherInputs in;
    GatherReference ref;
    Buffers gpu;
    GatherOutputs first;
    bool first_ran = false;

    Case(const GatherCase &c, Fill f, uint64_t seed)
        : gc(c), fill(f), in(checked_inputs(c, f, seed)), ref(gather_reference(c, in)),
          gpu(c, in.order.size())
    {
        gpu.images.upload(in.images);
        gpu.src_t.upload(in.targets);
        gpu.order.upload(in.order);
    }
};

// The counters as before the step (a synchronous copy, then a device-wide
// synchronize: ordered before the engine's non-blocking stream runs on).
void reset_counters(Case &c)
{
    const Counters k = counters_before(c.gc);
    c.gpu.counters.upload(std::vector<int64_t>(k.begin(), k.end()));
}

Counters download_counters(Case &c)
{
    const std::vector<int64_t> v = c.gpu.counters.download();
    Counters k{};
    std::copy(v.begin(), v.begin() + CNN_COUNTERS, k.begin());
    return k;
}

std::vector<uint32_t> download_tickets(Engine &eng)
{
    std::vector<uint32_t> t(CNN_TICKETS);
    CUDA_CHECK(cudaMemcpy(t.data(), cnn_meet(eng.ctx)->tickets, CNN_TICKETS * sizeof(uint32_t),
                          cudaMemcpyDeviceToHost));
    return t;
}

// Every output buffer poisoned on the engine's stream, which does not wait
// for the legacy default stream (cudaStreamNonBlocking): the whole
// workspace, x and the targets' whole buffer all-ones bytes (a NaN float).
void poison(Case &c, cudaStream_t st)
{
    CUDA_CHECK(cudaMemsetAsync(c.gpu.ws.p, 0xff, c.gpu.ws.n * sizeof(float), st));
    CUDA_CHECK(cudaMemsetAsync(c.gpu.x.p, 0xff, c.gpu.x.n * sizeof(float), st));
    CUDA_CHECK(cudaMemsetAsync(c.gpu.dst_t.p, 0xff, c.gpu.dst_t.n, st));
}

// Runs version v on case c from reset counters and poisoned buffers; false
// when it could not run.
bool run_once(const Version &v, Case &c, Engine &eng, GatherOutputs &out)
{
    reset_counters(c);
    poison(c, eng.stream());
    if (!v.run(c.gc, c.gpu, eng)) return false;
    CUDA_CHECK(cudaStreamSynchronize(eng.stream()));
    out.x = c.gpu.x.download();
    out.ws = c.gpu.ws.download();
    out.t = c.gpu.dst_t.download();
    out.counters = download_counters(c);
    out.tickets = download_tickets(eng);
    return true;
}

Errors check(size_t vi, Case &c, Engine &eng)
{
    GatherOutputs out;
    if (!run_once(VERSIONS[vi], c, eng, out)) {
        Errors e;
        e.bad_at = 0;
        return e;
    }
    if (vi == 0) {
        c.first = out;
        c.first_ran = true;
    } else if (!c.first_ran) { // version 1's bits on this case, for the comparison
        c.first_ran = run_once(VERSIONS[0], c, eng, c.first);
    }
    Errors e = check_step(c.gc, c.fill, c.ref, out, VERSIONS[vi].writes_x,
                          vi > 0 && c.first_ran ? &c.first : nullptr);
    if (vi > 0 && !c.first_ran)
        e.failure += std::string(e.failure.empty() ? "" : "; ") + "version 1 did not run: no bits to compare";
    // Report::check_line says only "non-finite" for a bad_at: the failure names what
    if (!passes(c.fill, e) && e.bad_at != SIZE_MAX && !e.failure.empty())
        printf("  CHECK FAILED %s: %s\n", describe(c.gc).c_str(), e.failure.c_str());
    return e;
}

// The median of run() from reset counters (every run gathers the same
// batch: the order's repeated window); then the counters must show WARMUP +
// REPEATS steps when `steps` (the run moves them) and the tickets be back
// to 0, else a failure (negative).
template <class Run>
double timed(Case &c, Engine &eng, bool steps, const char *what, Run &&run)
{
    reset_counters(c);
    const double ms = time_median_ms(eng.stream(), run);
    if (ms < 0) return ms;
    const Counters want = steps ? counters_after(c.gc, WARMUP + REPEATS) : counters_before(c.gc);
    const Counters got = download_counters(c);
    const std::vector<uint32_t> tickets = download_tickets(eng);
    const bool ok = got == want && std::all_of(tickets.begin(), tickets.end(), [](uint32_t t) { return t == 0; });
    if (!ok) {
        printf("  CHECK FAILED %s, %s: after the timing's %d runs the counters are (%lld, %lld, %lld, %lld), "
               "want (%lld, %lld, %lld, %lld), or a ticket is not 0\n",
               describe(c.gc).c_str(), what, WARMUP + REPEATS, (long long)got[0], (long long)got[1],
               (long long)got[2], (long long)got[3], (long long)want[0], (long long)want[1],
               (long long)want[2], (long long)want[3]);
        return -1.0;
    }
    return ms;
}

// Bytes each version moves at a step (each buffer once: the batch's images
// read, col written, the targets read and written, the order's entries; v1
// also writes x and reads it back, from L2 if anywhere), to set the timings
// against.
void print_bytes(const std::vector<GatherCase> &steps)
{
    printf("\nbytes moved (each buffer once; v1 also writes x and reads it back) and launches:\n");
    double t1 = 0.0, t2 = 0.0;
    for (const GatherCase &c : steps) {
        const double img = 4.0 * c.d.n * image_floats(c.d), col = 4.0 * col_count(c.d);
        const double t = 2.0 * c.d.n * t_bytes_moved(c) + 4.0 * c.d.n;
        const double b1 = img + img + img + col + t, b2 = img + col + t;
        t1 += b1;
        t2 += b2;
        printf("  v1 %6.3f MB in 2 launches, v2 %6.3f MB in 1 (images %.3f, col %.3f, targets and order %.4f MB)  %s\n",
               b1 / 1e6, b2 / 1e6, img / 1e6, col / 1e6, t / 1e6, c.label.c_str());
    }
    printf("  v1 %6.3f MB in %zu launches, v2 %6.3f MB in %zu, over the seed steps\n", t1 / 1e6,
           2 * steps.size(), t2 / 1e6, steps.size());
}

} // namespace

int main(int argc, char **argv)
{
    const Options opt = parse_args(argc, argv, N_VERSIONS);
    Engine eng;
    Report rep("gather_im2col", opt);
    Cases<Case> cases;
    uint64_t seed = 900;
    for (const GatherCase &c : seed_steps())
        for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.seed.emplace_back(new Case(c, f, seed += 3));
    for (const GatherCase &c : odd_steps())
        for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.odd.emplace_back(new Case(c, f, seed += 3));
    print_bytes(seed_steps());
    // Version 1's two launches, each alone (not a version: no row).
    printf("\nversion 1's launches alone (cuda_gather_batch; im2col_kernel on its x):\n");
    for (size_t ci = 1; ci < cases.seed.size(); ci += 2) {
        Case &c = *cases.seed[ci];
        const double gather_ms = timed(c, eng, true, "cuda_gather_batch alone",
                                       [&] { return gather_alone(c.gc, c.gpu, eng); });
        const double im2col_ms = timed(c, eng, false, "im2col_kernel alone",
                                       [&] { return im2col_alone(c.gc, c.gpu, eng); });
        if (gather_ms < 0 || im2col_ms < 0) rep.all_ok = false; // said above (or a launch failed)
        printf("  %10s ms gather  %10s ms im2col  %s\n",
               json_number(gather_ms >= 0 ? gather_ms : NAN, "%.4f").c_str(),
               json_number(im2col_ms >= 0 ? im2col_ms : NAN, "%.4f").c_str(), c.gc.label.c_str());
    }
    std::vector<std::string> names;
    for (const Version &v : VERSIONS) names.push_back(v.name);
    return run_versions(
        rep, opt, names, cases, [&](size_t vi, Case &c) { return check(vi, c, eng); },
        [&](size_t vi, Case &c) {
            return timed(c, eng, true, VERSIONS[vi].name,
                         [&] { return VERSIONS[vi].run(c.gc, c.gpu, eng); });
        },
        [](const Case &c) { return describe(c.gc); });
}
