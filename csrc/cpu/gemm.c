/* gemm.c: cache-blocked single-precision GEMM for the CPU engine.
 *
 * C (m, n) = alpha * op(A) (m, k) op(B) (k, n) + beta * C, row-major.
 *
 * Blocking (Goto / BLIS), with the block sizes below:
 *
 *   for jc over n, step NC                       columns of C and op(B)
 *     for pc over k, step KC                     the shared dimension
 *       pack op(B)[pc:+KC, jc:+NC] -> pack->b    as NR-column strips, (kc, NR) each
 *       for ic over m, step MC
 *         pack op(A)[ic:+MC, pc:+KC] -> pack->a  as MR-row strips, (kc, MR) each
 *         for jr over the B strips               a B strip (kc x NR, 16 KiB) stays in L1
 *           for ir over the A strips             the A block (MC x KC, 144 KiB) stays in L2
 *             micro-kernel: C tile (MR, NR) = alpha * A strip * B strip + beta' * C tile
 *
 * beta' is the caller's beta on the first pc step and 1 afterwards. Packing
 * resolves the transposes and zero-pads the last strips, so the micro-kernel
 * always computes a full MR x NR tile; a tile that sticks out of C is computed
 * into a local buffer and only its valid part is merged into C.
 *
 * Two micro-kernels share that packing format: an AVX2/FMA one (12 ymm
 * accumulators, 6 rows x 2 vectors of 8) compiled through a target attribute,
 * so the file needs no -mavx2, and a portable C one. cnn_gemm_path() picks
 * one at run time.
 */
#include "gemm.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define GEMM_X86 1
#include <immintrin.h>
#else
#define GEMM_X86 0
#endif

enum {
    MR = 6,    /* rows of a micro-tile (rows of an A strip) */
    NR = 16,   /* columns of a micro-tile (columns of a B strip): two ymm */
    KC = 256,  /* depth of a packed block */
    MC = 144,  /* rows of a packed A block, a multiple of MR */
    NC = 4096  /* columns of a packed B block, a multiple of NR */
};

size_t cnn_gemm_pack_a_floats(void) { return (size_t)MC * KC; }
size_t cnn_gemm_pack_b_floats(void) { return (size_t)KC * NC; }

static int min_int(int x, int y) { return x < y ? x : y; }

/* ---------------------------------------------------------------- packing */

/* Packs op(A)[0:mc, 0:kc] into MR-row strips. `a` points at op(A)'s (0, 0):
 * A is stored (mc, kc) with row stride lda, or (kc, mc) when trans_a.
 * Strip s holds op(A)(s*MR + i, p) at packed[s*MR*kc + p*MR + i]; rows past
 * mc are zero. */
static void pack_a(int trans_a, int mc, int kc, const float *a, ptrdiff_t lda, float *packed)
{
    for (int i0 = 0; i0 < mc; i0 += MR) {
        int rows = min_int(MR, mc - i0);
        if (trans_a) {
            for (int p = 0; p < kc; ++p) {
                const float *src = a + p * lda + i0; /* op(A)(i0.., p) contiguous */
                float *dst = packed + p * MR;
                int i = 0;
                for (; i < rows; ++i) dst[i] = src[i];
                for (; i < MR; ++i) dst[i] = 0.0f;
            }
        } else if (rows == MR) {
            const float *r0 = a + (ptrdiff_t)i0 * lda, *r1 = r0 + lda, *r2 = r1 + lda;
            const float *r3 = r2 + lda, *r4 = r3 + lda, *r5 = r4 + lda;
            for (int p = 0; p < kc; ++p) {
                float *dst = packed + p * MR;
                dst[0] = r0[p]; dst[1] = r1[p]; dst[2] = r2[p];
                dst[3] = r3[p]; dst[4] = r4[p]; dst[5] = r5[p];
            }
        } else {
            for (int p = 0; p < kc; ++p) {
                float *dst = packed + p * MR;
                int i = 0;
                for (; i < rows; ++i) dst[i] = a[(ptrdiff_t)(i0 + i) * lda + p];
                for (; i < MR; ++i) dst[i] = 0.0f;
            }
        }
        packed += MR * kc;
    }
}

/* Packs op(B)[0:kc, 0:nc] into NR-column strips. `b` points at op(B)'s
 * (0, 0): B is stored (kc, nc) with row stride ldb, or (nc, kc) when trans_b.
 * Strip t holds op(B)(p, t*NR + j) at packed[t*NR*kc + p*NR + j]; columns
 * past nc are zero. */
static void pack_b(int trans_b, int kc, int nc, const float *b, ptrdiff_t ldb, float *packed)
{
    for (int j0 = 0; j0 < nc; j0 += NR) {
        int cols = min_int(NR, nc - j0);
        if (!trans_b) {
            for (int p = 0; p < kc; ++p) {
                const float *src = b + p * ldb + j0; /* op(B)(p, j0..) contiguous */
                float *dst = packed + p * NR;
                int j = 0;
                if (cols == NR)
                    for (; j < NR; ++j) dst[j] = src[j];
                else
                    for (; j < cols; ++j) dst[j] = src[j];
                for (; j < NR; ++j) dst[j] = 0.0f;
            }
        } else {
            /* op(B)(p, j) = b[j*ldb + p]: read each stored row contiguously,
             * four columns at a time, scatter with stride NR into the strip. */
            int j = 0;
            for (; j + 4 <= cols; j += 4) {
                const float *s0 = b + (ptrdiff_t)(j0 + j) * ldb, *s1 = s0 + ldb;
                const float *s2 = s1 + ldb, *s3 = s2 + ldb;
                for (int p = 0; p < kc; ++p) {
                    float *dst = packed + p * NR + j;
                    dst[0] = s0[p]; dst[1] = s1[p]; dst[2] = s2[p]; dst[3] = s3[p];
                }
            }
            for (; j < cols; ++j) {
                const float *src = b + (ptrdiff_t)(j0 + j) * ldb;
                for (int p = 0; p < kc; ++p) packed[p * NR + j] = src[p];
            }
            if (cols < NR)
                for (int p = 0; p < kc; ++p)
                    for (int jj = cols; jj < NR; ++jj) packed[p * NR + jj] = 0.0f;
        }
        packed += NR * kc;
    }
}

/* ----------------------------------------------------------- micro-kernels */

/* C tile (MR, NR), row stride ldc = alpha * a_strip (kc, MR) x b_strip
 * (kc, NR) + beta * C tile; beta == 0 does not read C. */
typedef void micro_kernel(int kc, const float *a_strip, const float *b_strip, float *c,
                          ptrdiff_t ldc, float alpha, float beta);

static void kernel_portable(int kc, const float *restrict a_strip,
                            const float *restrict b_strip, float *restrict c, ptrdiff_t ldc,
                            float alpha, float beta)
{
    /* Two passes of MR x NR/2 keep the accumulators within 16 SSE registers. */
    enum { NH = NR / 2 };
    for (int half = 0; half < 2; ++half) {
        float acc[MR][NH];
        for (int i = 0; i < MR; ++i)
            for (int j = 0; j < NH; ++j) acc[i][j] = 0.0f;
        const float *a = a_strip, *b = b_strip + half * NH;
        for (int p = 0; p < kc; ++p, a += MR, b += NR)
            for (int i = 0; i < MR; ++i)
                for (int j = 0; j < NH; ++j) acc[i][j] += a[i] * b[j];
        float *ct = c + half * NH;
        for (int i = 0; i < MR; ++i) {
            float *row = ct + i * ldc;
            if (beta == 0.0f)
                for (int j = 0; j < NH; ++j) row[j] = alpha * acc[i][j];
            else
                for (int j = 0; j < NH; ++j) row[j] = alpha * acc[i][j] + beta * row[j];
        }
    }
}

#if GEMM_X86
__attribute__((target("avx2,fma"))) static void
kernel_avx2(int kc, const float *restrict a_strip, const float *restrict b_strip,
            float *restrict c, ptrdiff_t ldc, float alpha, float beta)
{
    /* acc_i_lo / acc_i_hi: columns 0..7 / 8..15 of tile row i */
    __m256 acc0_lo = _mm256_setzero_ps(), acc0_hi = _mm256_setzero_ps();
    __m256 acc1_lo = _mm256_setzero_ps(), acc1_hi = _mm256_setzero_ps();
    __m256 acc2_lo = _mm256_setzero_ps(), acc2_hi = _mm256_setzero_ps();
    __m256 acc3_lo = _mm256_setzero_ps(), acc3_hi = _mm256_setzero_ps();
    __m256 acc4_lo = _mm256_setzero_ps(), acc4_hi = _mm256_setzero_ps();
    __m256 acc5_lo = _mm256_setzero_ps(), acc5_hi = _mm256_setzero_ps();
    const float *a = a_strip, *b = b_strip;

    for (int i = 0; i < MR; ++i) _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
    for (int i = 0; i < MR; ++i) _mm_prefetch((const char *)(c + i * ldc + NR - 1), _MM_HINT_T0);

#define GEMM_AVX2_ROW(i)                                      \
    do {                                                      \
        __m256 a_i = _mm256_broadcast_ss(a + (i));            \
        acc##i##_lo = _mm256_fmadd_ps(a_i, b_lo, acc##i##_lo); \
        acc##i##_hi = _mm256_fmadd_ps(a_i, b_hi, acc##i##_hi); \
    } while (0)

    for (int p = 0; p < kc; ++p, a += MR, b += NR) {
        __m256 b_lo = _mm256_load_ps(b), b_hi = _mm256_load_ps(b + 8);
        GEMM_AVX2_ROW(0);
        GEMM_AVX2_ROW(1);
        GEMM_AVX2_ROW(2);
        GEMM_AVX2_ROW(3);
        GEMM_AVX2_ROW(4);
        GEMM_AVX2_ROW(5);
    }
#undef GEMM_AVX2_ROW

    __m256 alpha_v = _mm256_set1_ps(alpha);
    if (beta == 0.0f) {
#define GEMM_AVX2_STORE(i)                                                       \
    do {                                                                         \
        _mm256_storeu_ps(c + (i) * ldc, _mm256_mul_ps(alpha_v, acc##i##_lo));     \
        _mm256_storeu_ps(c + (i) * ldc + 8, _mm256_mul_ps(alpha_v, acc##i##_hi)); \
    } while (0)
        GEMM_AVX2_STORE(0); GEMM_AVX2_STORE(1); GEMM_AVX2_STORE(2);
        GEMM_AVX2_STORE(3); GEMM_AVX2_STORE(4); GEMM_AVX2_STORE(5);
#undef GEMM_AVX2_STORE
    } else {
        __m256 beta_v = _mm256_set1_ps(beta);
#define GEMM_AVX2_UPDATE(i)                                                     \
    do {                                                                        \
        float *row = c + (i) * ldc;                                             \
        __m256 lo = _mm256_mul_ps(beta_v, _mm256_loadu_ps(row));                \
        __m256 hi = _mm256_mul_ps(beta_v, _mm256_loadu_ps(row + 8));            \
        _mm256_storeu_ps(row, _mm256_fmadd_ps(alpha_v, acc##i##_lo, lo));       \
        _mm256_storeu_ps(row + 8, _mm256_fmadd_ps(alpha_v, acc##i##_hi, hi));   \
    } while (0)
        GEMM_AVX2_UPDATE(0); GEMM_AVX2_UPDATE(1); GEMM_AVX2_UPDATE(2);
        GEMM_AVX2_UPDATE(3); GEMM_AVX2_UPDATE(4); GEMM_AVX2_UPDATE(5);
#undef GEMM_AVX2_UPDATE
    }
}
#endif

/* --------------------------------------------------------------- dispatch */

int cnn_gemm_avx2_supported(void)
{
#if GEMM_X86 && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

/* -1 until the first cnn_gemm_path(); picking is idempotent, so a race
 * between two first callers stores the same value. */
static int selected_path = -1;

int cnn_gemm_path(void)
{
    int path = selected_path;
    if (path < 0) {
        const char *env = getenv("CNNCUDA_GEMM");
        int want_portable = env != NULL && strcmp(env, "portable") == 0;
        path = (!want_portable && cnn_gemm_avx2_supported()) ? CNN_GEMM_AVX2 : CNN_GEMM_PORTABLE;
        selected_path = path;
    }
    return path;
}

int cnn_gemm_set_path(int path)
{
    if (path == CNN_GEMM_PORTABLE) {
        selected_path = CNN_GEMM_PORTABLE;
        return 0;
    }
    if (path == CNN_GEMM_AVX2 && cnn_gemm_avx2_supported()) {
        selected_path = CNN_GEMM_AVX2;
        return 0;
    }
    return -1;
}

static micro_kernel *selected_kernel(void)
{
#if GEMM_X86
    if (cnn_gemm_path() == CNN_GEMM_AVX2) return kernel_avx2;
#endif
    return kernel_portable;
}

/* ------------------------------------------------------------------ driver */

/* C (m, n) *= beta; beta == 0 writes zeros without reading C. */
static void scale_c(int m, int n, float beta, float *c, ptrdiff_t ldc)
{
    if (beta == 1.0f) return;
    for (int i = 0; i < m; ++i) {
        float *row = c + i * ldc;
        if (beta == 0.0f)
            for (int j = 0; j < n; ++j) row[j] = 0.0f;
        else
            for (int j = 0; j < n; ++j) row[j] *= beta;
    }
}

/* The tile (rows, cols) of C = alpha * tile (rows, cols; row stride NR) +
 * beta * C, for tiles at the bottom or right edge of C. */
static void merge_edge_tile(int rows, int cols, const float *tile, float alpha, float beta,
                            float *c, ptrdiff_t ldc)
{
    for (int i = 0; i < rows; ++i) {
        float *row = c + i * ldc;
        const float *t = tile + i * NR;
        if (beta == 0.0f)
            for (int j = 0; j < cols; ++j) row[j] = alpha * t[j];
        else
            for (int j = 0; j < cols; ++j) row[j] = alpha * t[j] + beta * row[j];
    }
}

/* C block (mc, nc) = alpha * packed A block x packed B block + beta * C block. */
static void macro_kernel(micro_kernel *kernel, int mc, int nc, int kc, const float *packed_a,
                         const float *packed_b, float alpha, float beta, float *c,
                         ptrdiff_t ldc)
{
    _Alignas(64) float edge_tile[MR * NR];
    for (int jr = 0; jr < nc; jr += NR) {
        int cols = min_int(NR, nc - jr);
        const float *b_strip = packed_b + (ptrdiff_t)jr * kc; /* (kc, NR) */
        for (int ir = 0; ir < mc; ir += MR) {
            int rows = min_int(MR, mc - ir);
            const float *a_strip = packed_a + (ptrdiff_t)ir * kc; /* (kc, MR) */
            float *c_tile = c + ir * ldc + jr;
            if (rows == MR && cols == NR) {
                kernel(kc, a_strip, b_strip, c_tile, ldc, alpha, beta);
            } else {
                kernel(kc, a_strip, b_strip, edge_tile, NR, 1.0f, 0.0f);
                merge_edge_tile(rows, cols, edge_tile, alpha, beta, c_tile, ldc);
            }
        }
    }
}

void cnn_sgemm(const cnn_gemm_pack *pack, int trans_a, int trans_b, int m, int n, int k,
               float alpha, const float *a, int lda, const float *b, int ldb, float beta,
               float *c, int ldc)
{
    if (m <= 0 || n <= 0) return;
    if (k <= 0 || alpha == 0.0f) {
        scale_c(m, n, beta, c, ldc);
        return;
    }
    micro_kernel *kernel = selected_kernel();
    const ptrdiff_t lda_ = lda, ldb_ = ldb, ldc_ = ldc;

    for (int jc = 0; jc < n; jc += NC) {
        int nc = min_int(NC, n - jc);
        for (int pc = 0; pc < k; pc += KC) {
            int kc = min_int(KC, k - pc);
            /* op(B)(pc, jc) is b[pc*ldb + jc], or b[jc*ldb + pc] when trans_b */
            const float *b_block = trans_b ? b + jc * ldb_ + pc : b + pc * ldb_ + jc;
            pack_b(trans_b, kc, nc, b_block, ldb_, pack->b);
            float beta_block = pc == 0 ? beta : 1.0f;
            for (int ic = 0; ic < m; ic += MC) {
                int mc = min_int(MC, m - ic);
                const float *a_block = trans_a ? a + pc * lda_ + ic : a + ic * lda_ + pc;
                pack_a(trans_a, mc, kc, a_block, lda_, pack->a);
                macro_kernel(kernel, mc, nc, kc, pack->a, pack->b, alpha, beta_block,
                             c + ic * ldc_ + jc, ldc_);
            }
        }
    }
}
