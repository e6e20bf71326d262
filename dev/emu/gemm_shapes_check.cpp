// gemm_shapes_check.cpp: a host emulation check of the SGEMM kernels that
// gemm.cu gives to products of unusual shape, run by run_gemm_shapes.sh:
//   short K  (cuda/gemm_short_kernels.cuh: K <= 32, one thread a column)
//            against the float32 wide kernel and the tile kernel on the same
//            product, bit for bit, with every extra it takes (A either way
//            round, B and C plain or batched, the bias by row or by column,
//            the ReLU, alpha, beta), and against float64 within float32's
//            rounding (so a fault shared by all three kernels shows too);
//   narrow   (gemm.cu's narrow_on_tile: n <= 32 on the tile kernel's 32
//            columns with the wide plan's slices of K) against the wide
//            kernel on the same slices: the partial tiles, or C where there
//            is one slice, bit for bit (A plain or batched, B either way);
//            with B transposed, also with the row sums (the column of ones:
//            a convolution's bias gradient) against float64, the n columns
//            keeping their bits;
//   wide row sums (gemm.cu's wide_row_sums_fit: the column of ones read
//            from B's row n) against the tile kernel's on the same slices,
//            bit for bit, and float64, the n columns keeping their bits.
// The wide kernel runs on each of its row tiles (32, 64, 128), so these also
// check its copies from every layout against two other kernels.
// Random odd sizes; every output starts as NaN; one row of A and one column
// of B hold values whose products round to -0 (the short kernel's last
// acc + 0, where the tiled kernels' chains run on past K, must show).
// Usage: gemm_shapes_check [random shapes] [seed]; exit 1 on a failure.
#include <cmath>

#include "check_common.h"
#include "gemm_product.h"
// the wide header first: run_gemm_shapes.sh's copy, its launch rewritten
// (the short header's own include of it is then skipped by its guard)
#include "gemm_wide_kernels.cuh"
#include "gemm_kernels.cuh"
#include "gemm_narrow_kernels.cuh"
#include "gemm_short_kernels.cuh"

using namespace cnn_gemm;

static void same_bits(const std::vector<float> &got, const std::vector<float> &want,
                      const std::string &what)
{
    ++checks;
    for (size_t i = 0; i < got.size(); ++i)
        if (!same(got[i], want[i])) {
            fail(what + ": element " + std::to_string(i) + " " + std::to_string(got[i]) +
                 " against " + std::to_string(want[i]));
            return;
        }
}

template <int BM, bool TA, bool TB>
static void wide(const product &p, int k_slice, int slices, const float *a, const float *b,
                 float *c, float *partial, WideExtra x)
{
    const int nc = x.row_sums ? p.n + 1 : p.n; // the column of ones, as gemm.cu
    dim3 grid((nc + WBN - 1) / WBN, (p.m + BM - 1) / BM, slices);
    EMU_LAUNCH((sgemm_wide<BM, TA, TB, CNN_PRECISION_FLOAT32>), grid,
               wide_threads(BM, CNN_PRECISION_FLOAT32), p.m, p.n, p.k, k_slice, p.alpha, a,
               p.lda(), b, p.ldb(), p.beta, c, p.ldc(), slices > 1 ? partial : nullptr, x);
}

template <int TBM, int TBN, bool TA, bool TB>
static void tile(const product &p, int k_slice, int slices, const float *a, const float *b,
                 float *c, float *partial, WideExtra x)
{
    const int nc = x.row_sums ? p.n + 1 : p.n;
    dim3 grid((nc + TBN - 1) / TBN, (p.m + TBM - 1) / TBM, slices);
    EMU_LAUNCH((sgemm_tile<TA, TB, TBM, TBN>), grid, (TBM / 4) * (TBN / 4), p.m, p.n, p.k,
               k_slice, p.alpha, a, p.lda(), b, p.ldb(), p.beta, c, p.ldc(),
               slices > 1 ? partial : nullptr, x);
}

// one slice: k rounded up to 16, as gemm.cu's plan_slices
static int one_slice(int k) { return (k + 15) / 16 * 16; }

static void check_short(const product &p)
{
    const size_t a_size = (size_t)p.m * p.k, c_size = (size_t)p.m * p.n;
    auto a = uniform(a_size), b = uniform((size_t)p.k * p.n), bias = uniform(std::max(p.m, p.n));
    // a row of A and a column of B whose products round to -0
    const int zi = irange(0, p.m - 1), zj = irange(0, p.n - 1);
    for (int kk = 0; kk < p.k; ++kk) {
        const float s = kk % 2 ? 1e-30f : -1e-30f;
        (p.ta ? a[(size_t)kk * p.m + zi] : a[(size_t)zi * p.k + kk]) = s;
        (p.bp > 0 ? b[((size_t)(zj / p.bp) * p.k + kk) * p.bp + zj % p.bp]
                  : b[(size_t)kk * p.n + zj]) = -s;
    }
    const auto c0 = uniform(c_size);
    for (int e = 0; e < 4; ++e) {
        WideExtra x = {};
        x.bp = p.bp;
        x.cp = p.cp;
        if (e >= 1) x.bias = bias.data();
        x.bias_columns = e == 2;
        x.relu = e == 3;
        const std::string name = p.str() + " extra " + std::to_string(e);
        std::vector<float> cs = c0, cw = c0, ct = c0;
        if (p.beta == 0.0f) cs.assign(c_size, NAN), cw.assign(c_size, NAN), ct.assign(c_size, NAN);
        const int ks = one_slice(p.k);
        // the rows in one block or in groups (gemm.cu cuts them where the
        // columns give too few blocks)
        const int rows = e % 2 ? p.m : std::max(1, p.m / 3);
        const dim3 grid((p.n + SHORT_THREADS - 1) / SHORT_THREADS, (p.m + rows - 1) / rows);
        if (p.ta) {
            EMU_LAUNCH((sgemm_short_k<true>), grid, SHORT_THREADS, p.m, p.n, p.k, rows, p.alpha, a.data(), p.lda(), b.data(),
                       p.ldb(), p.beta, cs.data(), p.ldc(), x);
            if (p.m > 35) wide<32, true, false>(p, ks, 1, a.data(), b.data(), cw.data(), nullptr, x);
            else wide<64, true, false>(p, ks, 1, a.data(), b.data(), cw.data(), nullptr, x);
            tile<32, 64, true, false>(p, ks, 1, a.data(), b.data(), ct.data(), nullptr, x);
        } else {
            EMU_LAUNCH((sgemm_short_k<false>), grid, SHORT_THREADS, p.m, p.n, p.k, rows, p.alpha, a.data(), p.lda(), b.data(),
                       p.ldb(), p.beta, cs.data(), p.ldc(), x);
            if (p.k == 27) { // the instance with k at compile time (gemm.cu's for k = 27)
                std::vector<float> c27 = p.beta == 0.0f ? std::vector<float>(c_size, NAN) : c0;
                EMU_LAUNCH((sgemm_short_k<false, 27>), grid, SHORT_THREADS, p.m, p.n, p.k, rows, p.alpha, a.data(),
                           p.lda(), b.data(), p.ldb(), p.beta, c27.data(), p.ldc(), x);
                same_bits(c27, cs, "short K, k = 27 at compile time, against k at run time " + name);
            }
            if (p.m > 50) wide<128, false, false>(p, ks, 1, a.data(), b.data(), cw.data(), nullptr, x);
            else if (p.m > 16) wide<64, false, false>(p, ks, 1, a.data(), b.data(), cw.data(), nullptr, x);
            else wide<32, false, false>(p, ks, 1, a.data(), b.data(), cw.data(), nullptr, x);
            tile<16, 32, false, false>(p, ks, 1, a.data(), b.data(), ct.data(), nullptr, x);
        }
        same_bits(cs, cw, "short K against the wide kernel " + name);
        same_bits(cs, ct, "short K against the tile kernel " + name);
        // float64: alpha sum + bias, ReLU, + beta c0
        ++checks;
        for (int i = 0; i < p.m; ++i)
            for (int j = 0; j < p.n; ++j) {
                double s = 0.0, mag = 0.0;
                for (int kk = 0; kk < p.k; ++kk) {
                    const double t = (double)p.a_at(a, i, kk) * p.b_at(b, kk, j);
                    s += t;
                    mag += fabs(t);
                }
                double v = p.alpha * s;
                if (x.bias) v += x.bias_columns ? bias[j] : bias[i];
                if (x.relu && v < 0.0) v = 0.0;
                const size_t o = p.c_index(i, j);
                if (p.beta != 0.0f) v += (double)p.beta * c0[o];
                const double tol = 1e-6 * (fabs(p.alpha) * mag + 1.0 + fabs(p.beta * c0[o]));
                if (!(fabs(cs[o] - v) <= tol)) {
                    fail("short K against float64 " + name + " at (" + std::to_string(i) + ", " +
                         std::to_string(j) + ")");
                    i = p.m;
                    break;
                }
            }
        // the -0 row and column: -0 only with nothing added after the sum
        if (!x.bias && p.beta == 0.0f && p.alpha > 0.0f && p.k % 16 != 0) {
            ++checks;
            if (std::signbit(cs[p.c_index(zi, zj)]))
                fail("short K: -0 kept where the tiled chains give +0 " + name);
        }
    }
}

// The wide kernel (A not transposed) on its bm-row tile.
template <bool TB>
static void wide_rows_of(int bm, const product &p, int k_slice, int slices, const float *a,
                         const float *b, float *c, float *partial, WideExtra x)
{
    if (bm == 32) wide<32, false, TB>(p, k_slice, slices, a, b, c, partial, x);
    else if (bm == 64) wide<64, false, TB>(p, k_slice, slices, a, b, c, partial, x);
    else wide<128, false, TB>(p, k_slice, slices, a, b, c, partial, x);
}

// The tile kernel on gemm.cu's narrow tile: 16, 32 or 64 rows by 32 columns.
template <bool TB>
static void narrow_tile(const product &p, int k_slice, int slices, const float *a,
                        const float *b, float *c, float *partial, WideExtra x)
{
    if (p.m <= 16) tile<16, 32, false, TB>(p, k_slice, slices, a, b, c, partial, x);
    else if (p.m <= 32) tile<32, 32, false, TB>(p, k_slice, slices, a, b, c, partial, x);
    else tile<64, 32, false, TB>(p, k_slice, slices, a, b, c, partial, x);
}

// the checks of the narrow kernel (a count that must not be 0)
static long long narrow_kernel_checks = 0;

// The narrow kernel's partial sums (gemm_narrow_kernels.cuh: B transposed,
// at most 32 x 32 outputs, more than one slice, 16-byte groups aligned), or
// false where gemm.cu would not launch it.
static bool narrow_slices(const product &p, int k_slice, int slices, const float *a,
                          const float *b, float *partial, WideExtra x)
{
    const int nc = x.row_sums ? p.n + 1 : p.n;
    if (!p.tb || p.m > NARROW_M || nc > NARROW_N || slices < 2 ||
        !narrow_slices_aligned(a, p.lda(), b, p.ldb(), x))
        return false;
    // B's rows 4 floats apart past k (NaN there), so that its leading
    // dimension is not k's
    const int ldb = p.k + 4;
    std::vector<float> bp((size_t)p.n * ldb, NAN);
    for (int j = 0; j < p.n; ++j)
        for (int kk = 0; kk < p.k; ++kk) bp[(size_t)j * ldb + kk] = b[(size_t)j * p.k + kk];
    EMU_LAUNCH(sgemm_narrow_slices, dim3(slices), NARROW_THREADS, p.m, p.n, p.k, k_slice, p.alpha,
               a, p.lda(), bp.data(), ldb, partial, x);
    return true;
}

// Whether got is alpha times the sum of op(A)'s row i over the slice of K
// from k0 (ks long), in float64, within float32's rounding of the sum's
// magnitude (a row sum: the column of ones' product).
static bool row_sum_close(const product &p, const std::vector<float> &a, int i, int k0, int ks,
                          float got)
{
    double want = 0.0, mag = 0.0;
    for (int kk = k0; kk < std::min(p.k, k0 + ks); ++kk) {
        want += p.alpha * (double)p.a_at(a, i, kk);
        mag += fabs(p.alpha * (double)p.a_at(a, i, kk));
    }
    return fabs(got - want) <= 1e-5 * mag + 1e-30;
}

static void check_narrow(const product &p)
{
    auto a = uniform((size_t)p.m * p.k), b = uniform((size_t)p.k * p.n);
    // a row of A and a column of B whose products round to -0 (the chains'
    // zeros past a slice's end turn a -0 sum into +0: the kernels must agree)
    const int zi = irange(0, p.m - 1), zj = irange(0, p.n - 1);
    for (int kk = 0; kk < p.k; ++kk) {
        const float v = kk % 2 ? 1e-30f : -1e-30f;
        (p.ap > 0 ? a[((size_t)(kk / p.ap) * p.m + zi) * p.ap + kk % p.ap]
                  : a[(size_t)zi * p.k + kk]) = v;
        (p.tb ? b[(size_t)zj * p.k + kk] : b[(size_t)kk * p.n + zj]) = -v;
    }
    for (int slices_wanted : {1, 2, 5}) {
        int ks = (p.k + slices_wanted - 1) / slices_wanted;
        ks = (ks + 15) / 16 * 16;
        const int slices = (p.k + ks - 1) / ks;
        const size_t out = slices > 1 ? (size_t)slices * p.m * p.n : (size_t)p.m * p.n;
        std::vector<float> cw((size_t)p.m * p.n, NAN), ct = cw, pw(out, NAN), pt(out, NAN);
        WideExtra x = {};
        x.ap = p.ap;
        const int bm = p.m <= 32 ? 32 : p.m <= 48 ? 64 : 128;
        const std::string name = p.str() + " slices " + std::to_string(slices);
        if (p.tb) {
            wide_rows_of<true>(bm, p, ks, slices, a.data(), b.data(), cw.data(), pw.data(), x);
            narrow_tile<true>(p, ks, slices, a.data(), b.data(), ct.data(), pt.data(), x);
        } else {
            wide_rows_of<false>(bm, p, ks, slices, a.data(), b.data(), cw.data(), pw.data(), x);
            narrow_tile<false>(p, ks, slices, a.data(), b.data(), ct.data(), pt.data(), x);
        }
        if (slices > 1) same_bits(pt, pw, "narrow partials " + name);
        else same_bits(ct, cw, "narrow " + name);
        std::vector<float> pn(out, NAN);
        if (narrow_slices(p, ks, slices, a.data(), b.data(), pn.data(), x)) {
            ++narrow_kernel_checks;
            same_bits(pn, pt, "narrow kernel against the tile kernel " + name);
        }
        if (!p.tb || p.n + 1 > 32) continue; // gemm.cu: n + 1 columns narrow
        // with the row sums (a convolution's bias gradient): the tile
        // kernel's column of ones after the n columns, which keep their bits
        const int nc = p.n + 1;
        std::vector<float> cr((size_t)p.m * p.n, NAN), sums(p.m, NAN),
            pr(slices > 1 ? (size_t)slices * p.m * nc : 0, NAN);
        x.row_sums = sums.data();
        // (n columns given: the kernel adds the column of ones)
        narrow_tile<true>(p, ks, slices, a.data(), b.data(), cr.data(), pr.data(), x);
        std::vector<float> prn(pr.size(), NAN);
        if (narrow_slices(p, ks, slices, a.data(), b.data(), prn.data(), x)) {
            ++narrow_kernel_checks;
            same_bits(prn, pr, "narrow kernel with row sums against the tile kernel " + name);
        }
        ++checks;
        bool ok = true;
        for (int z = 0; z < slices && ok; ++z)
            for (int i = 0; i < p.m && ok; ++i) {
                const float got = slices > 1 ? pr[((size_t)z * p.m + i) * nc + p.n] : sums[i];
                if (!row_sum_close(p, a, i, z * ks, ks, got)) ok = false;
                for (int j = 0; j < p.n && ok; ++j) {
                    const float w = slices > 1 ? pw[((size_t)z * p.m + i) * p.n + j] : cw[(size_t)i * p.n + j];
                    const float g = slices > 1 ? pr[((size_t)z * p.m + i) * nc + j] : cr[(size_t)i * p.n + j];
                    if (!same(w, g)) ok = false;
                }
            }
        if (!ok) fail("narrow with row sums " + name);
    }
}

// The wide kernel with B transposed on its bm-row tile, A either way round.
template <bool TA>
static void wide_tb(int bm, const product &p, int k_slice, int slices, const float *a,
                    const float *b, float *c, float *partial, WideExtra x)
{
    if (bm == 32) wide<32, TA, true>(p, k_slice, slices, a, b, c, partial, x);
    else if (bm == 64) wide<64, TA, true>(p, k_slice, slices, a, b, c, partial, x);
    else wide<128, TA, true>(p, k_slice, slices, a, b, c, partial, x);
}

// The wide kernel's row sums (gemm.cu's wide_row_sums_fit: not TF32, B
// transposed, n not a multiple of 128), the column of ones read from B's row
// n (conv2d.cu fills it): each slice's partial tile (n + 1 columns) or C and
// the sums against the tile kernel's (which makes its column of ones) on the
// same slices, bit for bit (the same fmaf chains in k order), the row sums
// against float64 too, and the n columns against the wide kernel's without
// the sums: their bits kept.
static void check_wide_sums(const product &p)
{
    auto a = uniform((size_t)p.m * p.k), b = uniform((size_t)p.k * p.n);
    const int nc = p.n + 1;
    std::vector<float> bo = b; // B (n, k) and its row of ones
    bo.resize((size_t)nc * p.k, 1.0f);
    for (int slices_wanted : {1, 3}) {
        int ks = (p.k + slices_wanted - 1) / slices_wanted;
        ks = (ks + 15) / 16 * 16;
        const int slices = (p.k + ks - 1) / ks;
        const size_t cells = (size_t)p.m * p.n;
        const size_t psize = slices > 1 ? (size_t)slices * p.m * nc : 0;
        for (int bm : {32, 64, 128}) {
            const std::string name =
                p.str() + " bm " + std::to_string(bm) + " slices " + std::to_string(slices);
            WideExtra x = {};
            x.ap = p.ap;
            // without the sums: the n columns' bits
            std::vector<float> c0(cells, NAN), p0(slices > 1 ? (size_t)slices * cells : 0, NAN);
            // with them: the wide kernel and the tile kernel
            std::vector<float> cw(cells, NAN), pw(psize, NAN), sw(p.m, NAN);
            std::vector<float> ct(cells, NAN), pt(psize, NAN), st(p.m, NAN);
            if (p.ta) wide_tb<true>(bm, p, ks, slices, a.data(), b.data(), c0.data(), p0.data(), x);
            else wide_tb<false>(bm, p, ks, slices, a.data(), b.data(), c0.data(), p0.data(), x);
            x.row_sums = sw.data();
            if (p.ta) wide_tb<true>(bm, p, ks, slices, a.data(), bo.data(), cw.data(), pw.data(), x);
            else wide_tb<false>(bm, p, ks, slices, a.data(), bo.data(), cw.data(), pw.data(), x);
            x.row_sums = st.data();
            if (p.ta) tile<64, 64, true, true>(p, ks, slices, a.data(), b.data(), ct.data(), pt.data(), x);
            else tile<64, 64, false, true>(p, ks, slices, a.data(), b.data(), ct.data(), pt.data(), x);
            if (slices > 1) {
                same_bits(pw, pt, "wide row sums' partials against the tile kernel " + name);
            } else {
                same_bits(cw, ct, "wide with row sums against the tile kernel " + name);
                same_bits(sw, st, "wide row sums against the tile kernel " + name);
                same_bits(cw, c0, "wide with row sums against without " + name);
            }
            ++checks;
            bool ok = true;
            for (int z = 0; z < slices && ok; ++z)
                for (int i = 0; i < p.m && ok; ++i) {
                    const float got = slices > 1 ? pw[((size_t)z * p.m + i) * nc + p.n] : sw[i];
                    if (!row_sum_close(p, a, i, z * ks, ks, got)) ok = false;
                    for (int j = 0; j < p.n && ok && slices > 1; ++j)
                        if (!same(p0[((size_t)z * p.m + i) * p.n + j],
                                  pw[((size_t)z * p.m + i) * nc + j]))
                            ok = false;
                }
            if (!ok) fail("wide row sums against float64, or the n columns' bits " + name);
        }
    }
}

int main(int argc, char **argv)
{
    const int shapes = argc > 1 ? atoi(argv[1]) : 40;
    rng.seed(argc > 2 ? atoll(argv[2]) : 7);
    // the seed CNN's conv1 forward at a batch of 1 (27 of K, 900 pixels, C
    // batched) and its filter gradient at a batch of 2
    check_short({32, 900, 27, 0, 0, 0, 900, 900, 1.0f, 0.0f});
    // k = 27 (the instance with k at compile time) at odd sizes: rows not a
    // multiple of 4, columns past the last block's, plain layouts, beta
    check_short({7, 301, 27, 0, 0, 0, 0, 0, 0.75f, 0.5f});
    check_short({33, 130, 27, 0, 0, 0, 13, 0, 1.0f, 0.0f});
    check_narrow({32, 27, 1800, 0, 1, 900, 0, 0, 1.0f, 0.0f});
    for (int s = 0; s < shapes; ++s) {
        product p = {};
        p.m = irange(1, 70);
        p.k = irange(1, 32);
        p.n = irange(1, 300);
        p.ta = irange(0, 1);
        if (irange(0, 1)) p.bp = irange(1, 40), p.n = p.bp * irange(1, 6);
        if (irange(0, 1)) p.cp = p.bp > 0 ? p.bp : irange(1, 40), p.n = p.n / p.cp * p.cp;
        if (p.n < 1) p.n = p.cp > 0 ? p.cp : 1;
        if (p.bp > 0 && p.n % p.bp) p.bp = 0;
        p.alpha = irange(0, 3) ? 1.0f : 0.75f;
        p.beta = irange(0, 2) ? 0.0f : 0.5f;
        check_short(p);

        product q = {};
        q.m = irange(1, 64);
        q.n = irange(1, 32);
        q.k = irange(1, 600);
        q.tb = irange(0, 1);
        if (irange(0, 1)) {
            q.ap = irange(1, 50);
            q.k = q.ap * irange(1, 12);
        }
        q.alpha = irange(0, 3) ? 1.0f : -1.5f;
        check_narrow(q);

        // one the narrow kernel takes: at most 32 x 32 outputs with the row
        // sums, B transposed, groups of four k aligned (A plain with k, or
        // batched with its plane, a multiple of 4)
        product r = {};
        r.m = irange(1, 32);
        r.n = irange(1, 31);
        r.tb = 1;
        r.k = 4 * irange(1, 200);
        if (irange(0, 1)) {
            r.ap = 4 * irange(1, 30);
            r.k = r.ap * irange(1, 10);
        }
        r.alpha = irange(0, 3) ? 1.0f : -1.5f;
        check_narrow(r);

        // the wide kernel's row sums: B transposed, n not a multiple of 128
        product w = {};
        w.m = irange(1, 140);
        do w.n = irange(1, 300); while (w.n % WBN == 0);
        w.tb = 1;
        w.ta = irange(0, 1);
        w.k = irange(1, 400);
        if (!w.ta && irange(0, 1)) {
            w.ap = irange(1, 60);
            w.k = w.ap * irange(1, 7);
        }
        w.alpha = irange(0, 3) ? 1.0f : -1.5f;
        check_wide_sums(w);
    }
    printf("gemm_shapes_check: %lld checks over %d shapes (%lld of the narrow kernel), %lld "
           "failed\n",
           checks, 4 * shapes + 2, narrow_kernel_checks, failures);
    if (narrow_kernel_checks == 0) fail("the narrow kernel never ran");
    return failures ? 1 : 0;
}
