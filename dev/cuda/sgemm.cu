// sgemm.cu: the SGEMM stages, checked against a CPU reference and timed at
// the GEMM shapes of the seed CIFAR-10 CNN at batch 32 (the convolutions as
// the engine's batched im2col GEMMs, and the dense layers).
//
//   ./sgemm          every version
//   ./sgemm 3        version 3 only
//   ./sgemm --jsonl rows.jsonl   also append a JSON row per measurement
//
// Versions (sgemm_stages.cuh):
//   1  naive: one thread per output, global memory only
//   2  shared-memory tiles 32x32, one output per thread
//   3  64x64 tiles, a column of 8 outputs per thread (1-D register blocking)
//   4  the engine's tile kernel as it was until 2026-11-25 (64x64, 4x4
//      outputs per thread), no split-K
//   5  the engine under CNNCUDA_SGEMM=tile64 CNNCUDA_SGEMM_TILE=scalar:
//      cnn_cuda_sgemm (4 with the next k step loaded into registers while
//      the current one is multiplied, plus deterministic split-K)
//   6  the wide kernel on every product (CNNCUDA_SGEMM=wide): BM x 128
//      tiles, 8x8 outputs per thread, a cp.async pipeline; split-K
//   7  cnn_cuda_sgemm as it was until the shaped tiles: products of >= 2^27
//      multiply-adds on the wide kernel, the others on version 5's tile
//   8  the engine: cnn_cuda_sgemm, the small products on tiles fitted to
//      their shape (16/32/64 x 32/64) with float4 shared loads and stores
#include "common.cuh"
#include "sgemm_stages.cuh"

using namespace dev;

namespace {

struct Shape {
    std::string label;
    bool ta, tb;
    int m, n, k;
    float alpha, beta;
    int pad; // extra elements at the end of every stored row (leading dimensions)
};

// The engine's calls for one training step of the seed network at batch 32
// (conv2d.cu and dense.cu): forward, filter gradient (dW), data gradient
// (dcol, dx; none for the first layer). conv: K = c*3*3, NP = 32*oh*ow.
std::vector<Shape> seed_shapes()
{
    return {
        {"conv1 forward W(32,27) col(27,28800)", false, false, 32, 28800, 27, 1, 0, 0},
        {"conv1 dW t(32,28800) col^T", false, true, 32, 27, 28800, 1, 0, 0},
        {"conv2 forward W(64,288) col(288,5408)", false, false, 64, 5408, 288, 1, 0, 0},
        {"conv2 dW t(64,5408) col^T", false, true, 64, 288, 5408, 1, 0, 0},
        {"conv2 dcol W^T(288,64) t(64,5408)", true, false, 288, 5408, 64, 1, 0, 0},
        {"conv3 forward W(64,576) col(576,512)", false, false, 64, 512, 576, 1, 0, 0},
        {"conv3 dW t(64,512) col^T", false, true, 64, 576, 512, 1, 0, 0},
        {"conv3 dcol W^T(576,64) t(64,512)", true, false, 576, 512, 64, 1, 0, 0},
        {"dense1 forward x(32,1024) w(1024,64) + y", false, false, 32, 64, 1024, 1, 1, 0},
        {"dense1 dx dy(32,64) w^T", false, true, 32, 1024, 64, 1, 0, 0},
        {"dense1 dW x^T(1024,32) dy(32,64)", true, false, 1024, 64, 32, 1, 0, 0},
        {"dense2 forward x(32,64) w(64,10) + y", false, false, 32, 10, 64, 1, 1, 0},
        {"dense2 dx dy(32,10) w^T", false, true, 32, 64, 10, 1, 0, 0},
        {"dense2 dW x^T(64,32) dy(32,10)", true, false, 64, 10, 32, 1, 0, 0},
    };
}

// Odd sizes, every transpose: edges of tiles, k shorter and longer than a
// tile, split-K with a ragged last slice, alpha and beta, padded rows.
std::vector<Shape> odd_shapes()
{
    std::vector<Shape> v;
    for (int t = 0; t < 4; ++t) {
        const bool ta = t & 1, tb = t & 2;
        v.push_back({"1x1x1", ta, tb, 1, 1, 1, 1, 0, 0});
        v.push_back({"17x33x65", ta, tb, 17, 33, 65, 1, 0, 0});
        v.push_back({"67x129x300 alpha 0.5 beta -2 padded", ta, tb, 67, 129, 300, 0.5f, -2, 3});
        v.push_back({"100x3x1000", ta, tb, 100, 3, 1000, 1, 0, 0});
        v.push_back({"130x70x20 beta 0.25 padded", ta, tb, 130, 70, 20, 1, 0.25f, 1});
        // the wide kernel: each row tile (32, 64, 128), ragged edges, k
        // shorter than a step, split-K with a ragged last slice
        v.push_back({"33x300x17", ta, tb, 33, 300, 17, 1, 0, 0});
        v.push_back({"70x257x129 alpha 0.5 beta 1 padded", ta, tb, 70, 257, 129, 0.5f, 1, 2});
        v.push_back({"290x1000x70", ta, tb, 290, 1000, 70, 1, 0, 0});
        v.push_back({"129x131x5 beta -1", ta, tb, 129, 131, 5, 1, -1, 0});
        v.push_back({"250x140x40 beta 0.5", ta, tb, 250, 140, 40, 1, 0.5f, 0});
        v.push_back({"64x130x3001 split-K", ta, tb, 64, 130, 3001, 1, 0, 0});
    }
    return v;
}

std::string describe(const Shape &s)
{
    char buf[160];
    snprintf(buf, sizeof buf, "%s %s%s m=%d n=%d k=%d", s.label.c_str(), s.ta ? "T" : "N",
             s.tb ? "T" : "N", s.m, s.n, s.k);
    return buf;
}

// One shape with one kind of input, its reference, and device buffers.
struct Case {
    Shape s;
    Fill fill;
    int lda, ldb, ldc;
    size_t a_size, b_size, c_size;
    std::vector<float> a, b, c0;
    std::vector<double> ref, scale;
    DeviceBuffer<float> da, db, dc;

    Case(const Shape &shape, Fill f, uint64_t seed)
        : s(shape), fill(f), lda((s.ta ? s.m : s.k) + s.pad), ldb((s.tb ? s.k : s.n) + s.pad),
          ldc(s.n + s.pad), a_size((size_t)(s.ta ? s.k : s.m) * lda),
          b_size((size_t)(s.tb ? s.n : s.k) * ldb), c_size((size_t)s.m * ldc),
          a(random_vector(a_size, f, seed)), b(random_vector(b_size, f, seed + 1)),
          c0(random_vector(c_size, f, seed + 2)), da(a_size), db(b_size), dc(c_size)
    {
        da.upload(a);
        db.upload(b);
        reference();
    }

    // ref = alpha op(A) op(B) + beta C in float64 (C's padding unchanged);
    // scale = the same sum over absolute values
    void reference()
    {
        const int m = s.m, n = s.n, k = s.k;
        std::vector<double> opb((size_t)k * n); // op(B), (k, n)
        for (int kk = 0; kk < k; ++kk)
            for (int j = 0; j < n; ++j)
                opb[(size_t)kk * n + j] = s.tb ? b[(size_t)j * ldb + kk] : b[(size_t)kk * ldb + j];
        ref.assign(c_size, 0.0);
        scale.assign(c_size, 0.0);
        std::vector<double> acc(n), acc_abs(n);
        for (int i = 0; i < m; ++i) {
            std::fill(acc.begin(), acc.end(), 0.0);
            std::fill(acc_abs.begin(), acc_abs.end(), 0.0);
            for (int kk = 0; kk < k; ++kk) {
                const double av = s.ta ? a[(size_t)kk * lda + i] : a[(size_t)i * lda + kk];
                const double *row = &opb[(size_t)kk * n];
                for (int j = 0; j < n; ++j) {
                    acc[j] += av * row[j];
                    acc_abs[j] += std::fabs(av * row[j]);
                }
            }
            for (int j = 0; j < ldc; ++j) {
                const size_t o = (size_t)i * ldc + j;
                if (j >= n) { // padding: must stay as it was
                    ref[o] = c0[o];
                    scale[o] = std::fabs(c0[o]);
                    continue;
                }
                const double cb = s.beta == 0.0f ? 0.0 : (double)s.beta * c0[o];
                ref[o] = s.alpha * acc[j] + cb;
                scale[o] = std::fabs(s.alpha) * acc_abs[j] + std::fabs(cb);
            }
        }
    }

    // C as it was before the call: NaN where beta == 0 (C must not be read)
    void reset_c()
    {
        if (s.beta == 0.0f && s.pad == 0)
            dc.fill_nan();
        else
            dc.upload(c0);
    }

    stages::Gemm gemm()
    {
        return {s.ta, s.tb, s.m, s.n, s.k, s.alpha, da.p, lda, db.p, ldb, s.beta, dc.p, ldc};
    }
};

struct Version {
    const char *name;
    bool (*run)(const stages::Gemm &, Engine &);
};

const Version VERSIONS[] = {
    {"naive: one thread per output, global memory only",
     [](const stages::Gemm &g, Engine &e) { return stages::sgemm_v1(g, e.stream()); }},
    {"shared-memory tiles 32x32, one output per thread",
     [](const stages::Gemm &g, Engine &e) { return stages::sgemm_v2(g, e.stream()); }},
    {"64x64 tiles, 8 outputs per thread (1-D register blocking)",
     [](const stages::Gemm &g, Engine &e) { return stages::sgemm_v3(g, e.stream()); }},
    {"tile kernel 64x64x16, 4x4 per thread (the engine's until 2026-11-25), no split-K",
     [](const stages::Gemm &g, Engine &e) { return stages::sgemm_v4(g, e.stream()); }},
    {"engine cnn_cuda_sgemm, tile64: tile kernel + split-K",
     [](const stages::Gemm &g, Engine &e) { return stages::sgemm_v5(g, e.ctx); }},
    {"wide kernel everywhere (BM x 128, 8x8 per thread, cp.async) + split-K",
     [](const stages::Gemm &g, Engine &e) { return stages::sgemm_v6(g, e.ctx); }},
    {"cnn_cuda_sgemm auto, scalar 64x64 tile: wide kernel for >= 2^27 multiply-adds",
     [](const stages::Gemm &g, Engine &e) { return stages::sgemm_v7(g, e.ctx); }},
    {"engine cnn_cuda_sgemm: shaped tiles (16-64 x 32-64, float4 shared loads), wide >= 2^27",
     [](const stages::Gemm &g, Engine &e) { return stages::sgemm_v8(g, e.ctx); }},
};
constexpr int N_VERSIONS = sizeof VERSIONS / sizeof VERSIONS[0];

// Runs version v on the case and compares with the reference.
Errors check(const Version &v, Case &c, Engine &eng)
{
    c.reset_c();
    Errors e;
    if (!v.run(c.gemm(), eng)) {
        e.bad_at = 0;
        return e;
    }
    CUDA_CHECK(cudaStreamSynchronize(eng.stream()));
    return compare(c.dc.download(), c.ref, c.scale);
}

} // namespace

int main(int argc, char **argv)
{
    const Options opt = parse_args(argc, argv, N_VERSIONS);
    Engine eng;
    Report rep("sgemm", opt);
    Cases<Case> cases; // inputs and references, once for every version
    uint64_t seed = 1;
    for (const Shape &s : seed_shapes())
        for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.seed.emplace_back(new Case(s, f, seed += 3));
    for (const Shape &s : odd_shapes())
        for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.odd.emplace_back(new Case(s, f, seed += 3));
    std::vector<std::string> names;
    for (const Version &v : VERSIONS) names.push_back(v.name);
    return run_versions(
        rep, opt, names, cases, [&](size_t vi, Case &c) { return check(VERSIONS[vi], c, eng); },
        [&](size_t vi, Case &c) {
            const stages::Gemm g = c.gemm();
            return time_median_ms(eng.stream(), [&] { return VERSIONS[vi].run(g, eng); });
        },
        [](const Case &c) { return describe(c.s); });
}
