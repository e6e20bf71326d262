// conv2d_backward_filter.cu: the convolution's filter gradient stages,
// checked against a CPU reference and timed at the seed CIFAR-10 CNN's three
// convolutions at batch 32:
//   dW (f, c, kh, kw) = sum over images and output positions of dy * x,
//   db (f) = sum of dy over images and output positions.
//
//   ./conv2d_backward_filter [VERSION] [--jsonl FILE]
//
// Versions:
//   1  naive direct: one thread per weight (and per bias), summing over the
//      batch's output positions from x and dy, global memory only
//   2  dy rearranged to t (f, NP) (the engine's gather kernel), dW = t col^T
//      by the naive GEMM (sgemm v1), db = the engine's row sums of t
//   3  as 2 with the shared-memory 32x32 GEMM (sgemm v2)
//   4  as 2 with the engine's first 64x64 tile GEMM without split-K (sgemm v4):
//      the engine's first version, where conv1's 32x27 result summed over
//      28,800 columns ran on one block
//   5  the engine: cuda_conv2d_backward_filter (until 2026-11-25: gather,
//      cnn_cuda_sgemm with split-K, two-pass row sums; since then dy read in
//      place by the GEMM, and on the 64x64 tile db as the product's column
//      of ones; since 2026-11-27, eighth session, conv1's split-K partial
//      sums on the narrow kernel, cuda/gemm_narrow_kernels.cuh, same bits;
//      since 2026-11-28, ninth, db on the wide kernel too, from a row of
//      ones after col: the workspace here, K NP + f NP floats, has the row)
// As in the engine, versions 2-5 take the column matrix col (K, NP) that the
// forward left in the layer's workspace: it is made before the check and the
// timing (by the engine's im2col kernel) and is not part of the time.
#include "common.cuh"
#include "conv2d_kernels.cuh"
#include "conv2d_rearranged.cuh"
#include "conv_cases.cuh"
#include "sgemm_stages.cuh"

using namespace dev;

namespace {

// ---- version 1: naive direct.
__global__ void conv_dw_naive(cnn_conv_desc d, const float *__restrict__ x,
                              const float *__restrict__ dy, float *__restrict__ dw)
{
    const int K = d.c * d.kh * d.kw;
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= d.f * K) return;
    const int kj = o % d.kw, ki = o / d.kw % d.kh, ch = o / (d.kw * d.kh) % d.c, fi = o / K;
    float acc = 0.0f;
    for (int i = 0; i < d.n; ++i)
        for (int r = 0; r < d.oh; ++r) {
            const int row = r * d.sh - d.pad_top + ki;
            if (row < 0 || row >= d.h) continue;
            for (int s = 0; s < d.ow; ++s) {
                const int column = s * d.sw - d.pad_left + kj;
                if (column < 0 || column >= d.w) continue;
                acc = fmaf(dy[(((size_t)i * d.f + fi) * d.oh + r) * d.ow + s],
                           x[(((size_t)i * d.c + ch) * d.h + row) * d.w + column], acc);
            }
        }
    dw[o] = acc;
}

__global__ void conv_db_naive(cnn_conv_desc d, const float *__restrict__ dy, float *__restrict__ db)
{
    const int fi = blockIdx.x * blockDim.x + threadIdx.x;
    if (fi >= d.f) return;
    const size_t p = (size_t)d.oh * d.ow;
    float acc = 0.0f;
    for (int i = 0; i < d.n; ++i)
        for (size_t q = 0; q < p; ++q) acc += dy[((size_t)i * d.f + fi) * p + q];
    db[fi] = acc;
}

struct Buffers {
    DeviceBuffer<float> x, dy, dw, db, ws, sums;
    explicit Buffers(const cnn_conv_desc &d)
        : x(x_count(d)), dy(y_count(d)), dw(w_count(d)), db(d.f),
          ws(rearranged::workspace_floats(d)), sums(rearranged::row_sums_scratch(d.f, np_of(d)))
    {
    }
};

bool v1(const cnn_conv_desc &d, Buffers &m, bool bias, Engine &e)
{
    const int weights = d.f * k_of(d);
    conv_dw_naive<<<(weights + 127) / 128, 128, 0, e.stream()>>>(d, m.x.p, m.dy.p, m.dw.p);
    if (!launched("conv dW v1")) return false;
    if (!bias) return true;
    conv_db_naive<<<(d.f + 127) / 128, 128, 0, e.stream()>>>(d, m.dy.p, m.db.p);
    return launched("conv db v1");
}

// ---- versions 2-4: gather dy into t (f, NP), a GEMM stage, the row sums of t
// (conv2d_rearranged.cuh: the engine's path until 2026-11-25).
using GemmStage = bool (*)(const stages::Gemm &, cudaStream_t);

bool via_gemm(const cnn_conv_desc &d, Buffers &m, bool bias, Engine &e, GemmStage gemm)
{
    const int k = k_of(d), np = np_of(d);
    const float *col = m.ws.p;
    float *t = m.ws.p + (size_t)k * np;
    const size_t p = (size_t)d.oh * d.ow;
    rearranged::gather_dy_kernel<<<cnn_blocks(y_count(d), CNN_THREADS), CNN_THREADS, 0, e.stream()>>>(
        d.n, d.f, p, m.dy.p, t);
    if (!launched("gather dy")) return false;
    if (!gemm({false, true, d.f, k, np, 1.0f, t, np, col, np, 0.0f, m.dw.p, k}, e.stream())) return false;
    return !bias || rearranged::row_sums(e.stream(), d.f, np, t, m.db.p, m.sums.p);
}

struct Version {
    const char *name;
    bool (*run)(const cnn_conv_desc &, Buffers &, bool bias, Engine &);
};

const Version VERSIONS[] = {
    {"naive direct: one thread per weight, global memory only", v1},
    {"gather dy + naive GEMM (sgemm v1) + row sums",
     [](const cnn_conv_desc &d, Buffers &m, bool bias, Engine &e) {
         return via_gemm(d, m, bias, e, stages::sgemm_v1);
     }},
    {"gather dy + shared-memory 32x32 GEMM (sgemm v2) + row sums",
     [](const cnn_conv_desc &d, Buffers &m, bool bias, Engine &e) {
         return via_gemm(d, m, bias, e, stages::sgemm_v2);
     }},
    {"gather dy + engine tile GEMM, no split-K (sgemm v4) + row sums",
     [](const cnn_conv_desc &d, Buffers &m, bool bias, Engine &e) {
         return via_gemm(d, m, bias, e, stages::sgemm_v4);
     }},
    {"engine cuda_conv2d_backward_filter: split-K SGEMM + row sums",
     [](const cnn_conv_desc &d, Buffers &m, bool bias, Engine &e) {
         return engine_ok(cuda_conv2d_backward_filter(e.ctx, &d, m.x.p, m.dy.p, m.dw.p,
                                                      bias ? m.db.p : nullptr, m.ws.p),
                          "cuda_conv2d_backward_filter");
     }},
};
constexpr int N_VERSIONS = sizeof VERSIONS / sizeof VERSIONS[0];

// One convolution with one kind of input: x, dy, and the float64 reference
// of dW followed by db (when the case has a bias).
struct Case {
    ConvCase cc;
    Fill fill;
    std::vector<float> x, dy;
    std::vector<double> ref, scale;
    Buffers gpu; // the inputs and outputs on the device

    Case(const ConvCase &c, Fill f, uint64_t seed)
        : cc(c), fill(f), x(random_vector(x_count(c.d), f, seed)),
          dy(random_vector(y_count(c.d), f, seed + 1)), gpu(c.d)
    {
        gpu.x.upload(x);
        gpu.dy.upload(dy);
        const cnn_conv_desc &d = cc.d;
        ref.assign(w_count(d) + (cc.bias ? d.f : 0), 0.0);
        scale.assign(ref.size(), 0.0);
        size_t o = 0;
        for (int fi = 0; fi < d.f; ++fi)
            for (int ch = 0; ch < d.c; ++ch)
                for (int ki = 0; ki < d.kh; ++ki)
                    for (int kj = 0; kj < d.kw; ++kj, ++o)
                        for (int i = 0; i < d.n; ++i)
                            for (int r = 0; r < d.oh; ++r)
                                for (int s = 0; s < d.ow; ++s) {
                                    const long xi = x_index(d, i, ch, r, s, ki, kj);
                                    if (xi < 0) continue;
                                    const double t =
                                        (double)dy[(((size_t)i * d.f + fi) * d.oh + r) * d.ow + s] * x[xi];
                                    ref[o] += t;
                                    scale[o] += std::fabs(t);
                                }
        if (!cc.bias) return;
        const size_t p = (size_t)d.oh * d.ow;
        for (int fi = 0; fi < d.f; ++fi, ++o)
            for (int i = 0; i < d.n; ++i)
                for (size_t q = 0; q < p; ++q) {
                    ref[o] += dy[((size_t)i * d.f + fi) * p + q];
                    scale[o] += std::fabs(dy[((size_t)i * d.f + fi) * p + q]);
                }
    }

    // The forward's column matrix in the workspace (what the engine's
    // forward leaves there).
    void make_col(cudaStream_t st)
    {
        const cnn_conv_desc &d = cc.d;
        const size_t count = (size_t)k_of(d) * np_of(d);
        cnn_conv2d::im2col_kernel<<<cnn_blocks(count, CNN_THREADS), CNN_THREADS, 0, st>>>(d, gpu.x.p, gpu.ws.p);
        CUDA_CHECK(cudaGetLastError());
    }
};

Errors check(const Version &v, Case &c, Engine &eng)
{
    c.gpu.dw.fill_nan();
    c.gpu.db.fill_nan();
    CUDA_CHECK(cudaMemset(c.gpu.ws.p, 0xff, c.gpu.ws.n * sizeof(float))); // forget the last version's
    c.make_col(eng.stream());
    Errors e;
    if (!v.run(c.cc.d, c.gpu, c.cc.bias, eng)) {
        e.bad_at = 0;
        return e;
    }
    CUDA_CHECK(cudaStreamSynchronize(eng.stream()));
    std::vector<float> out = c.gpu.dw.download();
    if (c.cc.bias) {
        const std::vector<float> db = c.gpu.db.download();
        out.insert(out.end(), db.begin(), db.end());
    }
    return compare(out, c.ref, c.scale);
}

} // namespace

int main(int argc, char **argv)
{
    const Options opt = parse_args(argc, argv, N_VERSIONS);
    Engine eng;
    Report rep("conv2d_backward_filter", opt);
    Cases<Case> cases;
    uint64_t seed = 300;
    for (const ConvCase &cc : seed_convs())
        for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.seed.emplace_back(new Case(cc, f, seed += 3));
    for (const ConvCase &cc : odd_convs())
        for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.odd.emplace_back(new Case(cc, f, seed += 3));
    std::vector<std::string> names;
    for (const Version &v : VERSIONS) names.push_back(v.name);
    return run_versions(
        rep, opt, names, cases, [&](size_t vi, Case &c) { return check(VERSIONS[vi], c, eng); },
        [&](size_t vi, Case &c) {
            c.make_col(eng.stream());
            return time_median_ms(eng.stream(), [&] { return VERSIONS[vi].run(c.cc.d, c.gpu, c.cc.bias, eng); });
        },
        [](const Case &c) { return describe(c.cc); });
}
