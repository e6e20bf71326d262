// sgemm.cu: the SGEMM stages, checked against a CPU reference and timed at
// the GEMM shapes of the seed CIFAR-10 CNN at batch 32 (the convolutions as
// the engine's batched im2col GEMMs, and the dense layers), and at conv2's
// three products and conv1's two at batch 512 (timed apart: "total batch
// 512").
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
//   5  the engine's tile kernel with scalar shared loads on every product,
//      cnn_cuda_sgemm_tile (4 with the next k step loaded into registers
//      while the current one is multiplied, plus deterministic split-K)
//   6  the wide kernel on every product (cnn_cuda_sgemm_wide): BM x 128
//      tiles, 8x8 outputs per thread, a cp.async pipeline; split-K
//   7  cnn_cuda_sgemm as it was until the shaped tiles: products of >= 2^27
//      multiply-adds on the wide kernel, the others on version 5's tile
//   8  the engine: cnn_cuda_sgemm, the small products on tiles fitted to
//      their shape (16/32/64 x 32/64) with float4 shared loads and stores
//   9  6 on TF32 tensor cores (precision "tf32"): the wide kernel on every
//      product, mma.sync m16n8k8 on operands rounded to TF32, fp32 sums
//  10  the engine with precision "tf32": 8, with the products of >= 2^27
//      multiply-adds on version 9's kernel (at batch 32: none of them)
//  11  the engine's own entry, cnn_cuda_sgemm: 8, with a K of at most 32
//      above 2^27 multiply-adds on the short kernel (one thread a column) and
//      products of at most 32 columns above 2^27 on the tile kernel with the
//      wide kernel's slices; the partial sums of a split-K product of at
//      most 32 x 32 outputs with B transposed on the narrow kernel (since
//      2026-11-27, eighth session);
//      checked to give version 8's bits on every product
// Versions 9 and 10 need compute capability 8.0; on an older GPU they are
// skipped (said so; not a failure).
//
// Checks (sgemm_reference.cuh): integer inputs exactly, for every version;
// uniform inputs to 1e-5 (float32 versions) or to TF32's bound, 2^-10 +
// 2^-22 + 1e-5 (1 + 2^-11)^2 (versions 9 and 10 where they use TF32),
// relative to the sum of |terms| of each output; and on uniform inputs the
// error must be TF32's operand rounding where TF32 is expected and must not
// be where it is not (tf32_share: ~1 against ~0).
#include "common.cuh"
#include "sgemm_reference.cuh"
#include "sgemm_stages.cuh"

using namespace dev;
using sgemm::Precision;
using sgemm::Shape;

namespace {

// One shape with one kind of input, its reference, and device buffers.
struct Case {
    Shape s;
    Fill fill;
    sgemm::Layout L;
    std::vector<float> a, b, c0;
    sgemm::Reference r; // with TF32's (ref_t) on uniform inputs
    DeviceBuffer<float> da, db, dc;

    Case(const Shape &shape, Fill f, uint64_t seed)
        : s(shape), fill(f), L(s), a(random_vector(L.a_size, f, seed)),
          b(random_vector(L.b_size, f, seed + 1)), c0(random_vector(L.c_size, f, seed + 2)),
          r(sgemm::reference(s, L, a, b, c0, f == Fill::UNIFORM)), da(L.a_size), db(L.b_size),
          dc(L.c_size)
    {
        da.upload(a);
        db.upload(b);
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
        return {s.ta, s.tb, s.m, s.n, s.k, s.alpha, da.p, L.lda, db.p, L.ldb, s.beta, dc.p, L.ldc};
    }
};

struct Version {
    const char *name;
    bool (*run)(const stages::Gemm &, Engine &);
    // what the version computes a product in (the check's expectation)
    Precision (*precision)(const Shape &, Engine &);
    bool tensor_cores; // needs compute capability 8.0 or later (TF32 mma)
};

Precision fp32(const Shape &, Engine &) { return Precision::FP32; }

const Version VERSIONS[] = {
    {"naive: one thread per output, global memory only",
     [](const stages::Gemm &g, Engine &e) { return stages::sgemm_v1(g, e.stream()); }, fp32, false},
    {"shared-memory tiles 32x32, one output per thread",
     [](const stages::Gemm &g, Engine &e) { return stages::sgemm_v2(g, e.stream()); }, fp32, false},
    {"64x64 tiles, 8 outputs per thread (1-D register blocking)",
     [](const stages::Gemm &g, Engine &e) { return stages::sgemm_v3(g, e.stream()); }, fp32, false},
    {"tile kernel 64x64x16, 4x4 per thread (the engine's until 2026-11-25), no split-K",
     [](const stages::Gemm &g, Engine &e) { return stages::sgemm_v4(g, e.stream()); }, fp32, false},
    {"engine tile kernel (scalar loads) everywhere + split-K",
     [](const stages::Gemm &g, Engine &e) { return stages::sgemm_v5(g, e.ctx); }, fp32, false},
    {"wide kernel everywhere (BM x 128, 8x8 per thread, cp.async) + split-K",
     [](const stages::Gemm &g, Engine &e) { return stages::sgemm_v6(g, e.ctx); }, fp32, false},
    {"cnn_cuda_sgemm auto, scalar 64x64 tile: wide kernel for >= 2^27 multiply-adds",
     [](const stages::Gemm &g, Engine &e) { return stages::sgemm_v7(g, e.ctx); }, fp32, false},
    {"engine cnn_cuda_sgemm: shaped tiles (16-64 x 32-64, float4 shared loads), wide >= 2^27",
     [](const stages::Gemm &g, Engine &e) { return stages::sgemm_v8(g, e.ctx); }, fp32, false},
    {"wide kernel everywhere on TF32 tensor cores (mma m16n8k8, cvt.rna, fp32 sums) + split-K",
     [](const stages::Gemm &g, Engine &e) { return stages::sgemm_v9(g, e.ctx); },
     [](const Shape &, Engine &) { return Precision::TF32; }, true},
    {"engine cnn_cuda_sgemm, precision tf32: TF32 wide kernel >= 2^27, fp32 shaped tiles below",
     [](const stages::Gemm &g, Engine &e) { return stages::sgemm_v10(g, e.ctx); },
     [](const Shape &s, Engine &e) {
         return stages::engine_sgemm_on_tf32(e.ctx, s.m, s.n, s.k) ? Precision::TF32
                                                                   : Precision::FP32;
     },
     true},
    {"engine cnn_cuda_sgemm: 8, above 2^27 K <= 32 on the short kernel, <= 32 columns on the tile",
     [](const stages::Gemm &g, Engine &e) { return stages::sgemm_v11(g, e.ctx); }, fp32, false},
};
constexpr int N_VERSIONS = sizeof VERSIONS / sizeof VERSIONS[0];

// The range of tf32_share a version showed on uniform inputs, per expected
// precision (printed after its checks: ~0 for float32, ~1 for TF32).
struct ShareRange {
    int n = 0;
    double lo = INFINITY, hi = -INFINITY;
    void add(double x)
    {
        ++n;
        lo = std::min(lo, x);
        hi = std::max(hi, x);
    }
};
ShareRange shares[N_VERSIONS][2]; // [version][Precision]

// Runs version v on the case and compares with the reference.
Errors check(size_t vi, Case &c, Engine &eng)
{
    const Version &v = VERSIONS[vi];
    c.reset_c();
    if (!v.run(c.gemm(), eng)) {
        Errors e;
        e.bad_at = 0;
        return e;
    }
    CUDA_CHECK(cudaStreamSynchronize(eng.stream()));
    const Precision p = v.precision(c.s, eng);
    const sgemm::Checked k = sgemm::check_output(c.dc.download(), c.r, c.fill, p);
    if (std::isfinite(k.share)) shares[vi][(int)p].add(k.share);
    return k.e;
}

void print_shares(size_t vi)
{
    for (int p = 0; p < 2; ++p) {
        const ShareRange &r = shares[vi][p];
        if (!r.n) continue;
        printf("  %s products, %d uniform checks: error %.3f to %.3f times TF32's operand rounding "
               "(expected ~%d)%s\n",
               p == (int)Precision::TF32 ? "TF32" : "float32", r.n, r.lo, r.hi,
               p == (int)Precision::TF32 ? 1 : 0,
               p == (int)Precision::TF32 ? "; tolerance 2^-10 + 2^-22 + 1e-5 (1 + 2^-11)^2" : "");
    }
}

// Version 11 (the engine's entry) against version 8 (the kernels it had
// before the short and narrow paths), bit for bit on every case: the short
// kernel's chains and the narrow product's slices are those of the kernels
// they replace. Returns the number of cases that differ.
int same_bits_as_version_8(Cases<Case> &cases, Engine &eng)
{
    int checked = 0, differ = 0;
    for (auto *list : {&cases.seed, &cases.odd, &cases.large})
        for (auto &cp : *list) {
            Case &c = *cp;
            std::vector<float> out[2];
            for (int v = 0; v < 2; ++v) {
                c.reset_c();
                const bool ok = v == 0 ? stages::sgemm_v8(c.gemm(), eng.ctx)
                                       : stages::sgemm_v11(c.gemm(), eng.ctx);
                if (!ok) return ++differ;
                CUDA_CHECK(cudaStreamSynchronize(eng.stream()));
                out[v] = c.dc.download();
            }
            ++checked;
            if (memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)) != 0) {
                ++differ;
                printf("  CHECK FAILED: version 11 differs from version 8 at %s\n",
                       sgemm::describe(c.s).c_str());
            }
        }
    printf("version 11 against version 8, bit for bit: %d products, %d differ\n", checked, differ);
    return differ;
}

} // namespace

int main(int argc, char **argv)
{
    const Options opt = parse_args(argc, argv, N_VERSIONS);
    Engine eng;
    Report rep("sgemm", opt);
    int device = 0, major = 0, minor = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    std::vector<std::string> skip(N_VERSIONS), names;
    for (int vi = 0; vi < N_VERSIONS; ++vi) {
        names.push_back(VERSIONS[vi].name);
        if (VERSIONS[vi].tensor_cores && major < 8)
            skip[vi] = "needs TF32 tensor cores (compute capability 8.0 or later); this GPU is sm_" +
                       std::to_string(major) + std::to_string(minor);
    }
    Cases<Case> cases; // inputs and references, once for every version
    cases.large_total = "total batch 512";
    if (!(opt.version && !skip[opt.version - 1].empty())) { // nothing to check if all are skipped
        printf("making the inputs and their float64 references (%u threads)\n",
               std::max(1u, std::thread::hardware_concurrency()));
        fflush(stdout);
        uint64_t seed = 1;
        for (const Shape &s : sgemm::seed_shapes())
            for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.seed.emplace_back(new Case(s, f, seed += 3));
        for (const Shape &s : sgemm::odd_shapes())
            for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.odd.emplace_back(new Case(s, f, seed += 3));
        for (const Shape &s : sgemm::large_shapes())
            for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.large.emplace_back(new Case(s, f, seed += 3));
    }
    const int status = run_versions(
        rep, opt, names, cases, [&](size_t vi, Case &c) { return check(vi, c, eng); },
        [&](size_t vi, Case &c) {
            const stages::Gemm g = c.gemm();
            return time_median_ms(eng.stream(), [&] { return VERSIONS[vi].run(g, eng); });
        },
        [](const Case &c) { return sgemm::describe(c.s); }, skip, print_shares);
    const int differ = opt.version == 0 || opt.version == 11 ? same_bits_as_version_8(cases, eng) : 0;
    return status ? status : differ ? 1 : 0;
}
