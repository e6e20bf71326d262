/* gemm.c: cache-blocked single-precision GEMM for the CPU engine.
 *
 * C (m, n) = alpha * op(A) (m, k) op(B) (k, n) + beta * C, row-major.
 *
 * Blocking (Goto / BLIS); each dimension is cut into the fewest blocks of at
 * most NC / KC / MC, made as even as possible (block_step):
 *
 *   for jc over n, step <= NC                    columns of C and op(B)
 *     for pc over k, step <= KC                  the shared dimension
 *       pack op(B)[pc:+kc, jc:+nc] -> pack->b    as NR-column strips, (kc, NR) each
 *       for ic over m, step <= MC
 *         pack op(A)[ic:+mc, pc:+kc] -> pack->a  as row strips of <= MR rows, (kc, MR) each
 *         for jr over the B strips               a B strip (kc x NR, 16 KiB) stays in L1
 *           for ir over the A strips             the A block (MC x KC, 144 KiB) stays in L2
 *             micro-kernel: C tile (rows, NR) = alpha * A strip * B strip + beta' * C tile
 *
 * beta' is the caller's beta on the first pc step and 1 afterwards. Packing
 * resolves the transposes and zero-pads, so every strip has the same layout
 * (MR values per p for A, NR for B). A strips are MR rows except at the
 * bottom of a block, where strip_rows() splits the rest so that no row is
 * padded; the micro-kernel takes the strip's row count. A tile that sticks
 * out of the right edge of C is computed into a local buffer and only its
 * valid columns are merged into C.
 *
 * Three paths share that packing format, picked at run time (cnn_gemm_path):
 * AVX2/FMA, whose kernel keeps the 6 x 16 tile in 12 ymm accumulators and
 * whose transposing packs use 8x8 register transposes, all compiled through
 * target attributes so the file needs no -mavx2; AVX-512, the same tile in
 * 6 zmm with the AVX2 packs (the default on Intel CPUs with AVX-512F); and
 * portable C, plain loops for the compiler to vectorize.
 */
#include "gemm.h"

#include "../switches.h"

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

/* The step that cuts `total` into the fewest blocks of at most `max_block`,
 * as even as a step that is a multiple of `multiple` allows: k = 288 is cut
 * 144 + 144 rather than 256 + 32. max_block is a multiple of `multiple`. */
static int block_step(int total, int max_block, int multiple)
{
    int blocks = (total + max_block - 1) / max_block;
    int step = (total + blocks - 1) / blocks;
    step = (step + multiple - 1) / multiple * multiple;
    return min_int(step, max_block);
}

/* ------------------------------------------------------------ row strips */

/* Rows of the next A strip when `remaining` rows of the block are left: MR,
 * except that a remainder of 1..3 rows after a full strip is shared out
 * (7 = 4 + 3, 8 = 4 + 4, 9 = 5 + 4), because the AVX2 kernel runs at full
 * rate from 4 rows up. m = 32 thus becomes 6+6+6+6+4+4 with no padded rows.
 * The strip count never exceeds ceil(rows / MR). */
static int strip_rows(int remaining)
{
    if (remaining > MR && remaining < MR + 4) return (remaining + 1) / 2;
    return remaining < MR ? remaining : MR;
}

/* ---------------------------------------------------------------- packing */

/* Packs op(A)[0:mc, 0:kc] into row strips of strip_rows() rows. `a` points
 * at op(A)'s (0, 0): A is stored (mc, kc) with row stride lda, or (kc, mc)
 * when trans_a. The strip starting at row i0 is (kc, MR): op(A)(i0 + i, p) at
 * strip[p*MR + i], rows past the strip's own are zero; strips follow each
 * other every MR*kc floats. */
static void pack_a_portable(int trans_a, int mc, int kc, const float *a, ptrdiff_t lda,
                            float *packed)
{
    if (trans_a) {
        /* op(A)(i, p) = a[p*lda + i]: walk the stored rows in order, dealing
         * each one out across the strips. */
        for (int p = 0; p < kc; ++p) {
            const float *src = a + p * lda;
            float *dst = packed + p * MR;
            for (int i0 = 0, rows; i0 < mc; i0 += rows, dst += MR * kc) {
                rows = strip_rows(mc - i0);
                if (rows == MR) {
                    memcpy(dst, src + i0, MR * sizeof(float));
                } else {
                    int i = 0;
                    for (; i < rows; ++i) dst[i] = src[i0 + i];
                    for (; i < MR; ++i) dst[i] = 0.0f;
                }
            }
        }
        return;
    }
    /* op(A)(i, p) = a[i*lda + p] */
    for (int i0 = 0, rows; i0 < mc; i0 += rows, packed += MR * kc) {
        rows = strip_rows(mc - i0);
        for (int p = 0; p < kc; ++p) {
            float *dst = packed + p * MR;
            int i = 0;
            for (; i < rows; ++i) dst[i] = a[(i0 + i) * lda + p];
            for (; i < MR; ++i) dst[i] = 0.0f;
        }
    }
}

/* Packs op(B)[0:kc, 0:nc] into NR-column strips. `b` points at op(B)'s
 * (0, 0): B is stored (kc, nc) with row stride ldb, or (nc, kc) when trans_b.
 * Strip t is (kc, NR): op(B)(p, t*NR + j) at packed[t*NR*kc + p*NR + j];
 * columns past nc are zero. */
static void pack_b_portable(int trans_b, int kc, int nc, const float *b, ptrdiff_t ldb,
                            float *packed)
{
    for (int j0 = 0; j0 < nc; j0 += NR, packed += NR * kc) {
        int cols = min_int(NR, nc - j0);
        if (!trans_b && cols == NR) { /* a copy of NR floats per p */
            for (int p = 0; p < kc; ++p)
                memcpy(packed + p * NR, b + p * ldb + j0, NR * sizeof(float));
            continue;
        }
        for (int p = 0; p < kc; ++p) {
            float *dst = packed + p * NR;
            int j = 0;
            if (trans_b)
                for (; j < cols; ++j) dst[j] = b[(j0 + j) * ldb + p];
            else
                for (; j < cols; ++j) dst[j] = b[p * ldb + j0 + j];
            for (; j < NR; ++j) dst[j] = 0.0f;
        }
    }
}

#if GEMM_X86
/* rows[q] (q < 8) = column q of the 8x8 matrix whose row i was rows[i]. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
transpose8x8(__m256 rows[8])
{
    __m256 t0 = _mm256_unpacklo_ps(rows[0], rows[1]), t1 = _mm256_unpackhi_ps(rows[0], rows[1]);
    __m256 t2 = _mm256_unpacklo_ps(rows[2], rows[3]), t3 = _mm256_unpackhi_ps(rows[2], rows[3]);
    __m256 t4 = _mm256_unpacklo_ps(rows[4], rows[5]), t5 = _mm256_unpackhi_ps(rows[4], rows[5]);
    __m256 t6 = _mm256_unpacklo_ps(rows[6], rows[7]), t7 = _mm256_unpackhi_ps(rows[6], rows[7]);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    rows[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    rows[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    rows[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    rows[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    rows[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    rows[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    rows[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    rows[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* pack_a_portable for AVX2 machines: the non-transposed case, a transpose,
 * goes 8 columns at a time through 8x8 register transposes. */
__attribute__((target("avx2,fma"))) static void
pack_a_avx2(int trans_a, int mc, int kc, const float *a, ptrdiff_t lda, float *packed)
{
    if (trans_a) {
        pack_a_portable(trans_a, mc, kc, a, lda, packed);
        return;
    }
    for (int i0 = 0, rows; i0 < mc; i0 += rows, packed += MR * kc) {
        rows = strip_rows(mc - i0);
        const float *src = a + i0 * lda; /* (rows, kc), row stride lda */
        int p = 0;
        for (; p + 8 <= kc; p += 8) {
            __m256 v[8];
            for (int i = 0; i < 8; ++i)
                v[i] = i < rows ? _mm256_loadu_ps(src + i * lda + p) : _mm256_setzero_ps();
            transpose8x8(v); /* v[q] = op(A)(i0 + 0..7, p + q), lanes 6, 7 zero */
            /* 8-float stores 6 floats apart: each overwrites the previous
             * one's two spare lanes. The last of the strip stores 6 only. */
            for (int q = 0; q < 7; ++q) _mm256_storeu_ps(packed + (p + q) * MR, v[q]);
            float *last = packed + (p + 7) * MR;
            _mm_storeu_ps(last, _mm256_castps256_ps128(v[7]));
            _mm_storel_pi((__m64 *)(last + 4), _mm256_extractf128_ps(v[7], 1));
        }
        for (; p < kc; ++p) {
            float *dst = packed + p * MR;
            int i = 0;
            for (; i < rows; ++i) dst[i] = src[i * lda + p];
            for (; i < MR; ++i) dst[i] = 0.0f;
        }
    }
}

/* pack_b_portable for AVX2 machines: the transposed case goes through 8x8
 * register transposes, two per 8 values of p. */
__attribute__((target("avx2,fma"))) static void
pack_b_avx2(int trans_b, int kc, int nc, const float *b, ptrdiff_t ldb, float *packed)
{
    if (!trans_b) {
        pack_b_portable(trans_b, kc, nc, b, ldb, packed);
        return;
    }
    for (int j0 = 0; j0 < nc; j0 += NR, packed += NR * kc) {
        int cols = min_int(NR, nc - j0);
        const float *src = b + j0 * ldb; /* (cols, kc), row stride ldb */
        int p = 0;
        for (; p + 8 <= kc; p += 8) {
            for (int half = 0; half < NR; half += 8) {
                __m256 v[8];
                for (int j = 0; j < 8; ++j)
                    v[j] = half + j < cols ? _mm256_loadu_ps(src + (half + j) * ldb + p)
                                           : _mm256_setzero_ps();
                transpose8x8(v); /* v[q] = op(B)(p + q, j0 + half + 0..7) */
                for (int q = 0; q < 8; ++q) _mm256_store_ps(packed + (p + q) * NR + half, v[q]);
            }
        }
        for (; p < kc; ++p) {
            float *dst = packed + p * NR;
            int j = 0;
            for (; j < cols; ++j) dst[j] = src[j * ldb + p];
            for (; j < NR; ++j) dst[j] = 0.0f;
        }
    }
}
#endif

/* ----------------------------------------------------------- micro-kernels */

/* The first `rows` rows of the C tile (rows, NR), row stride ldc, become
 * alpha * a_strip (kc, MR) x b_strip (kc, NR) + beta * C tile, reading only
 * rows < `rows` of the A strip; beta == 0 does not read C. Row p of the B
 * strip is at b_strip + p*ldb: NR for a packed strip, B's own row stride when
 * the kernel reads op(B) where it lies (cnn_sgemm: unpacked B). */
typedef void micro_kernel(int rows, int kc, const float *a_strip, const float *b_strip,
                          ptrdiff_t ldb, float *c, ptrdiff_t ldc, float alpha, float beta);

static void kernel_portable(int rows, int kc, const float *restrict a_strip,
                            const float *restrict b_strip, ptrdiff_t ldb, float *restrict c,
                            ptrdiff_t ldc, float alpha, float beta)
{
    /* Two passes of MR x NR/2 keep the accumulators within 16 SSE registers;
     * all MR rows are computed (padded ones are zero), `rows` are stored. */
    enum { NH = NR / 2 };
    for (int half = 0; half < NR; half += NH) {
        float acc[MR][NH];
        for (int i = 0; i < MR; ++i)
            for (int j = 0; j < NH; ++j) acc[i][j] = 0.0f;
        const float *a = a_strip, *b = b_strip + half;
        for (int p = 0; p < kc; ++p, a += MR, b += ldb)
            for (int i = 0; i < MR; ++i)
                for (int j = 0; j < NH; ++j) acc[i][j] += a[i] * b[j];
        for (int i = 0; i < rows; ++i) {
            float *row = c + i * ldc + half;
            if (beta == 0.0f)
                for (int j = 0; j < NH; ++j) row[j] = alpha * acc[i][j];
            else
                for (int j = 0; j < NH; ++j) row[j] = alpha * acc[i][j] + beta * row[j];
        }
    }
}

#if GEMM_X86
/* Calls kernel_rows with `rows` as a constant (1..MR), so that each case is
 * the kernel compiled for that many rows. */
#define GEMM_ROWS_DISPATCH(kernel_rows)                                         \
    switch (rows) {                                                             \
    case 6: kernel_rows(6, kc, a_strip, b_strip, ldb, c, ldc, alpha, beta); break;    \
    case 5: kernel_rows(5, kc, a_strip, b_strip, ldb, c, ldc, alpha, beta); break;    \
    case 4: kernel_rows(4, kc, a_strip, b_strip, ldb, c, ldc, alpha, beta); break;    \
    case 3: kernel_rows(3, kc, a_strip, b_strip, ldb, c, ldc, alpha, beta); break;    \
    case 2: kernel_rows(2, kc, a_strip, b_strip, ldb, c, ldc, alpha, beta); break;    \
    default: kernel_rows(1, kc, a_strip, b_strip, ldb, c, ldc, alpha, beta); break;   \
    }

/* The AVX2 kernel for `rows` (1..MR) known at compile time, as every call in
 * kernel_avx2 is inlined with a constant: rows x 2 ymm accumulators,
 * acc<i>_lo / acc<i>_hi holding columns 0..7 / 8..15 of tile row i; the code
 * for rows at or past `rows` folds away. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
kernel_avx2_rows(const int rows, int kc, const float *restrict a, const float *restrict b,
                 ptrdiff_t ldb, float *restrict c, ptrdiff_t ldc, float alpha, float beta)
{
    __m256 acc0_lo = _mm256_setzero_ps(), acc0_hi = _mm256_setzero_ps();
    __m256 acc1_lo = _mm256_setzero_ps(), acc1_hi = _mm256_setzero_ps();
    __m256 acc2_lo = _mm256_setzero_ps(), acc2_hi = _mm256_setzero_ps();
    __m256 acc3_lo = _mm256_setzero_ps(), acc3_hi = _mm256_setzero_ps();
    __m256 acc4_lo = _mm256_setzero_ps(), acc4_hi = _mm256_setzero_ps();
    __m256 acc5_lo = _mm256_setzero_ps(), acc5_hi = _mm256_setzero_ps();

    for (int i = 0; i < rows; ++i) {
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + NR - 1), _MM_HINT_T0);
    }

#define GEMM_AVX2_FMA_ROW(i)                                       \
    if (rows > (i)) {                                              \
        __m256 a_i = _mm256_broadcast_ss(a + (i));                 \
        acc##i##_lo = _mm256_fmadd_ps(a_i, b_lo, acc##i##_lo);     \
        acc##i##_hi = _mm256_fmadd_ps(a_i, b_hi, acc##i##_hi);     \
    }
    for (int p = 0; p < kc; ++p, a += MR, b += ldb) {
        __m256 b_lo = _mm256_loadu_ps(b), b_hi = _mm256_loadu_ps(b + 8);
        GEMM_AVX2_FMA_ROW(0)
        GEMM_AVX2_FMA_ROW(1)
        GEMM_AVX2_FMA_ROW(2)
        GEMM_AVX2_FMA_ROW(3)
        GEMM_AVX2_FMA_ROW(4)
        GEMM_AVX2_FMA_ROW(5)
    }
#undef GEMM_AVX2_FMA_ROW

    __m256 alpha_v = _mm256_set1_ps(alpha), beta_v = _mm256_set1_ps(beta);
    int read_c = beta != 0.0f;
#define GEMM_AVX2_STORE_ROW(i)                                                   \
    if (rows > (i)) {                                                            \
        float *row = c + (i) * ldc;                                              \
        __m256 lo = _mm256_mul_ps(alpha_v, acc##i##_lo);                         \
        __m256 hi = _mm256_mul_ps(alpha_v, acc##i##_hi);                         \
        if (read_c) {                                                            \
            lo = _mm256_fmadd_ps(beta_v, _mm256_loadu_ps(row), lo);              \
            hi = _mm256_fmadd_ps(beta_v, _mm256_loadu_ps(row + 8), hi);          \
        }                                                                        \
        _mm256_storeu_ps(row, lo);                                               \
        _mm256_storeu_ps(row + 8, hi);                                           \
    }
    GEMM_AVX2_STORE_ROW(0)
    GEMM_AVX2_STORE_ROW(1)
    GEMM_AVX2_STORE_ROW(2)
    GEMM_AVX2_STORE_ROW(3)
    GEMM_AVX2_STORE_ROW(4)
    GEMM_AVX2_STORE_ROW(5)
#undef GEMM_AVX2_STORE_ROW
}

__attribute__((target("avx2,fma"))) static void
kernel_avx2(int rows, int kc, const float *restrict a_strip, const float *restrict b_strip,
            ptrdiff_t ldb, float *restrict c, ptrdiff_t ldc, float alpha, float beta)
{
    GEMM_ROWS_DISPATCH(kernel_avx2_rows);
}

/* The AVX-512 kernel: the same tile, packing and order of operations as the
 * AVX2 kernel (each C element is the same chain of fused multiply-adds over
 * p), so the two give the same bits; a row of the tile is one zmm instead of
 * two ymm, so each p costs half the instructions. */
__attribute__((target("avx512f"), always_inline)) static inline void
kernel_avx512_rows(const int rows, int kc, const float *restrict a, const float *restrict b,
                   ptrdiff_t ldb, float *restrict c, ptrdiff_t ldc, float alpha, float beta)
{
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), acc2 = _mm512_setzero_ps();
    __m512 acc3 = _mm512_setzero_ps(), acc4 = _mm512_setzero_ps(), acc5 = _mm512_setzero_ps();
    for (int i = 0; i < rows; ++i) _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);

#define GEMM_AVX512_FMA_ROW(i) \
    if (rows > (i)) acc##i = _mm512_fmadd_ps(_mm512_set1_ps(a[(i)]), b_row, acc##i);
    for (int p = 0; p < kc; ++p, a += MR, b += ldb) {
        __m512 b_row = _mm512_loadu_ps(b);
        GEMM_AVX512_FMA_ROW(0)
        GEMM_AVX512_FMA_ROW(1)
        GEMM_AVX512_FMA_ROW(2)
        GEMM_AVX512_FMA_ROW(3)
        GEMM_AVX512_FMA_ROW(4)
        GEMM_AVX512_FMA_ROW(5)
    }
#undef GEMM_AVX512_FMA_ROW

    __m512 alpha_v = _mm512_set1_ps(alpha), beta_v = _mm512_set1_ps(beta);
    int read_c = beta != 0.0f;
#define GEMM_AVX512_STORE_ROW(i)                                              \
    if (rows > (i)) {                                                         \
        float *row = c + (i) * ldc;                                           \
        __m512 v = _mm512_mul_ps(alpha_v, acc##i);                            \
        if (read_c) v = _mm512_fmadd_ps(beta_v, _mm512_loadu_ps(row), v);     \
        _mm512_storeu_ps(row, v);                                             \
    }
    GEMM_AVX512_STORE_ROW(0)
    GEMM_AVX512_STORE_ROW(1)
    GEMM_AVX512_STORE_ROW(2)
    GEMM_AVX512_STORE_ROW(3)
    GEMM_AVX512_STORE_ROW(4)
    GEMM_AVX512_STORE_ROW(5)
#undef GEMM_AVX512_STORE_ROW
}

__attribute__((target("avx512f"))) static void
kernel_avx512(int rows, int kc, const float *restrict a_strip, const float *restrict b_strip,
              ptrdiff_t ldb, float *restrict c, ptrdiff_t ldc, float alpha, float beta)
{
    GEMM_ROWS_DISPATCH(kernel_avx512_rows);
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

int cnn_gemm_avx512_supported(void)
{
#if GEMM_X86 && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    return cnn_gemm_avx2_supported() && __builtin_cpu_supports("avx512f");
#else
    return 0;
#endif
}

/* -1 until the first cnn_gemm_path(); picking is idempotent, so a race
 * between two first callers stores the same value. */
static int selected_path = -1;

/* Whether AVX-512 is the default: an Intel CPU with AVX-512F. On the
 * 16-core Xeon of the device pool the AVX-512 kernel made the CIFAR CNN's
 * cpu step 19% faster (BENCHMARKS.md); on AMD Zen 4, whose 512-bit
 * operations run as two halves, it was 9% slower, so AVX2 stays the default
 * there and everywhere else. */
int cnn_gemm_avx512_preferred(void)
{
#if GEMM_X86 && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    return cnn_gemm_avx512_supported() && __builtin_cpu_is("intel");
#else
    return 0;
#endif
}

/* The CPU's own choice: AVX-512 where it is preferred, else AVX2/FMA where
 * the CPU has it, else portable C. */
static int best_path(void)
{
    if (cnn_gemm_avx512_preferred()) return CNN_GEMM_AVX512;
    return cnn_gemm_avx2_supported() ? CNN_GEMM_AVX2 : CNN_GEMM_PORTABLE;
}

static int path_supported(int path)
{
    return path == CNN_GEMM_PORTABLE || (path == CNN_GEMM_AVX2 && cnn_gemm_avx2_supported()) ||
           (path == CNN_GEMM_AVX512 && cnn_gemm_avx512_supported());
}

int cnn_gemm_path(void)
{
    int path = selected_path;
    if (path < 0) {
        /* CNNCUDA_GEMM where this CPU can run it (a bad value or a path the
         * CPU lacks is refused when a cpu or omp context is made) */
        cnn_switches s;
        path = best_path();
        if (cnn_switches_read(&s) == CNN_OK && s.gemm >= 0 && path_supported(s.gemm))
            path = s.gemm;
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
    if (path == CNN_GEMM_AVX512 && cnn_gemm_avx512_supported()) {
        selected_path = CNN_GEMM_AVX512;
        return 0;
    }
    return -1;
}

/* The routines of one path; both share the packing format. */
typedef struct gemm_path_impl {
    micro_kernel *kernel;
    void (*pack_a)(int trans_a, int mc, int kc, const float *a, ptrdiff_t lda, float *packed);
    void (*pack_b)(int trans_b, int kc, int nc, const float *b, ptrdiff_t ldb, float *packed);
} gemm_path_impl;

static const gemm_path_impl portable_impl = {kernel_portable, pack_a_portable, pack_b_portable};
#if GEMM_X86
static const gemm_path_impl avx2_impl = {kernel_avx2, pack_a_avx2, pack_b_avx2};
static const gemm_path_impl avx512_impl = {kernel_avx512, pack_a_avx2, pack_b_avx2};
#endif

static const gemm_path_impl *selected_impl(void)
{
#if GEMM_X86
    int path = cnn_gemm_path();
    if (path == CNN_GEMM_AVX2) return &avx2_impl;
    if (path == CNN_GEMM_AVX512) return &avx512_impl;
#endif
    return &portable_impl;
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
 * beta * C, for tiles at the right edge of C. */
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

/* C block (mc, nc) = alpha * packed A block x op(B) block + beta * C block.
 * A strips follow strip_rows(), as packed. op(B)'s block is packed into
 * NR-column strips (ldb == 0), or read where it lies, row-major with row
 * stride ldb: then only a partial last strip is packed (into edge_b), as a
 * full-width read there would run past B's rows. */
static void macro_kernel(const gemm_path_impl *impl, int mc, int nc, int kc,
                         const float *packed_a, const float *b, ptrdiff_t ldb, float *edge_b,
                         float alpha, float beta, float *c, ptrdiff_t ldc)
{
    _Alignas(64) float edge_tile[MR * NR];
    for (int jr = 0; jr < nc; jr += NR) {
        int cols = min_int(NR, nc - jr);
        const float *b_strip = b + jr * kc; /* packed: (kc, NR) */
        ptrdiff_t b_step = NR;
        if (ldb != 0 && cols == NR) {
            b_strip = b + jr; /* in place: rows ldb apart */
            b_step = ldb;
        } else if (ldb != 0) {
            impl->pack_b(0, kc, cols, b + jr, ldb, edge_b);
            b_strip = edge_b;
        }
        const float *a_strip = packed_a; /* (kc, MR) */
        for (int ir = 0, rows; ir < mc; ir += rows, a_strip += MR * kc) {
            rows = strip_rows(mc - ir);
            float *c_tile = c + ir * ldc + jr;
            if (cols == NR) {
                impl->kernel(rows, kc, a_strip, b_strip, b_step, c_tile, ldc, alpha, beta);
            } else {
                impl->kernel(rows, kc, a_strip, b_strip, b_step, edge_tile, NR, 1.0f, 0.0f);
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
    const gemm_path_impl *impl = selected_impl();
    const ptrdiff_t lda_ = lda, ldb_ = ldb, ldc_ = ldc;

    const int nc_step = block_step(n, NC, NR), kc_step = block_step(k, KC, 1);
    const int mc_step = block_step(m, MC, MR);
    /* A non-transposed op(B) that one A block meets (m <= MC) is read in
     * place: packing would copy every element once to read it ceil(m / MR)
     * times, and the copy cost as much as the multiply-adds when m is a few
     * strips (a convolution's column matrix against 6..64 filters). The
     * products are the same, in the same order: the same bits. */
    const int in_place_b = !trans_b && m <= MC;
    for (int jc = 0; jc < n; jc += nc_step) {
        int nc = min_int(nc_step, n - jc);
        for (int pc = 0; pc < k; pc += kc_step) {
            int kc = min_int(kc_step, k - pc);
            /* op(B)(pc, jc) is b[pc*ldb + jc], or b[jc*ldb + pc] when trans_b */
            const float *b_block = trans_b ? b + jc * ldb_ + pc : b + pc * ldb_ + jc;
            if (!in_place_b) impl->pack_b(trans_b, kc, nc, b_block, ldb_, pack->b);
            float beta_block = pc == 0 ? beta : 1.0f;
            for (int ic = 0; ic < m; ic += mc_step) {
                int mc = min_int(mc_step, m - ic);
                /* op(A)(ic, pc) is a[ic*lda + pc], or a[pc*lda + ic] when trans_a */
                const float *a_block = trans_a ? a + pc * lda_ + ic : a + ic * lda_ + pc;
                impl->pack_a(trans_a, mc, kc, a_block, lda_, pack->a);
                macro_kernel(impl, mc, nc, kc, pack->a, in_place_b ? b_block : pack->b,
                             in_place_b ? ldb_ : 0, pack->b, alpha, beta_block,
                             c + ic * ldc_ + jc, ldc_);
            }
        }
    }
}
