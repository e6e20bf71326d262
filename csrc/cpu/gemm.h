/* gemm.h: single-precision GEMM for the CPU engine.
 *
 * C (m, n) = alpha * op(A) op(B) + beta * C, all row-major, op(A) (m, k) and
 * op(B) (k, n); trans_a means A is stored (k, m), trans_b that B is (n, k).
 * Cache-blocked with packed panels; the micro-kernel is AVX2/FMA where the
 * CPU has it (chosen at run time) and portable C elsewhere. beta == 0 never
 * reads C (so C may hold NaN). */
#ifndef CNN_GEMM_H
#define CNN_GEMM_H

#include <stddef.h>

/* Scratch the panels are packed into, allocated once per context. */
typedef struct cnn_gemm_pack {
    float *a; /* cnn_gemm_pack_a_floats() floats, 64-byte aligned */
    float *b; /* cnn_gemm_pack_b_floats() floats, 64-byte aligned */
} cnn_gemm_pack;

size_t cnn_gemm_pack_a_floats(void);
size_t cnn_gemm_pack_b_floats(void);

void cnn_sgemm(const cnn_gemm_pack *pack, int trans_a, int trans_b, int m, int n, int k,
               float alpha, const float *a, int lda, const float *b, int ldb, float beta,
               float *c, int ldc);

/* The micro-kernel in use: CNN_GEMM_PORTABLE, CNN_GEMM_AVX2 or
 * CNN_GEMM_AVX512 (AVX2 and AVX-512 give the same bits, both fusing each
 * multiply-add; portable C rounds the product first, so its bits differ). The first call picks
 * AVX-512 on an Intel CPU with AVX-512F (cnn_gemm_avx512_preferred), else
 * AVX2 where the CPU has AVX2 and FMA, else portable C; the environment
 * variable CNNCUDA_GEMM=portable|avx2|avx512 overrides the choice where the
 * CPU can run it. */
enum { CNN_GEMM_PORTABLE = 0, CNN_GEMM_AVX2 = 1, CNN_GEMM_AVX512 = 2 };
int cnn_gemm_path(void);
/* Forces a path (for tests and benchmarks); returns 0 on success, -1 when the
 * CPU cannot run it. */
int cnn_gemm_set_path(int path);
/* Whether this CPU can run the AVX2 path, the AVX-512 path. */
int cnn_gemm_avx2_supported(void);
int cnn_gemm_avx512_supported(void);
/* Whether AVX-512 is this CPU's default path (Intel with AVX-512F). */
int cnn_gemm_avx512_preferred(void);

#endif
