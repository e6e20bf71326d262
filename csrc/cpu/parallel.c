/* parallel.c: the one parallel loop of the cpu kernels, the threaded GEMM,
 * and the context both CPU tables share.
 *
 * The loop is a plain `omp parallel for` over the parts, so a build without
 * OpenMP compiles it as a serial loop over the same ranges (the pragma is
 * ignored) and nothing here needs #ifdef: registry.c alone decides whether
 * the omp table is offered. */
#define _POSIX_C_SOURCE 200112L
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "gemm.h"
#include "../switches.h"

/* fork: libgomp's thread pool does not survive it. A child forked after the
 * parent entered a parallel region hangs in its first region (its pool's
 * threads do not exist there; what libgomp does then is undefined). So the
 * first region registers a fork handler, and in such a child every region
 * runs its parts one after another on the calling thread -- the same ranges
 * on the same slots, so the same bits (see backend_omp.c), on one thread. */
static volatile sig_atomic_t regions_entered, pool_lost;
static pthread_once_t fork_watch = PTHREAD_ONCE_INIT;

static void note_fork_in_child(void)
{
    if (regions_entered) pool_lost = 1;
}

static void watch_forks(void) { pthread_atfork(NULL, NULL, note_fork_in_child); }

int cnn_cpu_threads_lost_to_fork(void) { return pool_lost; }

/* The ranges of [0, count) cut into `parts`, on a team of `team` >= parts
 * threads: iteration t is range t on slot t (thread t), and threads past
 * `parts` only join the region. A team smaller than asked (nested regions,
 * thread limits) only serializes. */
static void run_parts(int team, int parts, long count, cnn_range_fn *fn, void *arg)
{
    if (pool_lost) {
        for (int t = 0; t < parts; ++t) fn(arg, count * t / parts, count * (t + 1) / parts, t);
        return;
    }
    pthread_once(&fork_watch, watch_forks);
    regions_entered = 1;
#pragma omp parallel for num_threads(team) schedule(static, 1)
    for (int t = 0; t < team; ++t)
        if (t < parts) fn(arg, count * t / parts, count * (t + 1) / parts, t);
}

/* The team a region of `parts` parts is entered with: the context's whole
 * thread count. libgomp ends the pooled threads that a region with fewer threads than the
 * one before leaves out, and starts new ones for the next larger region, so
 * a step whose ops are cut into different counts (LeNet-5 at batch 32 on 16
 * threads: 16 for a convolution, 11 and 3 for the poolings, 15 for Adam,
 * ...) started and ended threads all the time. With one team size the
 * same threads serve every region, the idle ones only passing its barrier:
 * omp:16 went from 5.55 to 2.65 ms a step on the CIFAR CNN and from 3.96 to
 * 0.65 on LeNet-5 on the 16-core host (AVX2 both; BENCHMARKS.md, "CPU
 * scaling on the 16-core host: a fixed OpenMP team"; a team of `parts`
 * threads per region was a switch until 2026-11-26). */
static int team_for(const cnn_cpu_impl *impl, int parts)
{
    return impl->threads > parts ? impl->threads : parts;
}

void cnn_cpu_parallel(cnn_ctx *ctx, int parts, long count, cnn_range_fn *fn, void *arg)
{
    if (count <= 0) return;
    if (parts > count) parts = (int)count;
    if (parts <= 1) {
        fn(arg, 0, count, 0);
        return;
    }
    run_parts(team_for(cnn_cpu_get(ctx), parts), parts, count, fn, arg);
}

/* The fewest parts whose largest range is no longer than with `parts`: the
 * slowest part, ceil(count / parts) items, sets the time, so 32 images on 12
 * parts (3 each at most) take as long as on 11, and the twelfth thread would
 * only be woken and waited for. */
static int balanced_parts(long count, int parts)
{
    if (parts <= 1 || count <= 1) return 1;
    const long largest = (count + parts - 1) / parts;
    return (int)((count + largest - 1) / largest);
}

int cnn_cpu_parts(cnn_ctx *ctx, long count, double cost, double grain)
{
    const int threads = cnn_cpu_get(ctx)->threads;
    if (threads <= 1 || count <= 1) return 1;
    const double by_work = (double)count * cost / grain;
    long parts = by_work < 1.0 ? 1 : (long)by_work;
    if (parts > count) parts = count;
    if (parts > threads) parts = threads;
    return balanced_parts(count, (int)parts);
}

/* ------------------------------------------------------------ threaded GEMM */

enum { TILE_M = 6, TILE_N = 16 }; /* gemm.c's MR and NR: blocks are whole strips */

typedef struct gemm_job {
    const cnn_gemm_pack *packs;
    int by_cols; /* cut C by columns (else by rows) */
    int trans_a, trans_b, m, n, k, lda, ldb, ldc;
    float alpha, beta;
    const float *a, *b;
    float *c;
} gemm_job;

static void gemm_range(void *arg, long lo, long hi, int slot)
{
    const gemm_job *g = arg;
    if (g->by_cols) {
        const int j0 = (int)lo * TILE_N;
        const int j1 = (int)hi * TILE_N < g->n ? (int)hi * TILE_N : g->n;
        /* op(B) column j: b + j (stored (k, n)) or b + j*ldb (stored (n, k)) */
        const float *b = g->trans_b ? g->b + (size_t)j0 * g->ldb : g->b + j0;
        cnn_sgemm(&g->packs[slot], g->trans_a, g->trans_b, g->m, j1 - j0, g->k, g->alpha, g->a,
                  g->lda, b, g->ldb, g->beta, g->c + j0, g->ldc);
    } else {
        const int i0 = (int)lo * TILE_M;
        const int i1 = (int)hi * TILE_M < g->m ? (int)hi * TILE_M : g->m;
        /* op(A) row i: a + i*lda (stored (m, k)) or a + i (stored (k, m)) */
        const float *a = g->trans_a ? g->a + i0 : g->a + (size_t)i0 * g->lda;
        cnn_sgemm(&g->packs[slot], g->trans_a, g->trans_b, i1 - i0, g->n, g->k, g->alpha, a,
                  g->lda, g->b, g->ldb, g->beta, g->c + (size_t)i0 * g->ldc, g->ldc);
    }
}

/* Every element of C is computed by one call of cnn_sgemm over the whole k,
 * with the k blocking of the whole product, so each block's bits are those
 * of the serial product. */
void cnn_sgemm_parallel(cnn_ctx *ctx, int parts, int trans_a, int trans_b, int m, int n, int k,
                        float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                        float *c, int ldc)
{
    const cnn_cpu_impl *impl = cnn_cpu_get(ctx);
    gemm_job g = {impl->packs, 0, trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta, a, b, c};
    const long tiles_m = (m + TILE_M - 1) / TILE_M, tiles_n = (n + TILE_N - 1) / TILE_N;
    /* Cutting by columns repacks all of op(A) in every part, by rows all of
     * op(B): cut the way that repacks the smaller operand, unless the other
     * way has tiles for more parts. */
    const int cols_first = m <= n;
    const long first = cols_first ? tiles_n : tiles_m, second = cols_first ? tiles_m : tiles_n;
    g.by_cols = (first >= parts || first >= second) ? cols_first : !cols_first;
    const long tiles = g.by_cols ? tiles_n : tiles_m; /* the dimension that is cut */
    cnn_cpu_parallel(ctx, balanced_parts(tiles, parts < tiles ? parts : (int)tiles), tiles,
                     gemm_range, &g);
}

void cnn_cpu_sgemm(cnn_ctx *ctx, int trans_a, int trans_b, int m, int n, int k, float alpha,
                   const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    const cnn_cpu_impl *impl = cnn_cpu_get(ctx);
    const long tiles = (long)((m + TILE_M - 1) / TILE_M) * ((n + TILE_N - 1) / TILE_N);
    const int parts = tiles < 2 ? 1
                                : cnn_cpu_parts(ctx, tiles, (double)m * n * k / (double)tiles,
                                                CNN_GRAIN_MACS);
    if (parts <= 1)
        cnn_sgemm(&impl->packs[0], trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        cnn_sgemm_parallel(ctx, parts, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                           beta, c, ldc);
}

/* ------------------------------------------------------------------ context */

static void *aligned_alloc64(size_t bytes)
{
    void *p = NULL;
    if (bytes == 0) bytes = 64;
    if (posix_memalign(&p, 64, bytes) != 0) return NULL;
    return p;
}

void cnn_cpu_ctx_destroy(cnn_ctx *ctx)
{
    if (!ctx) return;
    cnn_cpu_impl *impl = ctx->impl;
    if (impl) {
        if (impl->packs)
            for (int t = 0; t < impl->threads; ++t) {
                free(impl->packs[t].a);
                free(impl->packs[t].b);
            }
        free(impl->packs);
        free(impl);
    }
    free(ctx);
}

cnn_status cnn_cpu_ctx_create(const cnn_backend *table, int threads, int chunked_filter,
                              cnn_ctx **out)
{
    cnn_ctx *ctx = calloc(1, sizeof *ctx);
    cnn_cpu_impl *impl = calloc(1, sizeof *impl);
    if (ctx) ctx->impl = impl;
    if (!ctx || !impl) goto oom;
    ctx->backend = table;
    ctx->num_threads = threads;
    impl->chunked_filter = chunked_filter;
    /* CNNCUDA_GEMM: checked here, so a bad value is refused when a Net is made */
    cnn_switches sw;
    cnn_status st = cnn_switches_read(&sw);
    if (st != CNN_OK) goto fail;
    if (sw.gemm >= 0 && cnn_gemm_set_path(sw.gemm) != 0) {
        st = cnn_set_error(CNN_ERR_VALUE, "CNNCUDA_GEMM: '%s' needs a CPU with %s; this one has "
                           "none (portable runs everywhere)",
                           sw.gemm == CNN_GEMM_AVX2 ? "avx2" : "avx512",
                           sw.gemm == CNN_GEMM_AVX2 ? "AVX2 and FMA" : "AVX-512F");
        goto fail;
    }
    impl->packs = calloc((size_t)threads, sizeof *impl->packs);
    if (!impl->packs) goto oom;
    impl->threads = threads;
    /* The B panel is sized for the largest block (KC x NC, 4 MiB); pages a
     * product never reaches are never touched, so never made resident. */
    for (int t = 0; t < threads; ++t) {
        impl->packs[t].a = aligned_alloc64(cnn_gemm_pack_a_floats() * sizeof(float));
        impl->packs[t].b = aligned_alloc64(cnn_gemm_pack_b_floats() * sizeof(float));
        if (!impl->packs[t].a || !impl->packs[t].b) goto oom;
    }
    *out = ctx;
    return CNN_OK;
fail:
    cnn_cpu_ctx_destroy(ctx);
    return st;
oom:
    cnn_cpu_ctx_destroy(ctx);
    if (!ctx) free(impl);
    return cnn_set_error(CNN_ERR_MEMORY, "out of host memory creating a %s context with %d "
                         "thread(s)", table->name, threads);
}
