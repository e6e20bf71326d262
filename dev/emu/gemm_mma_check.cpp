// gemm_mma_check.cpp: a host emulation check of the wide SGEMM's tensor-core
// instances (cuda/gemm_wide_kernels.cuh, precisions "tf32", "bf16" and
// "fp16": the mma.sync paths), run by run_gemm_mma.sh. The emulation's mma
// (emu.cpp) takes each lane's fragment registers as the PTX ISA lays them
// out, so the kernel's fragments, its rounding of the operands and its
// epilogue's pairs of columns are checked without a GPU.
//
// Each instance (row tile 32, 64 or 128; A and B either way round) on random
// odd shapes, every output starting as NaN with guards after it, against
// float64 sums of the operands rounded here the way the precision says
// (TF32: 10 bits of fraction, to nearest, ties away from zero; bfloat16: 7
// bits; float16: 10 bits, subnormals below 2^-14; both ties to even), within
// float32's rounding of the sum's magnitude per k step: an operand left
// unrounded (2^-9 to 2^-12 of each product) falls outside it, because A's
// values are positive, so that the rounding errors do not cancel. With the
// extras the engine passes: A, B or C batched (a convolution's NCHW
// tensors), B plain with 16-byte rows (the 64-row forward's four-column
// copies), the bias by row or by column, the ReLU, alpha, beta; several
// slices of K (the partial tiles); and, on the 16-bit instances with B
// transposed and n not a multiple of 128, the row sums read from B's row n
// of ones (gemm.cu's CNN_ROW_SUMS_READ_B: a convolution's bias gradient).
// Then each 16-bit product with A plain and B not batched again with B
// stored in 16 bits (the B16 instances: a convolution's column matrix),
// against B in float32 bit for bit, B's rows padded with NaNs and its last
// row ending where an unreadable page begins (a read past it crashes the
// check).
// Usage: gemm_mma_check [random shapes per instance] [seed]; exit 1 on a failure.
#include <cmath>
#include <sys/mman.h>
#include <unistd.h>

#include "check_common.h"
#include "gemm_product.h"
// run_gemm_mma.sh's copy of the wide header (its split-K sum launch rewritten)
#include "gemm_wide_kernels.cuh"

using namespace cnn_gemm;

// x rounded to `bits` bits of fraction in float64: ties away from zero
// (TF32) or to even; below 2^min_exp at 2^min_exp's spacing (subnormals)
static double round_to(float x, int bits, bool ties_away, int min_exp)
{
    if (x == 0.0f || !std::isfinite(x)) return x;
    int e;
    frexp((double)x, &e); // |x| in [2^(e-1), 2^e)
    const double unit = ldexp(1.0, std::max(e - 1, min_exp) - bits);
    const double q = (double)x / unit, fl = floor(q), rest = q - fl;
    double r;
    if (rest > 0.5) r = fl + 1.0;
    else if (rest < 0.5) r = fl;
    else if (ties_away) r = x > 0 ? fl + 1.0 : fl;
    else r = fmod(fl, 2.0) == 0.0 ? fl : fl + 1.0;
    return r * unit;
}

static double operand(float x, int prec)
{
    if (prec == CNN_PRECISION_TF32) return round_to(x, 10, true, -126);
    if (prec == CNN_PRECISION_BF16) return round_to(x, 7, false, -126);
    return round_to(x, 10, false, -14); // float16 (the check's values stay far below 65504)
}

static const char *prec_name(int prec)
{
    return prec == CNN_PRECISION_TF32 ? "tf32" : prec == CNN_PRECISION_BF16 ? "bf16" : "fp16";
}

template <int BM, bool TA, bool TB, int PREC, bool B16 = false>
static void launch(const product &p, int k_slice, int slices, const float *a,
                   const typename wide_b<B16>::type *b, int ldb, float *c, float *partial,
                   WideExtra x)
{
    const int nc = x.row_sums ? p.n + 1 : p.n;
    dim3 grid((nc + WBN - 1) / WBN, (p.m + BM - 1) / BM, slices);
    EMU_LAUNCH((sgemm_wide<BM, TA, TB, PREC, B16>), grid, wide_threads(BM, PREC), p.m, p.n, p.k,
               k_slice, p.alpha, a, p.lda(), b, ldb, p.beta, c, p.ldc(), partial, x);
}

// B (plain (k, n) or transposed (n, k), rows of `rows`, the row of ones
// included) in 16 bits as the precision rounds it, its rows padded to a
// multiple of 8 values with NaNs (read past the row's end: a NaN shows);
// *ld the padded row's length
template <int PREC>
static std::vector<unsigned short> in16(const std::vector<float> &b, int rows, int cols, int *ld)
{
    *ld = (cols + 7) / 8 * 8 + 8 * irange(0, 1);
    std::vector<unsigned short> h((size_t)rows * *ld, PREC == CNN_PRECISION_BF16 ? 0x7fc0 : 0x7e00);
    for (int r = 0; r < rows; ++r)
        for (int j = 0; j < cols; ++j) {
            const float v = b[(size_t)r * cols + j];
            h[(size_t)r * *ld + j] = PREC == CNN_PRECISION_BF16 ? emu_bfloat16_rn(v) : emu_float16_rn(v);
        }
    return h;
}

// A copy of v that ends where an unreadable page begins: a read past its
// last element stops the check (SIGSEGV), as a read past a buffer on the
// GPU would fault or read another's memory. (Reads past n inside a row
// stay unseen: they land in columns that are never stored.)
struct page_end {
    void *map = nullptr;
    size_t bytes = 0;
    unsigned short *data = nullptr;
    explicit page_end(const std::vector<unsigned short> &v)
    {
        const size_t page = (size_t)sysconf(_SC_PAGESIZE), used = v.size() * 2;
        const size_t pages = (used + page - 1) / page;
        bytes = (pages + 1) * page;
        map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (map == MAP_FAILED) abort();
        mprotect((char *)map + pages * page, page, PROT_NONE);
        data = (unsigned short *)((char *)map + pages * page - used); // 16-byte aligned: used is
        memcpy(data, v.data(), used);                                 // rows of 8k values
    }
    ~page_end() { munmap(map, bytes); }
};

static long long b16_checks = 0;

// the values a check draws: A positive (its rounding errors add up), B
// either sign; a few exact zeros in B's rows where it is batched
static std::vector<float> positive(size_t count)
{
    std::vector<float> v(count);
    std::uniform_real_distribution<float> u(0.25f, 1.0f);
    for (auto &e : v) e = u(rng);
    return v;
}

static long long row_sum_checks = 0, vec_copy_checks = 0;

template <int BM, bool TA, bool TB, int PREC>
static void check(product p, int extra)
{
    constexpr bool SIXTEEN = PREC != CNN_PRECISION_TF32;
    const auto a = positive((size_t)p.m * p.k);
    auto b = uniform((size_t)p.k * p.n);
    // the row sums (B transposed, 16-bit, n not a multiple of 128): B's row n holds ones
    const bool sums = SIXTEEN && TB && p.n % WBN != 0 && extra % 3 == 0;
    const int nc = sums ? p.n + 1 : p.n;
    if (sums) b.resize((size_t)nc * p.k, 1.0f);
    const auto bias = uniform(std::max(p.m, p.n));
    const auto c0 = uniform((size_t)p.m * p.n);
    // slices of K: one, or two to four (16-multiples, as gemm.cu's plan)
    int slices_wanted = extra % 2 ? 1 + irange(1, 3) : 1;
    int ks = (p.k + slices_wanted - 1) / slices_wanted;
    ks = (ks + 15) / 16 * 16;
    const int slices = (p.k + ks - 1) / ks;
    WideExtra x = {};
    x.ap = p.ap;
    x.bp = p.bp;
    x.cp = p.cp;
    // the bias and the ReLU with several slices too: the partial tiles must
    // hold alpha times the sums without them (the sum kernel adds them)
    if (extra % 4 >= 1) {
        x.bias = bias.data();
        x.bias_columns = extra % 4 == 2;
        x.relu = extra % 4 == 3 || extra % 5 == 0;
    }
    // C and the partial tiles 16-byte aligned in half of the checks (36
    // floats of guard: the float4 stores where the rows allow them), and not
    // in the others (37)
    const size_t cells = (size_t)p.m * p.n, guard = (extra / 2) % 2 ? 36 : 37;
    guarded<float> c(cells, guard, sentinel_f());
    if (p.beta != 0.0f) std::copy(c0.begin(), c0.end(), c.data());
    guarded<float> part(slices > 1 ? (size_t)slices * p.m * nc : 0, guard, sentinel_f());
    guarded<float> rs(sums ? p.m : 0, guard, sentinel_f());
    if (sums) x.row_sums = rs.data();
    const std::string name = std::string(prec_name(PREC)) + " bm " + std::to_string(BM) + " " +
                             p.str() + " slices " + std::to_string(slices) + " extra " +
                             std::to_string(extra) + (sums ? " row sums" : "") +
                             (x.bias ? (x.bias_columns ? " bias by column" : " bias") : "") +
                             (x.relu ? " relu" : "");
    launch<BM, TA, TB, PREC>(p, ks, slices, a.data(), b.data(), p.ldb(), c.data(),
                             slices > 1 ? part.data() : nullptr, x);
    if (!TA && !TB && BM == 64 && p.bp == 0 && p.ldb() % 4 == 0) ++vec_copy_checks;
    ++checks;
    // float64 of the rounded operands, slice by slice
    int bad = 0;
    std::string first;
    auto expect = [&](bool ok, const std::string &where) {
        if (ok) return;
        if (!bad++) first = where;
    };
    for (int z = 0; z < slices; ++z) {
        const int k0 = z * ks, k1 = std::min(p.k, k0 + ks);
        const int steps = (k1 - k0 + 15) / 16 * (PREC == CNN_PRECISION_TF32 ? 2 : 1);
        for (int i = 0; i < p.m; ++i) {
            for (int j = 0; j < nc; ++j) {
                double s = 0.0, mag = 0.0;
                for (int kk = k0; kk < k1; ++kk) {
                    const double bv = j < p.n ? operand(p.b_at(b, kk, j), PREC) : 1.0;
                    const double t = operand(p.a_at(a, i, kk), PREC) * bv;
                    s += t;
                    mag += fabs(t);
                }
                double want = p.alpha * s, scale = fabs(p.alpha) * mag;
                float got;
                if (slices > 1) {
                    got = part[((size_t)z * p.m + i) * nc + j];
                } else if (j == p.n) {
                    got = rs[i];
                } else {
                    if (x.bias) {
                        const double bv = x.bias_columns ? bias[j] : bias[i];
                        want += bv;
                        scale += fabs(bv);
                    }
                    if (x.relu && want < 0.0) want = 0.0;
                    if (p.beta != 0.0f) {
                        want += (double)p.beta * c0[p.c_index(i, j)];
                        scale += fabs(p.beta * c0[p.c_index(i, j)]);
                    }
                    got = c[p.c_index(i, j)];
                }
                // float32's rounding at each k step, the alpha, bias and beta
                const double tol = ldexp(1.0, -22) * (steps + 4) * scale + 1e-30;
                expect(fabs((double)got - want) <= tol,
                       "(" + std::to_string(z) + ", " + std::to_string(i) + ", " +
                           std::to_string(j) + ") " + std::to_string(got) + " against " +
                           std::to_string(want));
            }
        }
    }
    if (sums) ++row_sum_checks;
    if (slices == 1) {
        expect(guard_hits(c, sentinel_f()) == 0, "C's guards");
        expect(untouched(part, sentinel_f()), "the partial tiles (one slice)");
    } else {
        expect(guard_hits(part, sentinel_f()) == 0, "the partial tiles' guards");
        if (p.beta == 0.0f) expect(untouched(c, sentinel_f()), "C (several slices)");
    }
    if (sums && slices == 1) expect(guard_hits(rs, sentinel_f()) == 0, "the row sums' guards");
    if (sums && slices > 1) expect(untouched(rs, sentinel_f()), "the row sums (in the partial tiles)");
    if (bad) fail(name + ": " + std::to_string(bad) + " wrong, first at " + first);
    // B stored in 16 bits (A plain, B not batched): the bits of B in float32
    // rounded by the kernel, every output, guards included
    if constexpr (SIXTEEN && !TA) {
        if (p.bp == 0) {
            int ld;
            const page_end b16(TB ? in16<PREC>(b, nc, p.k, &ld) : in16<PREC>(b, p.k, p.n, &ld));
            guarded<float> c2(cells, guard, sentinel_f());
            if (p.beta != 0.0f) std::copy(c0.begin(), c0.end(), c2.data());
            guarded<float> part2(part.n, guard, sentinel_f()), rs2(rs.n, guard, sentinel_f());
            if (sums) x.row_sums = rs2.data();
            launch<BM, TA, TB, PREC, true>(p, ks, slices, a.data(), b16.data, ld, c2.data(),
                                           slices > 1 ? part2.data() : nullptr, x);
            ++checks;
            ++b16_checks;
            if (!std::equal(c2.v.begin(), c2.v.end(), c.v.begin(), same<float>))
                fail(name + ": B in 16 bits, C not B in float32's bits");
            if (!std::equal(part2.v.begin(), part2.v.end(), part.v.begin(), same<float>))
                fail(name + ": B in 16 bits, the partial tiles not B in float32's bits");
            if (!std::equal(rs2.v.begin(), rs2.v.end(), rs.v.begin(), same<float>))
                fail(name + ": B in 16 bits, the row sums not B in float32's bits");
        }
    }
}

// a random product for A and B the given way round: layouts as the engine's
static product draw(bool ta, bool tb)
{
    product p = {};
    p.ta = ta;
    p.tb = tb;
    p.m = irange(1, 150);
    p.n = irange(1, 300);
    p.k = irange(1, 200);
    if (!ta && irange(0, 2) == 0) { // A batched: a filter gradient's dy
        p.ap = irange(1, 60);
        p.k = p.ap * irange(1, 5);
    }
    if (!tb && irange(0, 2) == 0) { // B batched: a data gradient's dy
        p.bp = irange(1, 60);
        p.n = p.bp * irange(1, 5);
    }
    if (!ta && !tb && !p.bp && irange(0, 1)) p.n = (p.n + 3) / 4 * 4; // 16-byte rows of B
    if (irange(0, 2) == 0) { // C batched: a forward's y (n a multiple of its plane)
        p.cp = p.bp > 0 ? p.bp : irange(1, 60);
        p.n = std::max(1, p.n / p.cp) * p.cp;
        if (p.bp > 0 && p.n % p.bp) p.bp = 0;
    }
    p.alpha = irange(0, 3) ? 1.0f : -0.75f;
    p.beta = irange(0, 2) ? 0.0f : 0.5f;
    return p;
}

template <int BM, int PREC>
static void instance(int shapes)
{
    for (int s = 0; s < shapes; ++s) {
        check<BM, false, false, PREC>(draw(false, false), s);
        check<BM, true, false, PREC>(draw(true, false), s);
        check<BM, false, true, PREC>(draw(false, true), s);
        check<BM, true, true, PREC>(draw(true, true), s);
    }
}

template <int PREC>
static void precision(int shapes)
{
    instance<32, PREC>(shapes);
    instance<64, PREC>(shapes);
    instance<128, PREC>(shapes);
}

int main(int argc, char **argv)
{
    const int shapes = argc > 1 ? atoi(argv[1]) : 6;
    rng.seed(argc > 2 ? atoll(argv[2]) : 7);
    // the seed CNN's conv2 at a batch of 2 on each precision: forward
    // (64 x 338 x 288, C batched), data gradient (A^T, B batched), filter
    // gradient (dy batched, col^T, with the row sums)
    for (int prec : {CNN_PRECISION_TF32, CNN_PRECISION_BF16, CNN_PRECISION_FP16}) {
        const product fwd = {64, 338, 288, 0, 0, 0, 0, 169, 1.0f, 0.0f};
        const product dcol = {288, 338, 64, 1, 0, 0, 169, 0, 1.0f, 0.0f};
        const product dw = {64, 288, 338, 0, 1, 169, 0, 0, 1.0f, 0.0f};
        if (prec == CNN_PRECISION_TF32) {
            check<64, false, false, CNN_PRECISION_TF32>(fwd, 1);
            check<64, true, false, CNN_PRECISION_TF32>(dcol, 2);
            check<64, false, true, CNN_PRECISION_TF32>(dw, 3);
        } else if (prec == CNN_PRECISION_BF16) {
            check<64, false, false, CNN_PRECISION_BF16>(fwd, 1);
            check<64, true, false, CNN_PRECISION_BF16>(dcol, 2);
            check<64, false, true, CNN_PRECISION_BF16>(dw, 0);
        } else {
            check<64, false, false, CNN_PRECISION_FP16>(fwd, 1);
            check<64, true, false, CNN_PRECISION_FP16>(dcol, 2);
            check<64, false, true, CNN_PRECISION_FP16>(dw, 0);
        }
    }
    precision<CNN_PRECISION_TF32>(shapes);
    precision<CNN_PRECISION_BF16>(shapes);
    precision<CNN_PRECISION_FP16>(shapes);
    printf("gemm_mma_check: %lld checks (%lld with the row sums, %lld of the four-column "
           "copies, %lld with B in 16 bits), %lld failed\n",
           checks, row_sum_checks, vec_copy_checks, b16_checks, failures);
    if (!row_sum_checks) fail("no check with the row sums");
    if (!vec_copy_checks) fail("no check of the four-column copies");
    if (!b16_checks) fail("no check with B in 16 bits");
    return failures ? 1 : 0;
}
