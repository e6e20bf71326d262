// gemm_product.h: what the host emulation's SGEMM checks share
// (gemm_shapes_check.cpp, gemm_mma_check.cpp): a product's shape and
// layouts, where its operands' and output's elements lie, and random
// operands. After check_common.h (its rng).
#ifndef EMU_GEMM_PRODUCT_H
#define EMU_GEMM_PRODUCT_H

#include <string>
#include <vector>

static std::vector<float> uniform(size_t count)
{
    std::vector<float> v(count);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto &e : v) e = u(rng);
    return v;
}

// A product's operands as stored: A (m, k) or (k, m); B (k, n) plain, or
// batched (n / p images of (k, p)), or (n, k) transposed; C (m, n) plain or
// batched (n / p images of (m, p)).
struct product {
    int m, n, k, ta, tb, ap, bp, cp;
    float alpha, beta;
    std::string str() const
    {
        char s[160];
        snprintf(s, sizeof s, "m%d n%d k%d ta%d tb%d ap%d bp%d cp%d alpha %g beta %g", m, n, k,
                 ta, tb, ap, bp, cp, alpha, beta);
        return s;
    }
    // the leading dimensions (a batched operand ignores its own: the engine
    // passes the plain layout's there too)
    int lda() const { return ta ? m : k; }
    int ldb() const { return tb ? k : n; }
    int ldc() const { return n; }
    float a_at(const std::vector<float> &a, int i, int kk) const
    {
        if (ap > 0) return a[((size_t)(kk / ap) * m + i) * ap + kk % ap];
        return ta ? a[(size_t)kk * m + i] : a[(size_t)i * k + kk];
    }
    float b_at(const std::vector<float> &b, int kk, int j) const
    {
        if (bp > 0) return b[((size_t)(j / bp) * k + kk) * bp + j % bp];
        return tb ? b[(size_t)j * k + kk] : b[(size_t)kk * n + j];
    }
    size_t c_index(int i, int j) const
    {
        return cp > 0 ? ((size_t)(j / cp) * m + i) * cp + j % cp : (size_t)i * n + j;
    }
};

#endif
