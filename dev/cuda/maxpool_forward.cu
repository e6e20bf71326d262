// maxpool_forward.cu: max pooling forward, checked against a CPU reference
// and timed at the seed CIFAR-10 CNN's two 2x2 poolings at batch 32:
// y (n, c, oh, ow) = the max of each window of x (n, c, h, w), argmax (n, c,
// oh, ow) = its index in the h*w plane. Windows are clipped to the image;
// the first maximum in row-major window order wins; an empty window gives 0
// and argmax -1 (cuda/pool.cu, docs/semantics.md).
//
//   ./maxpool_forward [VERSION] [--jsonl FILE]
//
// Versions:
//   1  naive: one thread per output, global memory only
//   2  the engine: cuda_pool_forward (cuda/pool.cu; also one thread per
//      output, in a grid-stride loop, with the window clipped once per axis
//      before the loops)
// The engine's max pooling forward is still the plain one-thread-per-output
// kernel: this program checks it and gives the baseline for the next stage.
#include "common.cuh"

using namespace dev;

namespace {

// ---- version 1: naive, one thread per output.
__global__ void maxpool_naive(cnn_pool_desc d, const float *__restrict__ x, float *__restrict__ y,
                              int32_t *__restrict__ argmax)
{
    const size_t o = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= (size_t)d.n * d.c * d.oh * d.ow) return;
    const int s = (int)(o % d.ow), r = (int)(o / d.ow % d.oh);
    const size_t plane = o / ((size_t)d.ow * d.oh);
    const float *xq = x + plane * d.h * d.w;
    float best = 0.0f;
    int at = -1;
    for (int ki = 0; ki < d.ph; ++ki) {
        const int row = r * d.sh - d.pad_top + ki;
        if (row < 0 || row >= d.h) continue;
        for (int kj = 0; kj < d.pw; ++kj) {
            const int column = s * d.sw - d.pad_left + kj;
            if (column < 0 || column >= d.w) continue;
            const float v = xq[row * d.w + column];
            if (at < 0 || v > best) { // strict: the first maximum wins
                best = v;
                at = row * d.w + column;
            }
        }
    }
    y[o] = best;
    argmax[o] = at;
}

size_t out_count(const cnn_pool_desc &d) { return (size_t)d.n * d.c * d.oh * d.ow; }
size_t in_count(const cnn_pool_desc &d) { return (size_t)d.n * d.c * d.h * d.w; }

struct Buffers {
    DeviceBuffer<float> x, y;
    DeviceBuffer<int32_t> argmax;
    explicit Buffers(const cnn_pool_desc &d) : x(in_count(d)), y(out_count(d)), argmax(out_count(d)) {}
};

struct Version {
    const char *name;
    bool (*run)(const cnn_pool_desc &, Buffers &, Engine &);
};

const Version VERSIONS[] = {
    {"naive: one thread per output, global memory only",
     [](const cnn_pool_desc &d, Buffers &m, Engine &e) {
         const size_t total = out_count(d);
         maxpool_naive<<<(unsigned)((total + 255) / 256), 256, 0, e.stream()>>>(d, m.x.p, m.y.p, m.argmax.p);
         return launched("maxpool v1");
     }},
    {"engine cuda_pool_forward: one thread per output, grid-stride",
     [](const cnn_pool_desc &d, Buffers &m, Engine &e) {
         return engine_ok(cuda_pool_forward(e.ctx, &d, m.x.p, m.y.p, m.argmax.p), "cuda_pool_forward");
     }},
};
constexpr int N_VERSIONS = sizeof VERSIONS / sizeof VERSIONS[0];

struct PoolCase {
    std::string label;
    cnn_pool_desc d; // mode, n c h w, ph pw, sh sw, pad_top pad_left, oh ow
};

std::vector<PoolCase> seed_pools()
{
    return {
        {"pool1", {CNN_POOL_MAX, 32, 32, 30, 30, 2, 2, 2, 2, 0, 0, 15, 15}},
        {"pool2 (odd input: last row and column dropped)", {CNN_POOL_MAX, 32, 64, 13, 13, 2, 2, 2, 2, 0, 0, 6, 6}},
    };
}

std::vector<PoolCase> odd_pools()
{
    return {
        {"3x2 window, stride 2x1, pad top 1, clipped", {CNN_POOL_MAX, 3, 5, 7, 9, 3, 2, 2, 1, 1, 0, 4, 8}},
        {"same padding: last windows clipped", {CNN_POOL_MAX, 2, 3, 5, 5, 2, 2, 2, 2, 0, 0, 3, 3}},
        {"empty windows in the padding", {CNN_POOL_MAX, 1, 2, 4, 4, 2, 2, 2, 2, 2, 2, 3, 3}},
        {"overlapping 3x3 windows, stride 1", {CNN_POOL_MAX, 2, 4, 6, 6, 3, 3, 1, 1, 1, 1, 6, 6}},
    };
}

std::string describe(const PoolCase &pc)
{
    const cnn_pool_desc &d = pc.d;
    char buf[200];
    snprintf(buf, sizeof buf, "%s x(%d,%d,%d,%d) %dx%d/%dx%d -> (%d,%d,%d,%d)", pc.label.c_str(), d.n,
             d.c, d.h, d.w, d.ph, d.pw, d.sh, d.sw, d.n, d.c, d.oh, d.ow);
    return buf;
}

struct Case {
    PoolCase pc;
    Fill fill;
    std::vector<float> x;
    std::vector<double> ref, scale;
    std::vector<int32_t> ref_argmax;
    Buffers gpu; // the inputs and outputs on the device

    Case(const PoolCase &p, Fill f, uint64_t seed)
        : pc(p), fill(f), x(random_vector(in_count(p.d), f, seed)), gpu(p.d)
    {
        gpu.x.upload(x);
        const cnn_pool_desc &d = pc.d;
        size_t o = 0;
        for (size_t q = 0; q < (size_t)d.n * d.c; ++q)
            for (int r = 0; r < d.oh; ++r)
                for (int s = 0; s < d.ow; ++s, ++o) {
                    double best = 0.0;
                    int at = -1;
                    for (int ki = 0; ki < d.ph; ++ki)
                        for (int kj = 0; kj < d.pw; ++kj) {
                            const int row = r * d.sh - d.pad_top + ki, column = s * d.sw - d.pad_left + kj;
                            if (row < 0 || row >= d.h || column < 0 || column >= d.w) continue;
                            const double v = x[q * d.h * d.w + (size_t)row * d.w + column];
                            if (at < 0 || v > best) {
                                best = v;
                                at = row * d.w + column;
                            }
                        }
                    ref.push_back(best);
                    scale.push_back(0.0); // no sum, no rounding: any difference fails
                    ref_argmax.push_back(at);
                }
    }
};

Errors check(const Version &v, Case &c, Engine &eng)
{
    c.gpu.y.fill_nan();
    CUDA_CHECK(cudaMemset(c.gpu.argmax.p, 0x7f, c.gpu.argmax.n * sizeof(int32_t)));
    Errors e;
    if (!v.run(c.pc.d, c.gpu, eng)) {
        e.bad_at = 0;
        return e;
    }
    CUDA_CHECK(cudaStreamSynchronize(eng.stream()));
    e = compare(c.gpu.y.download(), c.ref, c.scale);
    const std::vector<int32_t> am = c.gpu.argmax.download();
    for (size_t i = 0; i < am.size(); ++i) e.mismatches += am[i] != c.ref_argmax[i];
    return e;
}

} // namespace

int main(int argc, char **argv)
{
    const Options opt = parse_args(argc, argv, N_VERSIONS);
    Engine eng;
    Report rep("maxpool_forward", opt);
    Cases<Case> cases;
    uint64_t seed = 200;
    for (const PoolCase &p : seed_pools())
        for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.seed.emplace_back(new Case(p, f, seed += 3));
    for (const PoolCase &p : odd_pools())
        for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.odd.emplace_back(new Case(p, f, seed += 3));
    std::vector<std::string> names;
    for (const Version &v : VERSIONS) names.push_back(v.name);
    return run_versions(
        rep, opt, names, cases, [&](size_t vi, Case &c) { return check(VERSIONS[vi], c, eng); },
        [&](size_t vi, Case &c) {
            return time_median_ms(eng.stream(), [&] { return VERSIONS[vi].run(c.pc.d, c.gpu, eng); });
        },
        [](const Case &c) { return describe(c.pc); });
}
