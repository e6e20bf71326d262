// sgemm_reference.cuh: the host side of sgemm.cu, with no CUDA in it, so
// that sgemm_checks.cpp (a host-only program) puts emulated kernels, right
// and deliberately wrong, through the very checks the GPU versions get: the
// shapes, the float64 reference, TF32's rounding, and the check of an output
// at float32 or at TF32 precision.
#ifndef DEV_CUDA_SGEMM_REFERENCE_CUH
#define DEV_CUDA_SGEMM_REFERENCE_CUH

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "checks.cuh"

namespace dev {
namespace sgemm {

// C (m, n) = alpha op(A) op(B) + beta C, row-major; op(A) is (m, k), op(B)
// (k, n); ta: A stored (k, m), tb: B stored (n, k).
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
inline std::vector<Shape> seed_shapes()
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

// conv2 of the seed network at batch 512 (NP = 512*13*13 = 86528), its three
// products: 1.6e9 multiply-adds each, above the engine's 2^27 threshold, so
// the engine runs them on its wide kernel (on TF32 tensor cores with
// precision "tf32"). Timed apart from the batch-32 total.
inline std::vector<Shape> large_shapes()
{
    return {
        {"b512 conv2 forward W(64,288) col(288,86528)", false, false, 64, 86528, 288, 1, 0, 0},
        {"b512 conv2 dW t(64,86528) col^T", false, true, 64, 288, 86528, 1, 0, 0},
        {"b512 conv2 dcol W^T(288,64) t(64,86528)", true, false, 288, 86528, 64, 1, 0, 0},
        // the first convolution's two products (K = 27; dW 32 x 27)
        {"b512 conv1 forward W(32,27) col(27,460800)", false, false, 32, 460800, 27, 1, 0, 0},
        {"b512 conv1 dW t(32,460800) col^T", false, true, 32, 27, 460800, 1, 0, 0},
    };
}

// Odd sizes, every transpose: edges of tiles, k shorter and longer than a
// tile, split-K with a ragged last slice, alpha and beta, padded rows.
inline std::vector<Shape> odd_shapes()
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

inline std::string describe(const Shape &s)
{
    char buf[160];
    snprintf(buf, sizeof buf, "%s %s%s m=%d n=%d k=%d", s.label.c_str(), s.ta ? "T" : "N",
             s.tb ? "T" : "N", s.m, s.n, s.k);
    return buf;
}

// The stored sizes of a shape's operands: leading dimensions and elements.
struct Layout {
    int lda, ldb, ldc;
    size_t a_size, b_size, c_size;
    explicit Layout(const Shape &s)
        : lda((s.ta ? s.m : s.k) + s.pad), ldb((s.tb ? s.k : s.n) + s.pad), ldc(s.n + s.pad),
          a_size((size_t)(s.ta ? s.k : s.m) * lda), b_size((size_t)(s.tb ? s.n : s.k) * ldb),
          c_size((size_t)s.m * ldc)
    {
    }
};

// ---------------------------------------------------------------- TF32

// x rounded to TF32 (10 bits of mantissa, fp32's exponent), to nearest with
// ties away from zero: PTX's cvt.rna.tf32.f32, which the engine's TF32
// kernel applies to every operand before its mma.sync (the 13 low bits zero).
inline float round_tf32(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u) return x; // inf, NaN
    u = (u + 0x1000u) & 0xffffe000u;                 // the magnitude's bits; the sign stays
    memcpy(&x, &u, sizeof x);
    return x;
}

// The tolerance of a TF32 product, relative to the sum of |terms| (scale).
// Each operand rounded to TF32 is x (1 + d), |d| <= u = 2^-11 (11 significant
// bits, to nearest), and the product of two such, 22 significant bits, is
// exact in fp32, so a term a b becomes a b (1 + da)(1 + db), off by at most
// |a b| (2u + u^2); over an output, at most |alpha| (2u + u^2) sum_k |a_ik||b_kj|.
// The sums of the rounded terms are then fp32's, held to the float32
// versions' REL_TOL relative to their own sum of |terms|, which is at most
// (1 + u)^2 times scale. So |out - ref| <= TF32_REL_TOL * scale, with scale
// = |alpha| sum_k |a_ik||b_kj| + |beta c| as for every version. The first
// part is a worst-case bound (every term rounded the most, all one way); the
// second is the program's float32 tolerance (seen: float32 sums under 3e-7).
constexpr double TF32_U = 1.0 / 2048.0;
constexpr double TF32_REL_TOL = 2 * TF32_U + TF32_U * TF32_U + REL_TOL * (1 + TF32_U) * (1 + TF32_U);

// ---------------------------------------------------------------- the reference

// ref = alpha op(A) op(B) + beta C in float64 (C's padding unchanged),
// scale = the same sum over absolute values, and, when asked (tf32), ref_t:
// ref with every element of A and B rounded to TF32 first: what a TF32 kernel
// computes, but for its float32 sums.
struct Reference {
    std::vector<double> ref, scale, ref_t;
};

inline Reference reference(const Shape &s, const Layout &L, const std::vector<float> &a,
                           const std::vector<float> &b, const std::vector<float> &c0, bool tf32)
{
    const int m = s.m, n = s.n, k = s.k;
    // op(A) transposed, (k, m), and op(B), (k, n), as float (exact); with TF32 rounded copies
    std::vector<float> at((size_t)k * m), opb((size_t)k * n), at_t, opb_t;
    for (int kk = 0; kk < k; ++kk) {
        for (int i = 0; i < m; ++i)
            at[(size_t)kk * m + i] = s.ta ? a[(size_t)kk * L.lda + i] : a[(size_t)i * L.lda + kk];
        for (int j = 0; j < n; ++j)
            opb[(size_t)kk * n + j] = s.tb ? b[(size_t)j * L.ldb + kk] : b[(size_t)kk * L.ldb + j];
    }
    if (tf32) {
        at_t = at;
        opb_t = opb;
        for (float &x : at_t) x = round_tf32(x);
        for (float &x : opb_t) x = round_tf32(x);
    }
    Reference r;
    r.ref.assign(L.c_size, 0.0);
    r.scale.assign(L.c_size, 0.0);
    if (tf32) r.ref_t.assign(L.c_size, 0.0);
    // blocks of IB rows by JB columns, each summed over k in order (the
    // same sums as one output at a time), on every core; each block writes
    // only its own outputs, so the result does not depend on the threads
    constexpr int IB = 16, JB = 256;
    const int row_blocks = (m + IB - 1) / IB, col_blocks = (n + JB - 1) / JB;
    const size_t tasks = (size_t)row_blocks * col_blocks;
    std::atomic<size_t> next{0};
    auto work = [&] {
        std::vector<double> acc(IB * JB), acc_abs(IB * JB), acc_t(tf32 ? IB * JB : 0);
        for (size_t t; (t = next++) < tasks;) {
            const int i0 = (int)(t / col_blocks) * IB, j0 = (int)(t % col_blocks) * JB;
            const int ib = std::min(IB, m - i0), jb = std::min(JB, n - j0);
            std::fill(acc.begin(), acc.end(), 0.0);
            std::fill(acc_abs.begin(), acc_abs.end(), 0.0);
            std::fill(acc_t.begin(), acc_t.end(), 0.0);
            for (int kk = 0; kk < k; ++kk) {
                const float *brow = &opb[(size_t)kk * n + j0];
                for (int ii = 0; ii < ib; ++ii) {
                    const double av = at[(size_t)kk * m + i0 + ii];
                    double *ac = &acc[(size_t)ii * JB], *ab = &acc_abs[(size_t)ii * JB];
                    for (int j = 0; j < jb; ++j) {
                        const double p = av * (double)brow[j];
                        ac[j] += p;
                        ab[j] += std::fabs(p);
                    }
                }
                if (!tf32) continue;
                const float *brow_t = &opb_t[(size_t)kk * n + j0];
                for (int ii = 0; ii < ib; ++ii) {
                    const double av = at_t[(size_t)kk * m + i0 + ii];
                    double *ac = &acc_t[(size_t)ii * JB];
                    for (int j = 0; j < jb; ++j) ac[j] += av * (double)brow_t[j];
                }
            }
            for (int ii = 0; ii < ib; ++ii)
                for (int j = 0; j < jb; ++j) {
                    const size_t o = (size_t)(i0 + ii) * L.ldc + j0 + j, q = (size_t)ii * JB + j;
                    const double cb = s.beta == 0.0f ? 0.0 : (double)s.beta * c0[o];
                    r.ref[o] = s.alpha * acc[q] + cb;
                    r.scale[o] = std::fabs(s.alpha) * acc_abs[q] + std::fabs(cb);
                    if (tf32) r.ref_t[o] = s.alpha * acc_t[q] + cb;
                }
        }
    };
    const size_t cores = std::max(1u, std::thread::hardware_concurrency());
    const size_t workers = std::min({cores, tasks, (size_t)32});
    std::vector<std::thread> pool;
    for (size_t w = 1; w < workers; ++w) pool.emplace_back(work);
    work();
    for (std::thread &th : pool) th.join();
    // padding: must stay as it was
    for (int i = 0; i < m; ++i)
        for (int j = n; j < L.ldc; ++j) {
            const size_t o = (size_t)i * L.ldc + j;
            r.ref[o] = c0[o];
            r.scale[o] = std::fabs(c0[o]);
            if (tf32) r.ref_t[o] = c0[o];
        }
    return r;
}

// ---------------------------------------------------------------- the check

// What a version computes in: float32 operands, or operands rounded to TF32
// (sums in float32 either way).
enum class Precision { FP32, TF32 };

// The share of TF32's operand rounding in out's error: the least-squares
// coefficient of out - ref on ref_t - ref (the error that rounding the
// operands to TF32, and nothing else, makes). About 1 when the operands were
// rounded to TF32 (what is left is the float32 sums' rounding, unrelated to
// it and some 10-100 times smaller per output even at k = 86528), about 0
// when they were not (a float32 kernel: |share| under 1e-2). NaN where the
// rounding changes nothing (integer inputs, which TF32 holds exactly).
inline double tf32_share(const std::vector<float> &out, const Reference &r)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < r.ref_t.size(); ++i) {
        const double d = r.ref_t[i] - r.ref[i];
        num += ((double)out[i] - r.ref[i]) * d;
        den += d * d;
    }
    return den > 0.0 ? num / den : NAN;
}

struct Checked {
    Errors e;
    double share = NAN; // tf32_share on uniform inputs with a finite output
};

// The check of one output: integer inputs exactly (TF32 holds the small
// integers exactly, and the float32 sums stay exact below 2^24), uniform
// inputs to REL_TOL (FP32) or TF32_REL_TOL (TF32) relative to the sum of
// |terms|, and on uniform inputs the precision seen must be the one expected:
// share > 0.5 for TF32 (the tensor cores were used), below it for FP32.
inline Checked check_output(const std::vector<float> &out, const Reference &r, Fill fill,
                            Precision p)
{
    Checked c;
    c.e = compare(out, r.ref, r.scale);
    c.e.tol = p == Precision::TF32 ? TF32_REL_TOL : REL_TOL;
    if (fill != Fill::UNIFORM || c.e.bad_at != SIZE_MAX || r.ref_t.empty()) return c;
    c.share = tf32_share(out, r);
    if (!std::isfinite(c.share)) return c;
    const bool tf32_seen = c.share > 0.5;
    if (tf32_seen != (p == Precision::TF32)) {
        char buf[200];
        snprintf(buf, sizeof buf,
                 "expected %s operands, but the error is %.3g times TF32's rounding (TF32: ~1, "
                 "float32: ~0)",
                 p == Precision::TF32 ? "TF32" : "float32", c.share);
        c.e.failure = buf;
    }
    return c;
}

} // namespace sgemm
} // namespace dev

#endif
