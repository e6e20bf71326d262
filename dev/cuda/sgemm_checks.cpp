// sgemm_checks.cpp: a host-only test of sgemm.cu's checks (no GPU, no CUDA):
// emulated kernels, right and deliberately wrong, put through the very
// checks of sgemm_reference.cuh at sgemm.cu's own shapes and inputs (the
// batch-32 seed shapes and the odd sizes, integer and uniform; not the
// batch-512 ones, which take minutes here).
//
//   make -C dev/cuda sgemm_checks && dev/cuda/build/sgemm_checks
//
// Emulated: "float32" (one fmaf chain per output, in the order of k: what the
// float32 versions compute, up to the order of their sums) and "tf32" (every
// operand rounded to TF32 as cvt.rna does, each k step of 8 added to the
// fp32 accumulator at once, as mma.sync m16n8k8 does). Each must pass as its
// own precision and fail as the other (uniform inputs: tf32_share). The
// mutations of "tf32" must fail as TF32: a term left out of every output, a
// term counted twice, one term left out of one output, rows g and g + 8 of
// each 16-row mma tile swapped (a wrong fragment), operands rounded to bf16
// (8 bits) instead. Each expectation names the checks that must catch it:
// integer inputs exactly, uniform inputs to the tolerance, the precision
// seen (tf32_share); so each of the three shows that it can fail. A last
// variant, operands truncated to TF32 (cvt.rz instead of cvt.rna: what the
// tensor cores do with unrounded fp32 bits), is only reported. First,
// round_tf32 against values worked out by hand. Exit status 0 when every
// expectation held.
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sgemm_reference.cuh"

using namespace dev;
using sgemm::Precision;
using sgemm::Shape;

namespace {

struct Case {
    Shape s;
    Fill fill;
    sgemm::Layout L;
    std::vector<float> a, b, c0;
    sgemm::Reference r;
    // the inputs of sgemm.cu: the same seeds in the same order
    Case(const Shape &shape, Fill f, uint64_t seed)
        : s(shape), fill(f), L(s), a(random_vector(L.a_size, f, seed)),
          b(random_vector(L.b_size, f, seed + 1)), c0(random_vector(L.c_size, f, seed + 2)),
          r(sgemm::reference(s, L, a, b, c0, f == Fill::UNIFORM))
    {
    }
    float op_a(int i, int kk) const
    {
        return s.ta ? a[(size_t)kk * L.lda + i] : a[(size_t)i * L.lda + kk];
    }
    float op_b(int kk, int j) const
    {
        return s.tb ? b[(size_t)j * L.ldb + kk] : b[(size_t)kk * L.ldb + j];
    }
};

float round_bits(float x, int dropped) // to nearest, ties away, `dropped` low mantissa bits cleared
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + (1u << (dropped - 1))) & ~((1u << dropped) - 1);
    memcpy(&x, &u, sizeof x);
    return x;
}

float truncate_tf32(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u &= 0xffffe000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

enum class Kind { FP32, TF32, DROP_LAST, FIRST_TWICE, DROP_ONE, ROW_SWAP, BF16, TF32_RZ };

// The checks of one output, apart: integer inputs exactly, uniform inputs
// to the tolerance, the precision seen (uniform inputs).
enum Caught { BY_INTEGER = 1, BY_TOLERANCE = 2, BY_SHARE = 4 };

struct Variant {
    const char *name;
    Kind kind;
    Precision as; // checked as this precision
    int expect;   // 1: every case passes; 0: some case fails; -1: only reported
    int caught;   // expect 0: each of these checks fails on some case
};

// The variant's output for the case: C with the padding as it was.
std::vector<float> emulate(const Case &c, Kind kind)
{
    const Shape &s = c.s;
    std::vector<float> out = c.c0;
    auto rows = [&](int i_begin, int i_step) {
        std::vector<float> ar(s.k);
        for (int i = i_begin; i < s.m; i += i_step) {
            // a wrong fragment: row i of a 16-row tile takes row i ^ 8's operands
            const int src = kind == Kind::ROW_SWAP && (i ^ 8) < s.m ? (i ^ 8) : i;
            for (int kk = 0; kk < s.k; ++kk) {
                const float x = c.op_a(src, kk);
                ar[kk] = kind == Kind::FP32 ? x : kind == Kind::BF16 ? round_bits(x, 16)
                         : kind == Kind::TF32_RZ ? truncate_tf32(x) : sgemm::round_tf32(x);
            }
            for (int j = 0; j < s.n; ++j) {
                float acc = 0.0f;
                if (kind == Kind::FP32) {
                    for (int kk = 0; kk < s.k; ++kk) acc = fmaf(ar[kk], c.op_b(kk, j), acc);
                } else {
                    for (int k0 = 0; k0 < s.k; k0 += 8) { // one mma: 8 exact products + acc, rounded once
                        double sum = acc;
                        for (int kk = k0; kk < std::min(s.k, k0 + 8); ++kk) {
                            const float y = c.op_b(kk, j);
                            const float br = kind == Kind::BF16 ? round_bits(y, 16)
                                             : kind == Kind::TF32_RZ ? truncate_tf32(y)
                                                                     : sgemm::round_tf32(y);
                            double term = (double)ar[kk] * br;
                            if (kind == Kind::DROP_LAST && kk == s.k - 1) term = 0.0;
                            if (kind == Kind::DROP_ONE && kk == s.k / 2 && i == s.m / 2 && j == s.n / 2)
                                term = 0.0;
                            if (kind == Kind::FIRST_TWICE && kk == 0) term *= 2.0;
                            sum += term;
                        }
                        acc = (float)sum;
                    }
                }
                const size_t o = (size_t)i * c.L.ldc + j;
                float v = s.alpha * acc;
                if (s.beta != 0.0f) v = fmaf(s.beta, c.c0[o], v);
                out[o] = v;
            }
        }
    };
    const int workers = (int)std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (int w = 1; w < workers; ++w) pool.emplace_back(rows, w, workers);
    rows(0, workers);
    for (std::thread &t : pool) t.join();
    return out;
}

} // namespace

// round_tf32 (cvt.rna.tf32.f32) on values worked out by hand: TF32's grid at
// 1 is 2^-10; halfway goes away from zero.
bool round_tf32_ok()
{
    const float e = std::ldexp(1.0f, -11), t = std::ldexp(1.0f, -10);
    const struct { float x, want; } cases[] = {
        {1.0f, 1.0f},
        {1.0f + e, 1.0f + t},                             // a tie: away from zero
        {-(1.0f + e), -(1.0f + t)},                       // the same below zero
        {1.0f + e - std::ldexp(1.0f, -23), 1.0f},         // just under the tie: down
        {1.0f + t + e, 1.0f + 2 * t},                     // a tie above an odd step: away
        {1.0f + t + std::ldexp(1.0f, -12), 1.0f + t},     // a quarter step: down
        {2.0f - std::ldexp(1.0f, -23), 2.0f},             // carries into the exponent
        {3.0f, 3.0f},                                     // small integers are exact
        {0.0f, 0.0f},
    };
    bool ok = true;
    for (const auto &c : cases) {
        const float got = sgemm::round_tf32(c.x);
        if (got != c.want) {
            printf("FAIL round_tf32(%.9g) = %.9g, expected %.9g\n", c.x, got, c.want);
            ok = false;
        }
    }
    printf("%-4s round_tf32 on %zu values worked out by hand\n", ok ? "ok" : "FAIL",
           sizeof cases / sizeof cases[0]);
    return ok;
}

int main()
{
    bool all_met = round_tf32_ok();
    std::vector<std::unique_ptr<Case>> cases;
    uint64_t seed = 1; // sgemm.cu's seeds: the seed shapes, then the odd ones
    for (const Shape &s : sgemm::seed_shapes())
        for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.emplace_back(new Case(s, f, seed += 3));
    for (const Shape &s : sgemm::odd_shapes())
        for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.emplace_back(new Case(s, f, seed += 3));
    printf("sgemm_checks: %zu cases (sgemm.cu's batch-32 and odd shapes, integer and uniform); "
           "TF32 tolerance %.6g relative to the sum of |terms|\n",
           cases.size(), sgemm::TF32_REL_TOL);

    const int ALL = BY_INTEGER | BY_TOLERANCE | BY_SHARE;
    const Variant variants[] = {
        {"float32 (fmaf chain), checked as float32", Kind::FP32, Precision::FP32, 1, 0},
        {"tf32 (cvt.rna operands, mma k steps of 8), checked as TF32", Kind::TF32, Precision::TF32, 1, 0},
        {"float32, checked as TF32 (no tensor cores)", Kind::FP32, Precision::TF32, 0, BY_SHARE},
        {"tf32, checked as float32", Kind::TF32, Precision::FP32, 0, BY_TOLERANCE | BY_SHARE},
        {"tf32 with the last term of every output left out", Kind::DROP_LAST, Precision::TF32, 0, ALL},
        {"tf32 with the first term of every output counted twice", Kind::FIRST_TWICE, Precision::TF32, 0, ALL},
        {"tf32 with one term of one output left out", Kind::DROP_ONE, Precision::TF32, 0, ALL},
        {"tf32 with rows g and g + 8 of each mma tile swapped", Kind::ROW_SWAP, Precision::TF32, 0, ALL},
        {"bf16 operands (8-bit mantissa), checked as TF32", Kind::BF16, Precision::TF32, 0,
         BY_TOLERANCE | BY_SHARE},
        {"tf32 by truncation (cvt.rz), checked as TF32 (reported only)", Kind::TF32_RZ, Precision::TF32, -1, 0},
    };
    for (const Variant &v : variants) {
        int failed[2] = {0, 0}, checked[2] = {0, 0}, by[3] = {0, 0, 0};
        double max_rel = 0.0, lo = INFINITY, hi = -INFINITY;
        std::string first_failure;
        for (auto &cp : cases) {
            const Case &c = *cp;
            const std::vector<float> out = emulate(c, v.kind);
            const sgemm::Checked k = sgemm::check_output(out, c.r, c.fill, v.as);
            const int f = c.fill == Fill::UNIFORM;
            ++checked[f];
            by[0] += !f && (k.e.bad_at != SIZE_MAX || k.e.abs != 0.0);
            by[1] += f && (k.e.bad_at != SIZE_MAX || k.e.rel > k.e.tol);
            by[2] += f && !k.e.failure.empty();
            if (!passes(c.fill, k.e)) {
                ++failed[f];
                if (first_failure.empty())
                    first_failure = sgemm::describe(c.s) + (f ? " (uniform): " : " (integer): ") +
                                    (k.e.failure.empty() ? "error " + std::to_string(f ? k.e.rel : k.e.abs)
                                                         : k.e.failure);
            }
            if (f) max_rel = std::max(max_rel, k.e.rel);
            if (std::isfinite(k.share)) {
                lo = std::min(lo, k.share);
                hi = std::max(hi, k.share);
            }
        }
        const int total_failed = failed[0] + failed[1];
        bool met = v.expect == 1 ? total_failed == 0 : v.expect == 0 ? total_failed > 0 : true;
        for (int b = 0; b < 3; ++b)
            if (v.expect == 0 && (v.caught & (1 << b)) && by[b] == 0) met = false;
        all_met = all_met && met;
        printf("%-4s %s\n     failed: %d of %d integer, %d of %d uniform checks (caught: %d exact, "
               "%d tolerance, %d precision); uniform: max rel err %.3e, TF32 share %.4f to %.4f\n",
               v.expect < 0 ? "info" : met ? "ok" : "FAIL", v.name, failed[0], checked[0], failed[1],
               checked[1], by[0], by[1], by[2], max_rel, lo, hi);
        if (!first_failure.empty()) printf("     first failure: %s\n", first_failure.c_str());
    }
    printf("sgemm_checks: %s\n", all_met ? "every expectation held" : "EXPECTATIONS NOT MET");
    return all_met ? 0 : 1;
}
