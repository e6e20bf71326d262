// checks.cuh: the host side of the dev/cuda programs' checks, with no CUDA
// in it (common.cuh includes it; a host-only program such as sgemm_checks.cpp
// can too): seeded random inputs and the comparison of an output with a
// float64 reference.
#ifndef DEV_CUDA_CHECKS_CUH
#define DEV_CUDA_CHECKS_CUH

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace dev {

// ---------------------------------------------------------------- inputs

// splitmix64: a small seeded generator, the same inputs on every machine.
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed) {}
    uint64_t next()
    {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    float uniform() { return (float)((next() >> 40) * (2.0 / 16777216.0) - 1.0); } // [-1, 1)
    int integer(int lo, int hi) { return lo + (int)(next() % (uint64_t)(hi - lo + 1)); }
};

// Two kinds of random input. INTEGER: small integers, so that every sum the
// kernels form is an integer below 2^24 and float32 computes it exactly in
// any order: the result must equal the reference bit for bit, and a single
// missing or repeated term shows. UNIFORM: floats in [-1, 1), checked to a
// tolerance relative to the sum of the absolute values of the terms.
enum class Fill { INTEGER, UNIFORM };

inline std::vector<float> random_vector(size_t n, Fill fill, uint64_t seed, int int_range = 3)
{
    Rng rng(seed);
    std::vector<float> v(n);
    for (auto &x : v)
        x = fill == Fill::INTEGER ? (float)rng.integer(-int_range, int_range) : rng.uniform();
    return v;
}

// ---------------------------------------------------------------- checks

// The stated tolerances: integer inputs exactly, uniform inputs to REL_TOL
// relative to the sum of |terms| (a check may hold an output to another
// relative tolerance: Errors::tol).
constexpr double REL_TOL = 1e-5;

// The largest errors of out against ref: abs = |out - ref|, rel = abs over
// scale (the sum of the absolute values of the terms that make each output,
// which bounds float32's rounding error by (terms) * 6e-8; seen: below
// 3e-7).
struct Errors {
    double abs = 0.0, rel = 0.0;
    size_t bad_at = SIZE_MAX; // first element that is not finite (or the run failed), or SIZE_MAX
    size_t mismatches = 0;    // integer outputs (max pooling's argmax) that differ
    double tol = REL_TOL;     // the largest rel allowed on uniform inputs
    std::string failure;      // a check of the program's own that failed (empty: none)
};

inline Errors compare(const std::vector<float> &out, const std::vector<double> &ref,
                      const std::vector<double> &scale)
{
    Errors e;
    for (size_t i = 0; i < ref.size(); ++i) {
        const double o = out[i];
        if (!std::isfinite(o)) {
            if (e.bad_at == SIZE_MAX) e.bad_at = i;
            continue;
        }
        const double d = std::fabs(o - ref[i]);
        e.abs = std::max(e.abs, d);
        e.rel = std::max(e.rel, d / std::max(scale[i], 1e-30));
    }
    return e;
}

inline bool passes(Fill fill, const Errors &e)
{
    if (e.bad_at != SIZE_MAX || e.mismatches || !e.failure.empty()) return false;
    return fill == Fill::INTEGER ? e.abs == 0.0 : e.rel <= e.tol;
}

} // namespace dev

#endif
