// pool_forward_im2col.cu: a pooling layer's forward together with the column
// matrix of the convolution after it, checked against a CPU reference and
// timed at the seed networks' pool -> conv pairs at batch 32 (CIFAR-10 CNN:
// conv2 after pool1, conv3 after pool2; LeNet-5: conv2 after the first
// average pool):
//   y (n, c, oh, ow) = pool(x)          max (with argmax) or average
//   col (K, NP) = im2col(y)             the convolution's column matrix, in
//                                       its workspace: row (ch*kh + ki)*kw + kj,
//                                       column i*P + r*ow + s holds
//                                       y[i, ch, r*sh + ki, s*sw + kj]
// Only convolutions that read inside their input (pads 0, the last window
// inside: cnn_conv_reads_inside), as the engine's fused entry requires.
//
//   ./pool_forward_im2col [VERSION] [--jsonl FILE]
//
// Versions:
//   1  the engine's two launches apart: cuda_pool_forward (cuda/pool.cu),
//      then im2col_kernel (cnn_conv2d, cuda/conv2d_kernels.cuh, launched on
//      the grid conv2d.cu's im2col uses), which reads y back: the engine's
//      path with CNNCUDA_FUSE_POOL_IM2COL unset
//   2  cuda_pool_forward_im2col (pool_im2col_kernels.cuh, once the engine's): one
//      thread per element of the pool's output forms it as pool.cu does
//      (max_window, avg_window of cuda/pool_geom.cuh), writes it (and its
//      argmax) and stores it to every place of col that reads it; one launch
//
// Checks (every version, every case, integer and uniform inputs; y, argmax
// and the whole workspace NaN-filled before each run, so an element left
// unwritten fails):
//   - y: max exactly the host's (first maximum in row-major window order;
//     an empty window 0); average the float64 mean of the clipped window,
//     to 1e-5 of the mean of |x| on uniform inputs, and on integer inputs
//     exactly the float32 rounding of that mean (the float32 sum of small
//     integers is exact and a float division is correctly rounded);
//   - argmax (max): exactly the host's (-1 for an empty window);
//   - col: against the reference of the y element it holds (the same
//     tolerance), and bit for bit the version's own y at that element;
//   - y, argmax and col bit for bit those of version 1 (version 2 runs
//     version 1 first on the case when it has not been run there).
// The cases, their reference and these comparisons: pool_im2col_cases.cuh
// (host code only).
#include "common.cuh"
#include "conv2d_kernels.cuh"
#include "pool_im2col_cases.cuh"
#include "pool_im2col_kernels.cuh" // the fused kernel, retired from the engine

using namespace dev;

namespace {

struct Buffers {
    DeviceBuffer<float> x, y, ws;
    DeviceBuffer<int32_t> argmax;
    explicit Buffers(const PairCase &c)
        : x(pool_in_count(c.p)), y(pool_out_count(c.p)),
          ws(cuda_conv2d_workspace(&c.d) / sizeof(float)), argmax(pool_out_count(c.p))
    {
    }
};

// The argmax buffer the versions pass: max pooling only (the Net passes
// none for an average pool).
int32_t *argmax_of(const PairCase &c, Buffers &m)
{
    return c.p.mode == CNN_POOL_MAX ? m.argmax.p : nullptr;
}

// ---- version 1: the engine's pool forward, then its im2col kernel on the pool's output.
bool pool_alone(const PairCase &c, Buffers &m, Engine &e)
{
    return engine_ok(cuda_pool_forward(e.ctx, &c.p, m.x.p, m.y.p, argmax_of(c, m)), "cuda_pool_forward");
}

bool im2col_alone(const PairCase &c, Buffers &m, Engine &e)
{
    const cnn_conv_desc &d = c.d;
    return engine_ok(cnn_cuda_im2col(e.ctx, &d, m.y.p, m.ws.p), "cnn_cuda_im2col"); // the engine's launch
}

bool v1(const PairCase &c, Buffers &m, Engine &e) { return pool_alone(c, m, e) && im2col_alone(c, m, e); }

// ---- version 2: the engine's fused entry.
bool v2(const PairCase &c, Buffers &m, Engine &e)
{
    return engine_ok(cuda_pool_forward_im2col(e.ctx, &c.p, &c.d, m.x.p, m.y.p, argmax_of(c, m), m.ws.p),
                     "cuda_pool_forward_im2col");
}

struct Version {
    const char *name;
    bool (*run)(const PairCase &, Buffers &, Engine &);
};

const Version VERSIONS[] = {
    {"apart: engine cuda_pool_forward, then im2col_kernel (2 launches)", v1},
    {"engine cuda_pool_forward_im2col: pool + col in one launch", v2},
};
constexpr int N_VERSIONS = sizeof VERSIONS / sizeof VERSIONS[0];

// One pair with one kind of input: x, its reference, the device buffers,
// and version 1's outputs here once it has run (the bits the others must give).
struct Case {
    PairCase pc;
    Fill fill;
    std::vector<float> x;
    PairReference ref;
    Buffers gpu;
    PairOutputs first;
    bool first_ran = false;

    Case(const PairCase &c, Fill f, uint64_t seed)
        : pc(c), fill(f), x(random_vector(pool_in_count(c.p), f, seed)), gpu(c)
    {
        if (!consistent(pc)) {
            fprintf(stderr, "case '%s': the pool's output is not the convolution's input, or the "
                            "convolution is not 'valid'\n", describe(pc).c_str());
            exit(2);
        }
        gpu.x.upload(x);
        ref = pair_reference(pc, fill, x);
    }
};

// Every output buffer poisoned on the engine's stream, which does not wait
// for the legacy default stream (cudaStreamNonBlocking): y and the whole
// workspace NaN (all-ones bits), argmax 0x7f7f7f7f (no index is that).
void poison(Case &c, cudaStream_t st)
{
    CUDA_CHECK(cudaMemsetAsync(c.gpu.y.p, 0xff, c.gpu.y.n * sizeof(float), st));
    CUDA_CHECK(cudaMemsetAsync(c.gpu.ws.p, 0xff, c.gpu.ws.n * sizeof(float), st));
    CUDA_CHECK(cudaMemsetAsync(c.gpu.argmax.p, 0x7f, c.gpu.argmax.n * sizeof(int32_t), st));
}

// Runs version v on case c from poisoned buffers; false when it could not run.
bool run_once(const Version &v, Case &c, Engine &eng, PairOutputs &out)
{
    poison(c, eng.stream());
    if (!v.run(c.pc, c.gpu, eng)) return false;
    CUDA_CHECK(cudaStreamSynchronize(eng.stream()));
    out.y = c.gpu.y.download();
    const std::vector<float> ws = c.gpu.ws.download();
    out.col.assign(ws.begin(), ws.begin() + (std::ptrdiff_t)col_count(c.pc.d));
    out.argmax = c.gpu.argmax.download();
    return true;
}

Errors check(size_t vi, Case &c, Engine &eng)
{
    PairOutputs out;
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
    Errors e = check_pair(c.pc, c.ref, out, vi > 0 && c.first_ran ? &c.first : nullptr);
    if (vi > 0 && !c.first_ran)
        e.failure += std::string(e.failure.empty() ? "" : "; ") + "version 1 did not run: no bits to compare";
    // Report::check_line says only "non-finite" for a bad_at: the failure names where
    if (!passes(c.fill, e) && e.bad_at != SIZE_MAX && !e.failure.empty())
        printf("  CHECK FAILED %s: %s\n", describe(c.pc).c_str(), e.failure.c_str());
    return e;
}

// Bytes each version moves at a pair (each buffer once: x read, y and
// argmax written, col written; version 1 also reads y back, from L2 if
// anywhere), to set the timings against.
void print_bytes(const std::vector<PairCase> &pairs)
{
    printf("\nbytes moved (each buffer once; v1 also reads y back) and launches:\n");
    double t1 = 0.0, t2 = 0.0;
    for (const PairCase &c : pairs) {
        const double x = 4.0 * pool_in_count(c.p), y = 4.0 * pool_out_count(c.p);
        const double am = c.p.mode == CNN_POOL_MAX ? y : 0.0, col = 4.0 * col_count(c.d);
        const double b1 = x + y + am + y + col, b2 = x + y + am + col;
        t1 += b1;
        t2 += b2;
        printf("  v1 %6.3f MB in 2 launches, v2 %6.3f MB in 1 (x %.3f, y %.3f, argmax %.3f, col %.3f MB)  %s\n",
               b1 / 1e6, b2 / 1e6, x / 1e6, y / 1e6, am / 1e6, col / 1e6, c.label.c_str());
    }
    printf("  v1 %6.3f MB in %zu launches, v2 %6.3f MB in %zu, over the seed pairs\n", t1 / 1e6,
           2 * pairs.size(), t2 / 1e6, pairs.size());
}

} // namespace

int main(int argc, char **argv)
{
    const Options opt = parse_args(argc, argv, N_VERSIONS);
    Engine eng;
    Report rep("pool_forward_im2col", opt);
    Cases<Case> cases;
    uint64_t seed = 800;
    for (const PairCase &c : seed_pairs())
        for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.seed.emplace_back(new Case(c, f, seed += 3));
    for (const PairCase &c : odd_pairs())
        for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.odd.emplace_back(new Case(c, f, seed += 3));
    print_bytes(seed_pairs());
    // Version 1's two launches, each alone (not a version: no row).
    printf("\nversion 1's launches alone (cuda_pool_forward; im2col_kernel on its y):\n");
    for (size_t ci = 1; ci < cases.seed.size(); ci += 2) {
        Case &c = *cases.seed[ci];
        const double pool_ms = time_median_ms(eng.stream(), [&] { return pool_alone(c.pc, c.gpu, eng); });
        const double im2col_ms = time_median_ms(eng.stream(), [&] { return im2col_alone(c.pc, c.gpu, eng); });
        printf("  %10s ms pool  %10s ms im2col  %s\n", json_number(pool_ms >= 0 ? pool_ms : NAN, "%.4f").c_str(),
               json_number(im2col_ms >= 0 ? im2col_ms : NAN, "%.4f").c_str(), c.pc.label.c_str());
    }
    std::vector<std::string> names;
    for (const Version &v : VERSIONS) names.push_back(v.name);
    return run_versions(
        rep, opt, names, cases, [&](size_t vi, Case &c) { return check(vi, c, eng); },
        [&](size_t vi, Case &c) {
            return time_median_ms(eng.stream(), [&] { return VERSIONS[vi].run(c.pc, c.gpu, eng); });
        },
        [](const Case &c) { return describe(c.pc); });
}
